"""Repeats of one sample are one cluster (issue 25): the board averages each sample's repeats before any statistic
(store_frame.average_repeats), and the interval on those per-sample means covers the true score at its nominal rate,
where treating the repeats as independent samples would be overconfident."""

from __future__ import annotations

import numpy as np

from ctxbench.leaderboard.stats import binomial_interval, mean_interval
from ctxbench.leaderboard.store_frame import average_repeats


def rows_of(p: np.ndarray, repeats: int, rng: np.random.Generator) -> list[dict]:
    """Score rows as the store frame builds them: one per repeat, each 0 or 1 with its sample's own p."""
    return [{"model": "m", "fingerprint": "f", "seed": 0, "task": "t", "length": 1024, "index": i, "prompt_hash": "h",
             "score": float(rng.random() < pi), "_repeat": r} for i, pi in enumerate(p) for r in range(repeats)]


def test_average_repeats_gives_one_row_per_sample():
    rows = rows_of(np.array([1.0, 0.0, 0.5]), 4, np.random.default_rng(0))
    got = average_repeats(rows)
    assert len(got) == 3 and [r["score"] for r in got[:2]] == [1.0, 0.0] and 0 <= got[2]["score"] <= 1


def test_per_sample_means_are_calibrated_and_independent_repeats_are_not():
    rng = np.random.default_rng(7)
    n, repeats, trials, truth = 40, 4, 200, 0.5
    cover_cluster = cover_naive = 0
    for _ in range(trials):
        p = rng.beta(0.5, 0.5, size=n)  # samples differ a lot in difficulty: repeats of one sample agree
        rows = rows_of(p, repeats, rng)
        means = [r["score"] for r in average_repeats(rows)]
        iv = mean_interval(means, n_boot=400, rng=rng)
        cover_cluster += iv.lo <= truth <= iv.hi
        flat = [r["score"] for r in rows]
        naive = binomial_interval(int(sum(flat)), len(flat))
        cover_naive += naive.lo <= truth <= naive.hi
    assert 0.90 <= cover_cluster / trials <= 0.99, cover_cluster / trials
    assert cover_naive / trials < 0.88, cover_naive / trials
