"""Statistics of head-to-head studies: methods trained with several seeds, scored on the same samples.

A study frame has one row per (method, seed, task, length, index) with a per-sample score: a 0..1 task score,
or a document's mean token loss for perplexity. Every checkpoint is scored on the same samples, so samples pair
across methods and seeds; seeds do not pair across methods (seed 0 of A and of B are unrelated trainings).

The estimate of A − B is the mean over (task, length) cells, each weighing equally as on the board, of the mean
over the cell's samples of the seed-averaged difference. Its variance has two levels (variance_components): which
training runs the seeds produced (per method, the spread of its seeds' weighted means, S − 1 df) and which samples
were drawn (the within-cell spread of the seed-averaged differences, less the seed noise it repeats; cluster-robust
when the frame has a `cluster` column, for samples sharing a haystack or document). An untrained or single-run
row has no seed level.

With 3 seeds the seed level has 2 df per method, so t = estimate / SE is far from normal, and a plug-in
Satterthwaite df is itself noisy. The reference distribution of t is therefore simulated: a parametric bootstrap
of the t statistic under the fitted components (Krishnamoorthy, Lu & Mathew 2007), drawing each part's variance
estimate as a scaled χ² on its df (t_reference). The interval is estimate ± q x SE with q the level quantile of
|T*|, and p the share of |T*| at or above the observed |t|, so the two always agree. That holds the level where both methods have seeds;
against one fixed run (an untrained model) a single 2-df seed level sits beside a precise sample level, and any
plug-in of their ratio is liberal (7.4% at nominal 5%). There T = Z / √(ρ·χ²_f/f + 1 − ρ) has tails no heavier than
t_f whatever the seed share ρ (the tail probability is convex in the variance), so t on the seed level's
f = S − 1 df is used: valid at every ρ, exact when seeds dominate. Measured against an independent simulator in
benchmarks/stats_calibration.py (docs/statistics.md).

Small or degenerate comparisons (fewer than MIN_DISCORDANT samples that differ, or no spread at all) get the exact
paired test of leaderboard.stats on the seed-averaged pairs instead (sign test / sign-flip permutation, strata =
cells), never a zero-width interval. k comparisons at once: intervals at level 1 - alpha/k (Bonferroni,
simultaneous) and verdicts on Holm-adjusted p-values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats as sps

from .bootstrap import cell_rng
from .stats import MIN_BOOT_N, PairedTest, holm, paired_test

MIN_DISCORDANT = 10  # fewer differing samples than this: the exact test decides, not the t interval
METHOD = "parametric bootstrap-t"  # Delta.method of the model-based interval with seeds on both sides
SINGLE_SEED_METHOD = "t on the seed df"  # ... with seeds on one side only (vs an untrained or single run)
KEYS = ["task", "length", "index"]


@dataclass(frozen=True)
class Arm:
    """One method's scores on the matched samples: seeds x samples, and each sample's cell."""

    name: str
    scores: np.ndarray  # (seeds, samples)
    seeds: tuple[int, ...]


@dataclass(frozen=True)
class Delta:
    """A − B with its uncertainty; differences on the frame's scale (0..1 scores, or nats of loss)."""

    a: str
    b: str
    diff: float
    lo: float  # interval at `level` (nan when the exact test decides)
    hi: float
    level: float
    se: float
    df: float
    p: float  # two-sided, unadjusted
    method: str  # METHOD or the exact test's name
    n_pairs: int
    n_discordant: int
    seeds: tuple[int, int]
    var_seed: float  # the seed level's share of the estimate's variance
    var_sample: float
    exact: PairedTest | None  # the exact paired test on the seed-averaged pairs (None when skipped)
    p_adjusted: float | None = None

    @property
    def decisive_p(self) -> float:
        return self.p if self.p_adjusted is None else self.p_adjusted


def arms(frame: pd.DataFrame, a: str, b: str) -> tuple[Arm, Arm, pd.MultiIndex]:
    """Both methods' per-seed scores on the samples every seed of both has (scored duplicates are averaged)."""
    tables = []
    for name in (a, b):
        rows = frame[frame["method"] == name]
        if rows.empty:
            raise ValueError(f"study comparison: no rows for method {name!r}")
        tables.append(rows.pivot_table(index=KEYS, columns="seed", values="score", aggfunc="mean"))
    common = tables[0].dropna().index.intersection(tables[1].dropna().index).sort_values()
    if not len(common):
        raise ValueError(f"study comparison: {a!r} and {b!r} share no scored samples")
    out = [Arm(n, t.loc[common].to_numpy(dtype=float).T, tuple(int(s) for s in t.columns)) for n, t in zip((a, b), tables)]
    return out[0], out[1], common


def _cells(index: pd.MultiIndex) -> tuple[np.ndarray, int]:
    codes, uniques = pd.factorize(pd.MultiIndex.from_arrays([index.get_level_values(0), index.get_level_values(1)]))
    return codes, len(uniques)


def _weights(codes: np.ndarray, n_cells: int) -> np.ndarray:
    sizes = np.bincount(codes, minlength=n_cells)
    return 1.0 / (n_cells * sizes[codes])


@dataclass(frozen=True)
class Components:
    """The estimate A − B and its variance by level: (variance, degrees of freedom) per part."""

    estimate: float
    seed_parts: tuple[tuple[float, float], ...]  # one per arm with seeds: var of its seed mean, S − 1
    sample_part: tuple[float, float]  # the shared sample draw (seed noise removed), Σ (n_c − 1) or Σ (G_c − 1)

    @property
    def variance(self) -> float:
        return sum(v for v, _ in self.seed_parts) + self.sample_part[0]

    @property
    def satterthwaite_df(self) -> float:
        parts = [*self.seed_parts, self.sample_part]
        denom = sum(v * v / f for v, f in parts if f > 0)
        return self.variance ** 2 / denom if denom > 0 else math.inf


def _cell_mean_variance(x: np.ndarray, cols: np.ndarray, groups: np.ndarray | None) -> tuple[float, int]:
    """Variance of one cell's mean of x (rows = replicates pooled) and its df; cluster-robust when grouped."""
    n_c = int(cols.sum())
    r = x[..., cols] - x[..., cols].mean(axis=-1, keepdims=True)
    reps = 1 if x.ndim == 1 else x.shape[0]
    if groups is None:
        return float((r ** 2).sum()) / (reps * (n_c - 1)) / n_c, n_c - 1
    _, g = np.unique(groups[cols], return_inverse=True)
    G = int(g.max()) + 1
    totals = np.stack([np.bincount(g, weights=row, minlength=G) for row in np.atleast_2d(r)])
    return float((totals ** 2).sum()) * G / (reps * max(G - 1, 1)) / n_c ** 2, G - 1


def variance_components(a: Arm, b: Arm, codes: np.ndarray, n_cells: int, clusters: np.ndarray | None = None
                        ) -> Components:
    """Each arm's seed level is the spread of its seeds' weighted means (S − 1 df, exact under normality, which
    carries the seed x task interaction too); the sample level is the within-cell spread of the seed-averaged
    differences less the seed noise it repeats (estimated from the residuals on many df, sample by sample: noise
    that a seed shares across a haystack is left in, which errs on the safe side). Nothing is truncated at
    the seed level, so a seed spread that is small by chance cannot switch its df to the sample level's."""
    w = _weights(codes, n_cells)
    d = a.scores.mean(axis=0) - b.scores.mean(axis=0)
    seed_parts, noise = [], 0.0
    for arm in (a, b):
        S = arm.scores.shape[0]
        if S < 2:
            continue
        seed_parts.append((float((arm.scores @ w).var(ddof=1)) / S, S - 1.0))
        dev = arm.scores - arm.scores.mean(axis=0)
        noise += sum(_cell_mean_variance(dev, codes == c, None)[0] * S / (S - 1)
                     for c in range(n_cells) if (codes == c).sum() > 1) / n_cells ** 2 / S
    var_sample, df_sample = 0.0, 0
    for c in range(n_cells):
        cols = codes == c
        if cols.sum() > 1:
            v, f = _cell_mean_variance(d, cols, clusters)
            var_sample += v / n_cells ** 2
            df_sample += f
    return Components(float(d @ w), tuple(seed_parts), (max(0.0, var_sample - noise), float(max(df_sample, 1))))


def t_reference(comp: Components, *, draws: int, rng: np.random.Generator) -> np.ndarray:
    """|T*| under the fitted components (parametric bootstrap of the t statistic): a normal estimate over the
    square root of variance estimates drawn as scaled χ² on each part's df. Its quantile replaces t(ν)."""
    parts = [*comp.seed_parts, comp.sample_part]
    z = rng.normal(0.0, math.sqrt(comp.variance), draws)
    var_star = sum(v * rng.chisquare(f, draws) / f for v, f in parts if v > 0)
    return np.abs(z) / np.sqrt(var_star)


def compare(frame: pd.DataFrame, a: str, b: str, *, level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> Delta:
    """A − B on the matched samples of a study frame (see compare_arms); a `cluster` column is honoured."""
    arm_a, arm_b, index = arms(frame, a, b)
    codes, n_cells = _cells(index)
    strata = [f"{t}@{n}" for t, n in zip(index.get_level_values(0), index.get_level_values(1))]
    clusters = None
    if "cluster" in frame.columns and frame["cluster"].notna().any():
        ids = frame.groupby(KEYS)["cluster"].first().reindex(index)
        clusters = np.array([repr(c) if pd.notna(c) else repr(("row", i)) for i, c in enumerate(ids)])
    return compare_arms(arm_a, arm_b, codes, n_cells, strata, level=level, n_boot=n_boot,
                        rng=cell_rng(seed, a, b, n_cells, len(index)), clusters=clusters)


def compare_arms(a: Arm, b: Arm, codes: np.ndarray, n_cells: int, strata: Sequence, *, level: float, n_boot: int,
                 rng: np.random.Generator, exact: bool = True, clusters: np.ndarray | None = None) -> Delta:
    """The parametric bootstrap-t interval and p-value (n_boot draws of T*), t on the seed level's df when only one
    side has seeds, or the exact paired test when fewer than MIN_DISCORDANT samples differ or nothing varies. exact=False skips the exact test where it does not
    decide (simulations)."""
    comp = variance_components(a, b, codes, n_cells, clusters)
    est, se, df = comp.estimate, math.sqrt(comp.variance), comp.satterthwaite_df
    var_seed = sum(v for v, _ in comp.seed_parts)
    mean_a, mean_b = a.scores.mean(axis=0), b.scores.mean(axis=0)
    discordant = int(np.count_nonzero(mean_a != mean_b))
    small = discordant < MIN_DISCORDANT or se == 0
    test = paired_test(mean_a, mean_b, strata=strata, clusters=clusters) if (exact or small) else None
    seeds = (a.scores.shape[0], b.scores.shape[0])
    if small:
        return Delta(a.name, b.name, est, math.nan, math.nan, level, se, df, test.p_value, test.method, len(mean_a),
                     discordant, seeds, var_seed, comp.sample_part[0], test)
    if len(comp.seed_parts) == 1:  # one seed level beside a fixed run: t on its S − 1 df bounds T for any share
        df = comp.seed_parts[0][1]
        q, p = float(sps.t.ppf(1 - (1 - level) / 2, df)), float(2 * sps.t.sf(abs(est) / se, df))
        method = SINGLE_SEED_METHOD
    else:
        t_star = t_reference(comp, draws=max(n_boot, 2000), rng=rng)
        q = float(np.quantile(t_star, level))
        p = (int((t_star >= abs(est) / se).sum()) + 1) / (t_star.size + 1)
        method = METHOD
    return Delta(a.name, b.name, est, est - q * se, est + q * se, level, se, df, min(1.0, p), method, len(mean_a),
                 discordant, seeds, var_seed, comp.sample_part[0], test)


def compare_family(jobs: Sequence[tuple[pd.DataFrame, str, str]], *, alpha: float = 0.05, n_boot: int = 2000,
                   seed: int = 0) -> list[Delta]:
    """k comparisons (frame, A, B) as one family: intervals at 1 - alpha/k (Bonferroni), p-values Holm-adjusted."""
    k = max(1, len(jobs))
    found = [compare(frame, a, b, level=1 - alpha / k, n_boot=n_boot, seed=seed) for frame, a, b in jobs]
    adjusted = holm([d.p for d in found]) if found else []
    return [replace(d, p_adjusted=p) for d, p in zip(found, adjusted)]


def cell_deltas(frame: pd.DataFrame, a: str, b: str, *, level: float = 0.95, n_boot: int = 2000, seed: int = 0
                ) -> pd.DataFrame:
    """A − B per (task, length): the model-based interval where a cell has MIN_BOOT_N samples and enough that
    differ, else the exact test's p-value (no interval)."""
    rows = []
    for (task, length), part in frame.groupby(["task", "length"], sort=True):
        try:
            d = compare(part, a, b, level=level, n_boot=n_boot, seed=seed)
        except ValueError:
            continue
        small = d.n_pairs < MIN_BOOT_N
        rows.append((task, int(length), d.n_pairs, d.n_discordant, d.diff, math.nan if small else d.lo,
                     math.nan if small else d.hi, d.exact.p_value if small else d.p, d.exact.method if small else d.method))
    return pd.DataFrame(rows, columns=["task", "length", "n", "discordant", "diff", "lo", "hi", "p", "test"])


def seed_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per method and seed, the overall score (mean of cell means); per method the between-seed spread."""
    cell = frame.groupby(["method", "seed", "task", "length"])["score"].mean()
    per_seed = cell.groupby(level=["method", "seed"]).mean().rename("score").reset_index()
    spread = per_seed.groupby("method")["score"].agg(["mean", "std", "min", "max", "count"]).reset_index()
    return per_seed.merge(spread, on="method")


def detectable_effect(d: Delta, *, power: float = 0.8) -> float:
    """The smallest |A − B| this design detects with the given power at the interval's (adjusted) level."""
    df = d.df if math.isfinite(d.df) else 1e9
    return float((sps.t.ppf(1 - (1 - d.level) / 2, df) + sps.t.ppf(power, df)) * d.se)


def power_of(effect: float, se: float, df: float, *, alpha: float = 0.05) -> float:
    """Power of the two-sided t test of level alpha to detect `effect` when the estimate has this SE and df."""
    df = df if math.isfinite(df) else 1e9
    q = sps.t.ppf(1 - alpha / 2, df)
    ncp = effect / se
    return float(sps.nct.sf(q, df, ncp) + sps.nct.cdf(-q, df, ncp))


def verdict(d: Delta, *, alpha: float, lower_is_better: bool = False, unit: str = "points", scale: float = 100.0) -> str:
    """The comparison in words: which is better, and whether that is significant at alpha after adjustment."""
    p = d.decisive_p
    adj = " (Holm-adjusted)" if d.p_adjusted is not None else ""
    size = f"{d.diff * scale:+.{2 if scale != 1 else 4}f} {unit}"
    basis = f"{size}; p = {p:.3g}{adj}; {d.method}; {d.seeds[0]} vs {d.seeds[1]} run(s), {d.n_pairs} paired samples, " \
            f"{d.n_discordant} differ"
    if p < alpha and d.diff != 0:
        better = (d.diff < 0) if lower_is_better else (d.diff > 0)
        return f"{d.a} is significantly {'better' if better else 'worse'} than {d.b} at {alpha:g} ({basis})"
    return f"no significant difference between {d.a} and {d.b} at {alpha:g} ({basis})"


def simulate_arms(*, effect: float = 0.0, seeds: int = 3, reference_seeds: int = 3, cells: int = 3, n: int = 30,
                  sd_seed: float = 0.05, sd_sample: float = 0.1, sd_noise: float = 0.1, binary: bool = False,
                  base: float = 0.5, rng: np.random.Generator) -> tuple[Arm, Arm, np.ndarray, int, list[str]]:
    """Two arms from a two-level model, for checking designs: score = base + effect + seed offset + shared sample
    difficulty + method x sample + noise (a probability drawn as 0/1 when binary). reference_seeds=1 makes B one
    fixed run without a seed offset (an untrained model). Returns what compare_arms takes."""
    difficulty = rng.normal(0, 0.2, cells * n)

    def arm(name: str, mu: float, runs: int, fixed: bool) -> Arm:
        own = difficulty + rng.normal(0, sd_sample, cells * n)
        offsets = np.zeros((runs, 1)) if fixed else rng.normal(0, sd_seed, (runs, 1))
        y = base + mu + offsets + own + rng.normal(0, sd_noise, (runs, cells * n))
        if binary:
            y = (rng.random(y.shape) < np.clip(y, 0, 1)).astype(float)
        return Arm(name, y, tuple(range(runs)))

    codes = np.repeat(np.arange(cells), n)
    return (arm("A", effect, seeds, False), arm("B", 0.0, reference_seeds, reference_seeds == 1), codes, cells,
            [f"t{c}" for c in codes])


def perplexities(frame: pd.DataFrame) -> pd.DataFrame:
    """Per method, seed and length: perplexity = exp(sum of nll / sum of tokens) over the documents."""
    g = frame.groupby(["method", "seed", "length"])[["nll", "tokens"]].sum().reset_index()
    g["ppl"] = np.exp(g["nll"] / g["tokens"])
    return g


def position_losses(frame: pd.DataFrame) -> pd.DataFrame:
    """Per method, length and position bucket: the mean token loss (seeds and documents pooled by tokens)."""
    rows = [(r.method, r.length, lo, hi, s, c) for r in frame.itertuples() for lo, hi, s, c in r.buckets]
    g = pd.DataFrame(rows, columns=["method", "length", "lo", "hi", "nll", "tokens"])
    g = g.groupby(["method", "length", "lo", "hi"])[["nll", "tokens"]].sum().reset_index()
    g["loss"] = g["nll"] / g["tokens"]
    return g
