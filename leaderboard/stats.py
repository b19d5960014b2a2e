"""Intervals and tests that stay honest at small n. Every board, comparison and study uses these.

- A cell of binary scores (k of n correct) gets a binomial interval: exact Clopper–Pearson below
  EXACT_BELOW samples (coverage is guaranteed at least nominal, where Wilson's dips to ~85% at n=2),
  Wilson's score interval above (near-nominal and tighter).
- A cell of continuous scores gets a percentile bootstrap, or no interval ("n too small") below MIN_BOOT_N:
  a bootstrap of 2 values is not an interval.
- A mean of task means (a model's score at one length) gets the binomial interval at its effective sample size
  for 0/1 scores, or a stratified bootstrap when every task has enough continuous scores (stratified_interval).
- A paired comparison reports its pairs, discordant pairs and a p-value: the exact sign test (exact McNemar)
  for binary scores, a paired sign-flip permutation test (exact when few, Monte Carlo otherwise) for continuous
  scores or unequal strata.
- k comparisons at once: Holm's step-down adjustment of their p-values.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

EXACT_BELOW = 30  # binomial cells smaller than this get the exact (Clopper–Pearson) interval
MIN_BOOT_N = 10  # continuous cells smaller than this get no bootstrap interval
EXACT_FLIPS = 16  # paired permutation tests enumerate all 2^m sign flips up to m nonzero differences
MONTE_CARLO_FLIPS = 20_000


@dataclass(frozen=True)
class Interval:
    mean: float
    lo: float
    hi: float
    n: int
    method: str  # "clopper-pearson", "wilson", "bootstrap", or "n too small"


def is_binary(values: Sequence[float] | np.ndarray) -> bool:
    v = np.asarray(values, dtype=float)
    return bool(v.size) and bool(np.isin(v, (0.0, 1.0)).all())


def clopper_pearson(k: float, n: float, *, level: float = 0.95) -> tuple[float, float]:
    a = 1 - level
    lo = 0.0 if k <= 0 else float(stats.beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k >= n else float(stats.beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


def wilson(k: float, n: float, *, level: float = 0.95) -> tuple[float, float]:
    z = float(stats.norm.ppf(1 - (1 - level) / 2))
    p = k / n
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, centre - half), min(1.0, centre + half)


def binomial_interval(k: int, n: int, *, level: float = 0.95) -> Interval:
    if n <= 0:
        return Interval(math.nan, math.nan, math.nan, 0, "n too small")
    if n < EXACT_BELOW:
        return Interval(k / n, *clopper_pearson(k, n, level=level), n, "clopper-pearson")
    return Interval(k / n, *wilson(k, n, level=level), n, "wilson")


def mean_interval(values: Sequence[float] | np.ndarray, *, level: float = 0.95, n_boot: int = 2000,
                  rng: np.random.Generator | None = None) -> Interval:
    """The interval a cell deserves: binomial for 0/1 scores, bootstrap for continuous ones (if n allows)."""
    v = np.asarray(values, dtype=float)
    n = int(v.size)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, "n too small")
    if is_binary(v):
        return binomial_interval(int(v.sum()), n, level=level)
    if n < MIN_BOOT_N:
        return Interval(float(v.mean()), math.nan, math.nan, n, "n too small")
    rng = rng or np.random.default_rng(0)
    draws = v[rng.integers(0, n, size=(n_boot, n))].mean(axis=1)
    tail = (1 - level) / 2
    lo, hi = np.quantile(draws, [tail, 1 - tail])
    return Interval(float(v.mean()), float(lo), float(hi), n, "bootstrap")


def stratified_interval(strata: Sequence[Sequence[float] | np.ndarray], *, level: float = 0.95, n_boot: int = 2000,
                        rng: np.random.Generator | None = None) -> Interval:
    """The interval of a mean of stratum means (a model's score at a length: the mean of its task means).

    Binary strata: the binomial interval at the effective sample size n_eff = k² / Σ 1/n_i with p̂·n_eff successes
    (Korn & Graubard's design-effect form). With equal strata it is exactly the pooled k-of-N interval, which stays
    conservative when the tasks' accuracies differ (a sum of unequal Bernoullis varies less than a binomial).
    Continuous strata: a stratified bootstrap when every stratum has at least MIN_BOOT_N values, else "n too small".
    """
    parts = [np.asarray(s, dtype=float) for s in strata]
    parts = [s for s in parts if s.size]
    if not parts:
        return Interval(math.nan, math.nan, math.nan, 0, "n too small")
    n = int(sum(s.size for s in parts))
    mean = float(np.mean([s.mean() for s in parts]))
    if len(parts) == 1:
        return mean_interval(parts[0], level=level, n_boot=n_boot, rng=rng)
    if all(is_binary(s) for s in parts):
        n_eff = len(parts) ** 2 / sum(1.0 / s.size for s in parts)
        k_eff = mean * n_eff
        lo, hi = clopper_pearson(k_eff, n_eff, level=level) if n_eff < EXACT_BELOW else wilson(k_eff, n_eff, level=level)
        return Interval(mean, lo, hi, n, "clopper-pearson (stratified)" if n_eff < EXACT_BELOW else "wilson (stratified)")
    if min(s.size for s in parts) < MIN_BOOT_N:
        return Interval(mean, math.nan, math.nan, n, "n too small")
    rng = rng or np.random.default_rng(0)
    draws = np.mean([s[rng.integers(0, s.size, size=(n_boot, s.size))].mean(axis=1) for s in parts], axis=0)
    tail = (1 - level) / 2
    lo, hi = np.quantile(draws, [tail, 1 - tail])
    return Interval(mean, float(lo), float(hi), n, "stratified bootstrap")


@dataclass(frozen=True)
class PairedTest:
    n_pairs: int
    n_discordant: int  # pairs whose scores differ
    diff: float  # the statistic: mean difference A − B (mean of stratum means when strata are given)
    p_value: float
    method: str  # "exact sign test", "sign-flip permutation (exact)", "sign-flip permutation (N draws)"


def paired_test(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, strata: Sequence | None = None,
                rng: np.random.Generator | None = None) -> PairedTest:
    """Two-sided test of 'A and B score the same' on matched pairs.

    Under the null each pair's difference is symmetric about 0, so flipping its sign leaves the distribution
    unchanged: the sign-flip permutation test is exact for any scores. With binary scores and one stratum it
    reduces to the exact sign test on the discordant pairs (exact McNemar), computed with the binomial.
    With strata (task × length cells), the statistic is the mean of stratum means, as the board reports it.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError("paired_test: a and b must have one score per pair")
    d = a - b
    n = int(d.size)
    groups = _stratum_weights(strata, n)
    diff = float(np.sum(groups * d)) if n else math.nan
    nonzero = np.flatnonzero(d != 0)
    m = int(nonzero.size)
    if m == 0:
        return PairedTest(n, 0, diff if n else math.nan, 1.0, "no discordant pairs")
    equal_weights = np.allclose(groups, groups[0])
    if equal_weights and np.isin(d[nonzero], (-1.0, 1.0)).all():
        wins = int((d[nonzero] > 0).sum())
        p = float(stats.binomtest(wins, m, 0.5).pvalue)
        return PairedTest(n, m, diff, min(1.0, p), "exact sign test")
    w = groups[nonzero] * d[nonzero]
    observed = abs(w.sum())
    if m <= EXACT_FLIPS:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=m)))
        stat = np.abs(signs @ w)
        p = float(np.mean(stat >= observed - 1e-12))
        return PairedTest(n, m, diff, p, "sign-flip permutation (exact)")
    rng = rng or np.random.default_rng(0)
    hits = 0
    for start in range(0, MONTE_CARLO_FLIPS, 2000):
        signs = rng.choice((-1.0, 1.0), size=(min(2000, MONTE_CARLO_FLIPS - start), m))
        hits += int((np.abs(signs @ w) >= observed - 1e-12).sum())
    p = (hits + 1) / (MONTE_CARLO_FLIPS + 1)
    return PairedTest(n, m, diff, float(p), f"sign-flip permutation ({MONTE_CARLO_FLIPS:,} draws)")


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
