"""Intervals and tests that keep their stated level at any n. Every board, comparison and study uses these.

- A cell of 0/1 scores (k of n correct) gets the exact Clopper–Pearson interval at every n: its coverage is at
  least nominal at every p, where Wilson's dips to 84% near p = 0.99 for n = 30..200.
- A cell of continuous scores gets the hull of a studentised bootstrap (bootstrap-t) interval and a Clopper–Pearson
  at the variance-matched effective n, or none ("n too small") below MIN_BOOT_N: the percentile bootstrap covered
  87-91% at n = 10, t and BCa 85-93% on skewed scores, the bootstrap-t alone 70-94% on scores piled at 1.0.
- A mean of task means (a model's score at a length) gets Clopper–Pearson at a variance-based effective sample
  size for 0/1 scores, the same hull for continuous ones (stratified_interval).
- Samples that share a haystack or a document (a `clusters` id per sample) are not independent: every interval
  then uses a cluster-robust variance with t(G−1) quantiles (Korn & Graubard's effective n), at most G effective
  samples when the variance says nothing, and the paired test flips signs per cluster.
- A paired comparison reports its pairs, discordant pairs and a p-value: the exact sign test (exact McNemar)
  for binary scores, a paired sign-flip permutation test (exact when few, Monte Carlo otherwise) for continuous
  scores, unequal strata or clusters; its interval (sign_flip_interval) inverts that same test.
- k comparisons at once: Holm's step-down adjustment of their p-values.

docs/statistics.md states the guarantees; benchmarks/stats_calibration.py and benchmarks/interval_corners.py
measure them on independent simulators.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ctxbench.harness.core.stats.proportions import (
    SHRINK,
    Interval,
    binomial_interval,
    cluster_codes,
    floored_cluster_variance,
    hull,
    is_binary,
    matched_clopper_pearson,
    satterthwaite,
    shrunk_variances,
    t_interval,
)

MIN_BOOT_N = 10  # continuous cells smaller than this get no interval
EXACT_FLIPS = 16  # paired permutation tests enumerate all 2^m sign flips up to m nonzero differences
MONTE_CARLO_FLIPS = 20_000


def mean_interval(values: Sequence[float] | np.ndarray, *, level: float = 0.95, n_boot: int = 2000,
                  rng: np.random.Generator | None = None, clusters: Sequence | None = None) -> Interval:
    """The interval a cell deserves: Clopper–Pearson for 0/1 scores; for continuous ones (if n allows) the hull of
    the bootstrap-t and the matched Clopper–Pearson, which keeps its level where scores pile at 1.0 (the
    bootstrap-t alone covered 70-94% there); cluster-robust when samples share a cluster."""
    v = np.asarray(values, dtype=float)
    n = int(v.size)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, "n too small")
    codes = cluster_codes(clusters, n)
    binary, mean = is_binary(v), float(v.mean())
    if codes is None and binary:
        return binomial_interval(int(v.sum()), n, level=level)
    if codes is not None and binary:
        var, G = floored_cluster_variance(v, codes)
        return matched_clopper_pearson(mean, var, n_blind=G, df=G - 1, level=level, n=n, cap=n,
                                       method=f"clopper-pearson (Korn-Graubard, {G} clusters)")
    if n < MIN_BOOT_N:
        return Interval(mean, math.nan, math.nan, n, "n too small")
    if codes is not None:
        var, G = floored_cluster_variance(v, codes)
        cp = matched_clopper_pearson(mean, var, n_blind=G, df=G - 1, level=level, n=n, method="")
        return hull(t_interval(mean, var, G - 1, level, n, ""), cp,
                    f"cluster-robust t + matched clopper-pearson ({G} clusters)")
    boot = studentized_bootstrap([v], level=level, n_boot=n_boot, rng=rng or np.random.default_rng(0))
    cp = matched_clopper_pearson(mean, float(v.var(ddof=1)) / n, n_blind=n, df=n - 1, level=level, n=n, method="")
    return hull(boot, cp, "bootstrap-t + matched clopper-pearson")


def studentized_bootstrap(parts: Sequence[np.ndarray], *, level: float, n_boot: int, rng: np.random.Generator,
                          method: str = "bootstrap-t") -> Interval:
    """The bootstrap-t (studentised bootstrap) interval of the mean of the parts' means, each part resampled on its
    own: the quantiles of T* = (m* − m)/SE* replace t's. Second-order accurate, so it keeps its coverage on skewed
    0..1 scores where t (85–93%), BCa (86–92%) and the percentile bootstrap (82–90%) fall short at n = 10–15.
    SE is studentised with variances shrunk towards ½ (shrunk_variances), so a resample of identical scores keeps
    a finite T* instead of being dropped (dropping them put the lower end at the mean when scores pile at 1.0).
    Clipped to the 0..1 scale of board scores."""
    k = len(parts)
    mean = float(np.mean([p.mean() for p in parts]))
    sizes = np.array([p.size for p in parts], dtype=float)
    sums, squares = np.array([p.sum() for p in parts]), np.array([(p * p).sum() for p in parts])
    se = math.sqrt(float((shrunk_variances(sums, squares, sizes) / sizes).sum())) / k
    n = int(sizes.sum())
    means, variances = np.zeros(n_boot), np.zeros(n_boot)
    for p in parts:
        x = p[rng.integers(0, p.size, size=(n_boot, p.size))]
        means += x.mean(axis=1) / k
        variances += shrunk_variances(x.sum(axis=1), (x * x).sum(axis=1), p.size) / p.size / k ** 2
    t_star = (means - mean) / np.sqrt(variances)
    lo_q, hi_q = np.quantile(t_star, [(1 - level) / 2, 1 - (1 - level) / 2])
    lo, hi = max(0.0, mean - hi_q * se), min(1.0, mean - lo_q * se)
    return Interval(mean, min(lo, mean), max(hi, mean), n, method)


def stratified_interval(strata: Sequence[Sequence[float] | np.ndarray], *, level: float = 0.95, n_boot: int = 2000,
                        rng: np.random.Generator | None = None, clusters: Sequence[Sequence] | None = None) -> Interval:
    """The interval of a mean of stratum means (a model's score at a length: the mean of its task means).

    0/1 strata: Clopper–Pearson at n_eff = min(D, p̄(1−p̄) / v̂), with v̂ = Σ p̃_i(1−p̃_i)/n_i / k² and p̄ the mean
    of the task proportions p̃_i shrunk towards ½ by SHRINK pseudo-samples (shrunk towards the pooled mean, a small
    hard task that scored 100% by chance added almost no variance: 65% coverage), and D = k² / Σ 1/n_i (Korn &
    Graubard's design term), or k · min n_i when every task is at 100% (or 0%): the exact one-sided bound there is
    governed by the smallest task (k² / Σ 1/n_i covered 76% with 12 perfect tasks of 500 beside one of 2 at
    p = .5). At equal n, p̄(1−p̄)/v̂ ≥ D (Jensen), so the interval is the pooled k-of-N one.
    Continuous strata: the hull of a stratified bootstrap-t (each stratum resampled on its own) and the matched
    Clopper–Pearson at the plain stratified variance, when every stratum has 2 values and all together MIN_BOOT_N,
    else "n too small". `clusters` (one id list per stratum) makes each stratum's variance cluster-robust.
    """
    pairs = [(np.asarray(s, dtype=float), None if clusters is None else clusters[i]) for i, s in enumerate(strata)]
    pairs = [(s, c) for s, c in pairs if s.size]
    if not pairs:
        return Interval(math.nan, math.nan, math.nan, 0, "n too small")
    if len(pairs) == 1:
        return mean_interval(pairs[0][0], level=level, n_boot=n_boot, rng=rng, clusters=pairs[0][1])
    parts = [s for s, _ in pairs]
    codes = [cluster_codes(c, s.size) for s, c in pairs]
    if all(is_binary(s) for s in parts):
        return _stratified_binary(parts, codes, level)
    k, n = len(parts), int(sum(s.size for s in parts))
    mean = float(np.mean([s.mean() for s in parts]))
    if min(s.size for s in parts) < 2 or n < MIN_BOOT_N:
        return Interval(mean, math.nan, math.nan, n, "n too small")
    var_i, units = _stratum_variances(parts, codes, binary=False)
    df = satterthwaite(var_i, units - 1)
    var = float(var_i.sum()) / k ** 2
    cp = matched_clopper_pearson(mean, var, n_blind=k * float(units.min()), df=df, level=level, n=n, method="")
    if any(c is not None for c in codes):
        return hull(t_interval(mean, var, df, level, n, ""), cp, "stratified cluster-robust t + matched clopper-pearson")
    boot = studentized_bootstrap(parts, level=level, n_boot=n_boot, rng=rng or np.random.default_rng(0),
                                 method="")
    return hull(boot, cp, "stratified bootstrap-t + matched clopper-pearson")


def _stratum_variances(parts: list[np.ndarray], codes: list[np.ndarray | None], *,
                       binary: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each stratum's variance of its mean and its number of independent units (samples, or clusters): shrunk
    towards ½ for 0/1 scores, plain (n − 1 denominator) for continuous ones; cluster-robust where that is larger."""
    sizes = np.array([s.size for s in parts], dtype=float)
    if binary:
        var_i = shrunk_variances(np.array([s.sum() for s in parts]), np.array([(s * s).sum() for s in parts]), sizes)
    else:
        var_i = np.array([float(s.var(ddof=1)) for s in parts])
    var_i = var_i / sizes
    units = sizes.copy()
    for i, c in enumerate(codes):
        if c is not None:
            cv, units[i] = floored_cluster_variance(parts[i], c)
            var_i[i] = max(var_i[i], cv)
    return var_i, units


def _stratified_binary(parts: list[np.ndarray], codes: list[np.ndarray | None], level: float) -> Interval:
    """Korn & Graubard's Clopper–Pearson for a mean of task proportions (stratified_interval's 0/1 case)."""
    k, n = len(parts), int(sum(s.size for s in parts))
    sizes = np.array([s.size for s in parts], dtype=float)
    mean = float(np.mean([s.mean() for s in parts]))
    var_i, units = _stratum_variances(parts, codes, binary=True)
    clustered = any(c is not None for c in codes)
    design = k * float(units.min()) if mean in (0.0, 1.0) else k ** 2 / float((1 / sizes).sum())
    shrunk = float(np.mean([(s.sum() + SHRINK / 2) / (s.size + SHRINK) for s in parts]))
    return matched_clopper_pearson(mean, float(var_i.sum()) / k ** 2, n_blind=design, cap=design,
                                   spread=shrunk * (1 - shrunk),
                                   df=float(units.sum() - k) if clustered else None, level=level, n=n,
                                   method="clopper-pearson (stratified, clustered)" if clustered else "clopper-pearson (stratified)")


@dataclass(frozen=True)
class PairedTest:
    n_pairs: int
    n_discordant: int  # pairs whose scores differ
    diff: float  # the statistic: mean difference A − B (mean of stratum means when strata are given)
    p_value: float
    method: str  # "exact sign test", "[cluster ]sign-flip permutation (exact | N draws)", "no discordant pairs"


def paired_test(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, strata: Sequence | None = None,
                clusters: Sequence | None = None, rng: np.random.Generator | None = None) -> PairedTest:
    """Two-sided test of 'A and B score the same' on matched pairs.

    Under the null each pair's difference is symmetric about 0, so flipping its sign leaves the distribution
    unchanged: the sign-flip permutation test is exact for any scores. With binary scores and one stratum it
    reduces to the exact sign test on the discordant pairs (exact McNemar), computed with the binomial.
    With strata (task × length cells), the statistic is the mean of stratum means, as the board reports it.
    With clusters (pairs sharing a haystack or document), whole clusters flip together: the unit is the cluster.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError("paired_test: a and b must have one score per pair")
    d = a - b
    n = int(d.size)
    weights = _stratum_weights(strata, n)
    diff = float(np.sum(weights * d)) if n else math.nan
    m = int(np.count_nonzero(d))
    if m == 0:
        return PairedTest(n, 0, diff if n else math.nan, 1.0, "no discordant pairs")
    codes = cluster_codes(clusters, n)
    kind = "cluster sign-flip permutation" if codes is not None else "sign-flip permutation"
    if codes is None and np.allclose(weights, weights[0]) and np.isin(d[d != 0], (-1.0, 1.0)).all():
        from scipy import stats  # here, not at the top: its import would cost every score command a second

        wins = int((d > 0).sum())
        return PairedTest(n, m, diff, min(1.0, float(stats.binomtest(wins, m, 0.5).pvalue)), "exact sign test")
    units, unit_weights = _units(weights * d, weights, codes)
    live = units[units != 0]
    if live.size <= EXACT_FLIPS:
        signs = _all_signs(live.size)
        p = float(np.mean(np.abs(signs @ live) >= abs(live.sum()) - 1e-12))
        return PairedTest(n, m, diff, p, f"{kind} (exact)")
    flips_a, _ = _flip_sums(units, unit_weights, rng or np.random.default_rng(0), MONTE_CARLO_FLIPS)
    p = (int((np.abs(flips_a) >= abs(units.sum()) - 1e-12).sum()) + 1) / (MONTE_CARLO_FLIPS + 1)
    return PairedTest(n, m, diff, float(p), f"{kind} ({MONTE_CARLO_FLIPS:,} draws)")


def _all_signs(m: int) -> np.ndarray:
    """Every one of the 2^m sign vectors, as rows."""
    return 1.0 - 2.0 * ((np.arange(2 ** m)[:, None] >> np.arange(m)) & 1)


def _units(wd: np.ndarray, w: np.ndarray, codes: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The flip units' totals of w·d and of w: one per pair, or one per cluster."""
    if codes is None:
        return wd, w
    return np.bincount(codes, weights=wd), np.bincount(codes, weights=w)


def _flip_sums(wd: np.ndarray, w: np.ndarray, rng: np.random.Generator, flips: int) -> tuple[np.ndarray, np.ndarray]:
    """Monte Carlo sign flips of the units: per draw, Σ s·(w·d) and Σ s·w. Units with the same (w·d, w) are
    flipped together through one binomial count, so 0/1 scores cost a few columns whatever the sample size."""
    keys, counts = np.unique(np.column_stack([wd, w]), axis=0, return_counts=True)
    sums_a, sums_b = np.empty(flips), np.empty(flips)
    rows = max(1, 2_000_000 // counts.size)  # bounded memory with many distinct continuous differences
    single = bool(counts.max() == 1)  # every unit distinct: fair coins, drawn faster than binomials
    for start in range(0, flips, rows):
        shape = (min(rows, flips - start), counts.size)
        plus = rng.integers(0, 2, size=shape, dtype=np.int8) if single else rng.binomial(counts, 0.5, size=shape)
        net = 2.0 * plus - counts
        sums_a[start:start + net.shape[0]], sums_b[start:start + net.shape[0]] = net @ keys[:, 0], net @ keys[:, 1]
    return sums_a, sums_b


def sign_flip_interval(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, strata: Sequence | None = None,
                       clusters: Sequence | None = None, level: float = 0.95, flips: int | None = None,
                       rng: np.random.Generator | None = None) -> tuple[float, float, float]:
    """(lo, hi, p at 0) of the paired difference by inverting the sign-flip test: the shifts δ for which
    'the differences minus δ are symmetric about 0' is not rejected at 1 − level (Hartigan's inversion), each
    bound found by bisection on the same sign draws, and the hull of that set returned. With the rng of paired_test
    it reproduces its p at δ = 0."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = a - b
    weights = _stratum_weights(strata, d.size)
    wd, w = _units(weights * d, weights, cluster_codes(clusters, d.size))
    estimate, alpha = float(wd.sum()), 1 - level
    if wd.size <= EXACT_FLIPS:
        signs = _all_signs(wd.size)
        flip_a, flip_b, extra = signs @ wd, signs @ w, 0
    else:
        flip_a, flip_b = _flip_sums(wd, w, rng or np.random.default_rng(0), flips or MONTE_CARLO_FLIPS)
        extra = 1

    def p_at(delta: float) -> float:
        hits = int((np.abs(flip_a - delta * flip_b) >= abs(estimate - delta) - 1e-12).sum())
        return (hits + extra) / (flip_a.size + extra)

    scale = float(np.sqrt(((wd - estimate * w) ** 2).sum())) or 1e-9
    bounds = []
    for direction in (-1.0, 1.0):
        inside, step = estimate, scale
        outside = estimate + direction * step
        for _ in range(60):
            if p_at(outside) < alpha:
                break
            inside, step = outside, step * 2
            outside = estimate + direction * step
        while abs(outside - inside) > 1e-4 * scale:
            mid = (inside + outside) / 2
            inside, outside = (mid, outside) if p_at(mid) >= alpha else (inside, mid)
        bounds.append(inside)
    p_zero = p_at(0.0)
    if p_zero >= alpha:  # 0 is in the confidence set: with 0/1 scores it can be an isolated tie point the bisection
        bounds = [min(bounds[0], 0.0), max(bounds[1], 0.0)]  # steps over, so the hull is closed over it
    return bounds[0], bounds[1], p_zero


def _stratum_weights(strata: Sequence | None, n: int) -> np.ndarray:
    """Per-pair weights that make sum(w * d) the mean over strata of the stratum means."""
    if strata is None or n == 0:
        return np.full(n, 1.0 / max(n, 1))
    keys = list(strata)
    if len(keys) != n:
        raise ValueError("paired_test: give one stratum per pair")
    sizes: dict = {}
    for k in keys:
        sizes[k] = sizes.get(k, 0) + 1
    return np.array([1.0 / (len(sizes) * sizes[k]) for k in keys])


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error control for k comparisons)."""
    p = np.asarray(p_values, dtype=float)
    k = p.size
    order = np.argsort(p)
    adjusted = np.empty(k)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (k - rank) * p[i]))
        adjusted[i] = running
    return adjusted.tolist()


def verdict(test: PairedTest, *, alpha: float = 0.05, adjusted_p: float | None = None, names: tuple[str, str] = ("A", "B")) -> str:
    """The comparison in words, for reports: significant or not, at which level, on how many pairs."""
    p = test.p_value if adjusted_p is None else adjusted_p
    a, b = names
    basis = f"{test.n_pairs} pairs, {test.n_discordant} discordant, p = {p:.3g}" + (" (Holm-adjusted)" if adjusted_p is not None else "")
    if p < alpha:
        return f"{a} {'beats' if test.diff > 0 else 'trails'} {b} significantly at {alpha:g} ({basis})"
    return f"no significant difference between {a} and {b} at {alpha:g} ({basis})"
