"""Intervals for a proportion or a bounded mean, the pieces every interval of leaderboard.stats is built from (and
the plan's pilot bounds, harness/run/plan_inputs.py: here, below both).

Clopper–Pearson is exact for k of n; for a mean of scores in [0, 1] from a complex design (clusters, strata,
partial credit) it is applied at the effective n whose binomial variance matches the mean's (Korn & Graubard 1998),
which keeps the binomial's skew near 0 and 1, where strong models sit. The shrinks below keep a variance from
reading 0 when a task or a few clusters happened to agree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special  # not scipy.stats: its import costs every score command a second (same ufuncs)

CLUSTER_SHRINK = 0.1  # pseudo-clusters (half at 0, half at 1) in the floor of a continuous cell's cluster variance
SHRINK = 4.0  # pseudo-samples, half at 0 and half at 1 (Agresti–Coull's plus four), that shrink towards ½ in a variance


@dataclass(frozen=True)
class Interval:
    mean: float
    lo: float
    hi: float
    n: int
    method: str  # "clopper-pearson", "bootstrap-t", a stratified or clustered variant, or "n too small"


def is_binary(values: Sequence[float] | np.ndarray) -> bool:
    v = np.asarray(values, dtype=float)
    return bool(v.size) and bool(np.isin(v, (0.0, 1.0)).all())


def clopper_pearson(k: float, n: float, *, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval; k and n may be fractional (effective counts), through the beta quantiles."""
    a = 1 - level
    lo = 0.0 if k <= 0 else float(special.betaincinv(k, n - k + 1, a / 2))
    hi = 1.0 if k >= n else float(special.betaincinv(k + 1, n - k, 1 - a / 2))
    return lo, hi


def binomial_interval(k: int, n: int, *, level: float = 0.95) -> Interval:
    if n <= 0:
        return Interval(math.nan, math.nan, math.nan, 0, "n too small")
    return Interval(k / n, *clopper_pearson(k, n, level=level), n, "clopper-pearson")


def cluster_codes(clusters: Sequence | np.ndarray | None, n: int) -> np.ndarray | None:
    """Integer cluster codes, or None when there are none or every sample is its own cluster."""
    if clusters is None:
        return None
    keys = list(clusters)
    if len(keys) != n:
        raise ValueError("clusters: give one cluster id per sample")
    first: dict = {}
    codes = np.fromiter((first.setdefault(k, len(first)) for k in keys), dtype=np.int64, count=n)
    return None if len(first) == n else codes


def cluster_variance(v: np.ndarray, codes: np.ndarray) -> tuple[float, int]:
    """Cluster-robust (linearisation) variance of the mean of v, and the number of clusters G."""
    n, G = v.size, int(codes.max()) + 1
    totals = np.bincount(codes, weights=v - v.mean(), minlength=G)
    return (float(G / (G - 1) * (totals ** 2).sum() / n ** 2) if G > 1 else math.inf), G


def t_interval(mean: float, var: float, df: float, level: float, n: int, method: str) -> Interval:
    if not math.isfinite(var) or df < 1:
        return Interval(mean, math.nan, math.nan, n, "n too small")
    half = float(special.stdtrit(df, 1 - (1 - level) / 2)) * math.sqrt(max(var, 0.0))
    return Interval(mean, max(0.0, mean - half), min(1.0, mean + half), n, method)


def _df_factor(df: float | None, level: float) -> float:
    """(z/t_df)²: shrinks an effective n whose variance was estimated on df degrees of freedom (Korn & Graubard)."""
    if df is None:
        return 1.0
    q = 1 - (1 - level) / 2
    return float((special.ndtri(q) / special.stdtrit(max(df, 1), q)) ** 2)


def matched_clopper_pearson(mean: float, var: float, *, n_blind: float, df: float | None, level: float, n: int,
                            method: str, cap: float = math.inf, spread: float | None = None) -> Interval:
    """Clopper–Pearson at the effective n whose binomial variance mean(1 − mean)/n_eff equals var (Korn & Graubard's
    interval for a proportion from a complex design; for any scores in [0, 1], whose variance is at most
    mean(1 − mean), so n_eff is at least the sample size there), capped at `cap`, times (z/t_df)² when var was
    estimated on df degrees of freedom. Where var says nothing (0, or the mean at 0 or 1) n_eff is n_blind: the
    number of independent units the data can vouch for (samples, clusters, or k times the smallest task).
    `spread` replaces mean(1 − mean) in n_eff where var was computed from shrunk proportions."""
    if var > 0 and 0 < mean < 1:
        n_eff = min(cap, (mean * (1 - mean) if spread is None else spread) / var) * _df_factor(df, level)
    else:
        n_eff = n_blind
    lo, hi = clopper_pearson(mean * n_eff, n_eff, level=level)
    return Interval(mean, min(lo, mean), max(hi, mean), n, method)


def hull(a: Interval, b: Interval, method: str) -> Interval:
    """The smallest interval holding both: it covers whenever either does, so at least as often as the better."""
    if not math.isfinite(a.lo):
        return Interval(b.mean, b.lo, b.hi, b.n, method)
    return Interval(a.mean, min(a.lo, b.lo), max(a.hi, b.hi), a.n, method)


def shrunk_variances(sums: np.ndarray | float, squares: np.ndarray | float, sizes: np.ndarray | float,
                      shrink: float = SHRINK) -> np.ndarray:
    """Per-sample variance of each part after adding SHRINK pseudo-samples, half at 0 and half at 1 (a shrink
    towards ½): never 0, so a part that scored all 1.0 by chance still counts some variance. For 0/1 scores this is
    p̃(1 − p̃) with p̃ = (x + SHRINK/2)/(n + SHRINK)."""
    total = sizes + shrink
    shrunk = (sums + shrink / 2) / total
    return np.maximum((squares + shrink / 2) / total - shrunk ** 2, 0.0)


def satterthwaite(var_i: np.ndarray, df_i: np.ndarray) -> float:
    """Welch–Satterthwaite degrees of freedom of a sum of variances, over the parts that have any."""
    live = var_i > 0
    if not live.any() or not np.isfinite(var_i).all():
        return float(max(df_i.min(), 1))
    return float(var_i[live].sum() ** 2 / (var_i[live] ** 2 / np.maximum(df_i[live], 1)).sum())


def floored_cluster_variance(v: np.ndarray, codes: np.ndarray) -> tuple[float, int]:
    """The cluster-robust variance of the mean, at least that of the G cluster means shrunk by CLUSTER_SHRINK
    pseudo-clusters towards ½: where a few clusters happen to agree the plain estimate is far too small (the
    cluster-robust t covered 84-90% with 3-10 clusters of skewed scores; Korn-Graubard 93.6% on 20 haystacks
    x 11 depths at p = .95)."""
    var, G = cluster_variance(v, codes)
    cluster_means = np.bincount(codes, weights=v) / np.bincount(codes)
    floor = shrunk_variances(cluster_means.sum(), (cluster_means ** 2).sum(), G, CLUSTER_SHRINK) / G
    return max(var, float(floor)), G
