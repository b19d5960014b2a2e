"""No interval the board can print is inverted (issue 31: "never print an interval whose lower end exceeds its upper
end"): the fixed-n intervals of a cell and of a length's average, over designs from every corner the issue lists
(scores piled at 1, unequal n, clusters, continuous scores, n of 1), and the sequential ones
(tests/leaderboard/test_sequential_guarantees.py::test_no_confidence_sequence_is_inverted_when_its_target_moves)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ctxbench.leaderboard.aggregate import length_averages
from ctxbench.leaderboard.stats import binomial_interval, mean_interval, stratified_interval


def designs(rng: np.random.Generator):
    """(strata, clusters or None): 0/1 and continuous, piled at 1, unequal n, clustered, tiny."""
    for _ in range(60):
        k = int(rng.integers(1, 5))
        sizes = rng.choice([1, 2, 3, 10, 30, 200], size=k)
        binary = rng.random() < 0.5
        p = rng.choice([0.0, 0.5, 0.9, 0.98, 1.0])
        strata = []
        for n in sizes:
            if binary:
                strata.append((rng.random(n) < p).astype(float))
            else:
                strata.append(np.where(rng.random(n) < p, 1.0, rng.choice([0.0, 0.25, 0.75], size=n)))
        clustered = rng.random() < 0.3 and min(sizes) >= 10  # at least 4 clusters of 3 per stratum
        clusters = [list(np.arange(n) // 3) for n in sizes] if clustered else None
        yield strata, clusters


def ordered(lo: float, hi: float) -> bool:
    return (math.isnan(lo) and math.isnan(hi)) or lo <= hi


def test_fixed_intervals_are_never_inverted():
    rng = np.random.default_rng(3)
    for strata, clusters in designs(rng):
        iv = stratified_interval(strata, n_boot=200, rng=np.random.default_rng(0), clusters=clusters)
        assert ordered(iv.lo, iv.hi), (iv, strata)
        for level in (0.95, 1 - 0.05 / 6):
            one = mean_interval(strata[0], level=level, n_boot=200, rng=np.random.default_rng(0),
                                clusters=None if clusters is None else clusters[0])
            assert ordered(one.lo, one.hi), (one, strata[0])
    for n in (1, 2, 20, 500):
        for k in (0, 1, n // 2, n - 1, n):
            iv = binomial_interval(max(k, 0), n)
            assert iv.lo <= iv.hi, (k, n, iv)


def test_the_boards_length_intervals_are_never_inverted_and_ci_lower_spends_alpha():
    rng = np.random.default_rng(4)
    rows = []
    for model in range(12):
        for length in (4096, 8192, 16384):
            for task in range(int(rng.integers(1, 4))):
                n = int(rng.choice([2, 10, 40]))
                p = float(rng.choice([0.5, 0.95, 1.0]))
                rows += [(f"m{model}", f"ruler/t{task}", length, i, float(rng.random() < p)) for i in range(n)]
    avgs = length_averages(pd.DataFrame(rows, columns=["model", "task", "length", "index", "score"]), n_boot=50)
    for r in avgs.itertuples():
        assert ordered(r.lo, r.hi), r
        assert math.isnan(r.lo) or r.lo_spent <= r.lo + 1e-12, r  # 3 lengths: each bound at 1 - 0.05/3
