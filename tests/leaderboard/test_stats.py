"""The statistics are honest: interval coverage on simulated binomial data, paired-test false positives on null data."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from ctxbench.leaderboard.stats import (
    binomial_interval,
    holm,
    mean_interval,
    paired_test,
    sign_flip_interval,
    stratified_interval,
    verdict,
)

GRID = np.linspace(0.05, 0.95, 19)


def coverage(n: int, grid: np.ndarray = GRID) -> np.ndarray:
    """Exact coverage of the cell interval at each p of the grid (summed over the binomial pmf, no simulation noise)."""
    ks = np.arange(n + 1)
    bounds = [binomial_interval(int(k), n) for k in ks]
    lo = np.array([b.lo for b in bounds])
    hi = np.array([b.hi for b in bounds])
    return np.array([(sps.binom.pmf(ks, n, p) * ((lo <= p) & (p <= hi))).sum() for p in grid])


@pytest.mark.parametrize("n", [2, 5, 20, 30, 50, 100, 200])
def test_binomial_interval_coverage(n):
    """Clopper–Pearson at every n: never below nominal, including p near 1 where Wilson covered 84-91%."""
    cov = coverage(n)
    assert cov.min() >= 0.95 - 1e-9, cov.min()
    near_one = coverage(n, grid=np.linspace(0.98, 0.999, 40))
    assert near_one.min() >= 0.95 - 1e-9, near_one.min()
    if n >= 20:
        assert abs(cov.mean() - 0.95) <= 0.035, cov.mean()


def test_binomial_interval_matches_a_simulation():
    """The pmf-based coverage above agrees with plain simulation (guards the coverage helper itself)."""
    rng = np.random.default_rng(1)
    n, p = 20, 0.3
    k = rng.binomial(n, p, size=20000)
    covers = np.array([binomial_interval(x, n).lo <= p <= binomial_interval(x, n).hi for x in range(n + 1)])
    hits = covers[k].mean()  # the same draws, each interval computed once per k
    assert abs(hits - coverage(n)[np.argmin(abs(GRID - p))]) < 0.01


def test_two_of_two_is_not_certainty():
    iv = binomial_interval(2, 2)
    assert iv.hi == 1.0 and 0.10 < iv.lo < 0.20  # exact: [15.8, 100], not [100, 100]


def test_continuous_cells_need_enough_samples():
    small = mean_interval([0.2, 0.5, 0.7])
    assert small.method == "n too small" and math.isnan(small.lo)
    mid = mean_interval(np.linspace(0, 1, 12) ** 2)
    assert mid.method.startswith("bootstrap-t") and 0 <= mid.lo < mid.mean < mid.hi <= 1
    big = mean_interval(np.linspace(0, 1, 50) ** 2)
    assert big.method.startswith("bootstrap-t") and big.lo < big.mean < big.hi


def test_sign_test_on_the_issue_case():
    """14 pairs, one discordant in A's favour: nowhere near significant (an exact sign test gives p = 1)."""
    a = np.array([1] * 8 + [0] * 6, dtype=float)
    b = a.copy()
    b[0] = 0
    t = paired_test(a, b)
    assert (t.n_pairs, t.n_discordant) == (14, 1) and t.p_value == 1.0 and t.method == "exact sign test"
    assert verdict(t).startswith("no significant difference")


def test_permutation_test_is_exact_for_small_m():
    d = np.array([0.3, 0.1, -0.05, 0.2, 0.4])
    t = paired_test(d, np.zeros_like(d))
    flips = np.array(list(itertools.product((1, -1), repeat=5)))
    expected = np.mean(np.abs(flips @ d) >= abs(d.sum()) - 1e-12)
    assert t.p_value == pytest.approx(expected) and t.method.endswith("(exact)")


@pytest.mark.parametrize("kind", ["binary", "continuous"])
def test_paired_false_positive_rate_on_null_data(kind):
    rng = np.random.default_rng(7)
    trials, rejections = 1000, 0
    for _ in range(trials):
        n = 40
        if kind == "binary":
            p = rng.uniform(0.2, 0.8, size=n)  # per-item difficulty shared by both models
            a, b = rng.binomial(1, p), rng.binomial(1, p)
        else:
            base = rng.uniform(0, 1, size=n)
            a, b = np.clip(base + rng.normal(0, 0.1, n), 0, 1), np.clip(base + rng.normal(0, 0.1, n), 0, 1)
        rejections += paired_test(a, b, rng=rng).p_value < 0.05
    assert rejections / trials <= 0.05 + 0.02, rejections / trials


def test_paired_test_detects_a_real_effect():
    rng = np.random.default_rng(3)
    p = rng.uniform(0.2, 0.8, size=200)
    a, b = rng.binomial(1, np.minimum(p + 0.2, 1)), rng.binomial(1, p)
    assert paired_test(a, b).p_value < 0.01


def test_strata_weight_cells_equally():
    a = np.array([1, 1, 1, 1, 0, 0], dtype=float)
    b = np.zeros(6)
    t = paired_test(a, b, strata=["x", "x", "x", "x", "y", "y"])
    assert t.diff == pytest.approx(0.5)  # mean of cell means (1.0, 0.0), not the pooled 4/6


def test_holm_adjustment():
    p = [0.01, 0.04, 0.03, 0.5]
    # sorted: 0.01*4, 0.03*3, 0.04*2, 0.5*1, made monotone
    assert holm(p) == pytest.approx([0.04, 0.09, 0.09, 0.5])


@pytest.mark.parametrize("per_task", [1, 2, 5])
def test_mean_of_task_means_interval_coverage(per_task):
    """A length's score (13 tasks of unequal accuracy, few samples each) is covered at least nominally."""
    rng = np.random.default_rng(per_task)
    ps = rng.uniform(0.3, 1.0, size=13)
    hits = [stratified_interval([rng.binomial(1, p, size=per_task) for p in ps]) for _ in range(2000)]
    coverage = np.mean([iv.lo <= ps.mean() <= iv.hi for iv in hits])
    assert coverage >= 0.95 - 0.01, coverage
    ones = stratified_interval([[1.0] * per_task] * 13)  # all correct is not certainty
    n = 13 * per_task
    assert ones.hi == 1.0 and ones.lo == pytest.approx(0.025 ** (1 / n))  # Clopper-Pearson's closed form at k = n


def test_unequal_task_sizes_keep_their_coverage():
    """The issue's case: 11 easy tasks of 100 samples beside 2 hard ones of 5. The design effect alone (which assumes
    every task at the mean) covered 66%; the variance-based n_eff restores nominal coverage."""
    rng = np.random.default_rng(4)
    ps = [0.95] * 11 + [0.3] * 2
    ns = [100] * 11 + [5] * 2
    ivs = [stratified_interval([rng.binomial(1, p, n) for p, n in zip(ps, ns)]) for _ in range(1500)]
    assert np.mean([iv.lo <= np.mean(ps) <= iv.hi for iv in ivs]) >= 0.935
    equal = [rng.binomial(1, 0.8, 40) for _ in range(13)]  # equal n and p: the pooled k-of-N interval, unchanged
    k = sum(e.sum() for e in equal)
    assert (stratified_interval(equal).lo, stratified_interval(equal).hi) == pytest.approx(
        (binomial_interval(int(k), 13 * 40).lo, binomial_interval(int(k), 13 * 40).hi))


def test_shared_haystacks_widen_the_cell_interval():
    """Samples of one haystack move together: with a cluster id per sample the interval is Korn-Graubard's (wider)."""
    rng = np.random.default_rng(5)
    hay = np.repeat(np.arange(10), 10)
    scores = (rng.random(100) < np.clip(0.6 + rng.normal(0, 0.3, 10)[hay], 0, 1)).astype(float)
    naive, clustered = mean_interval(scores), mean_interval(scores, clusters=hay)
    assert clustered.method.startswith("clopper-pearson (Korn-Graubard, 10 clusters")
    assert clustered.hi - clustered.lo > naive.hi - naive.lo
    assert mean_interval(scores, clusters=np.arange(100)).method == "clopper-pearson"  # singletons: no clustering


def test_clustered_pairs_flip_together():
    d = np.array([1.0, 1.0, 1.0, 1.0, -1.0, -1.0])
    t = paired_test(d, np.zeros(6), clusters=[0, 0, 0, 0, 1, 1])
    assert t.method == "cluster sign-flip permutation (exact)" and t.p_value == 1.0  # 2 units: every flip is as extreme
    assert paired_test(d, np.zeros(6)).method == "exact sign test"


@pytest.mark.parametrize("shift", [0.0, 0.15, 0.3])
def test_the_paired_interval_inverts_the_paired_test(shift):
    """Same rng, same draws: the interval excludes 0 exactly when the test's p is below 1 - level."""
    rng = np.random.default_rng(6)
    strata = np.repeat(["x", "y", "z"], 30)
    a = (rng.random(90) < 0.5 + shift).astype(float)
    b = (rng.random(90) < np.where(strata == "x", 0.3, 0.6)).astype(float)
    w = np.where(strata == "x", 0.5, 1.0)
    lo, hi, p0 = sign_flip_interval(a * w, b * w, strata=list(strata), rng=np.random.default_rng(9))
    t = paired_test(a * w, b * w, strata=list(strata), rng=np.random.default_rng(9))
    assert p0 == pytest.approx(t.p_value) and t.method.startswith("sign-flip permutation")
    assert lo <= t.diff <= hi and (lo > 0 or hi < 0) == (t.p_value < 0.05)


def test_the_board_honours_a_cluster_column():
    """A `cluster` column in the score frame (samples sharing a haystack) reaches every interval and test."""
    import pandas as pd

    from ctxbench.leaderboard.aggregate import length_averages, paired_comparison, task_length_table

    rng = np.random.default_rng(8)
    rows = []
    for task in ("t", "u"):
        lift = rng.normal(0, 0.3, 8)
        for i in range(80):
            for model, base in (("A", 0.6), ("B", 0.5)):
                rows.append((model, task, 4096, i, float(rng.random() < np.clip(base + lift[i // 10], 0, 1)), f"{task}-h{i // 10}"))
    df = pd.DataFrame(rows, columns=["model", "task", "length", "index", "score", "cluster"])
    cells = task_length_table(df)
    assert cells["method"].str.startswith("clopper-pearson (Korn-Graubard, 8 clusters").all()
    assert length_averages(df)["method"].eq("clopper-pearson (stratified, clustered)").all()
    comp = paired_comparison(df, model_a="A", model_b="B")
    assert comp.method.startswith("cluster sign-flip permutation") and "clusters flip together" in comp.ci_note
    plain = paired_comparison(df.drop(columns="cluster"), model_a="A", model_b="B")
    assert plain.method == "sign-flip permutation (20,000 draws)" or plain.method == "exact sign test"
