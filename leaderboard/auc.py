"""AUC@L: the area under a model's score-by-length curve up to a named length L, with its interval.

Context Arena (contextarena.ai) reports AUC@128k and AUC@1M beside its per-length scores; its published numbers
are reproduced exactly by the trapezoid rule over the token count, from the shortest scored length up to L,
divided by that range (tests/leaderboard/test_auc.py checks two of its rows). That is ``scale="tokens"`` here, the
default; ``scale="log2"`` integrates over log2(length) instead, where every doubling weighs the same.

What differs from Context Arena: a model with no score at L gets no AUC@L ("needs scores up to L") where Context
Arena counts the lengths past a model's window as 0; L between two scored lengths interpolates linearly between
them (no extrapolation past the longest); and every AUC has an interval.

The AUC is a fixed linear combination of cell means: Σ_L w_L · m_L, where m_L is the mean of the model's task
means over its common task set (aggregate.length_averages), so AUC = Σ_(t,L) a_(t,L) · mean_(t,L) with
a = w_L / k. Cells are independent (distinct samples) unless samples share a cluster id; its variance is the sum
of the cells' variances (shrunk towards ½ for 0/1 scores, cluster-robust within a cell), or the cluster-robust
variance over clusters spanning cells where larger. The interval is Clopper–Pearson at the Korn–Graubard
effective n of that variance (0/1 scores), hulled with a Satterthwaite t for continuous ones — the same pieces as
stats.stratified_interval, with unequal weights. Coverage: benchmarks/auc_coverage.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd

from ctxbench.harness.core.stats.proportions import (
    Interval,
    cluster_codes,
    floored_cluster_variance,
    hull,
    is_binary,
    matched_clopper_pearson,
    satterthwaite,
    shrunk_variances,
    t_interval,
)

from .frame import format_length, parse_length
from .stats import MIN_BOOT_N

Scale = Literal["tokens", "log2"]
SCALES = ("tokens", "log2")
STANDARD_AUC = (128 * 1024, 1024 ** 2)  # Context Arena's AUC@128k and AUC@1M
NAN = float("nan")


def auc_key(upto: int) -> str:
    """results.csv's column stem: auc_128k, auc_1m, auc_96k, auc_5000."""
    return f"auc_{format_length(upto).lower()}"


def auc_label(upto: int) -> str:
    return f"AUC@{format_length(upto)}"


def parse_auc(text: str) -> tuple[int, ...]:
    """`--auc 128K,1M` -> (131072, 1048576); ValueError naming the bad entry."""
    out = []
    for part in [p.strip() for p in str(text).split(",")]:
        try:
            value = parse_length(part)
        except ValueError:
            value = 0
        if value <= 0:
            raise ValueError(f"{part!r} is not a length; give lengths such as 128K,1M")
        out.append(value)
    return tuple(sorted(set(out)))


def default_auc_lengths(board_lengths: Sequence[int], asked: Sequence[int] = ()) -> tuple[int, ...]:
    """The largest of 128K and 1M that the board's lengths reach, plus the lengths asked for (--auc)."""
    longest = max((int(x) for x in board_lengths), default=0)
    reached = [L for L in STANDARD_AUC if L <= longest]
    return tuple(sorted(set(reached[-1:]) | {int(x) for x in asked}))


def auc_weights(lengths: Sequence[int], upto: int, scale: Scale = "tokens") -> np.ndarray:
    """The weight of each scored length in AUC@upto (they sum to 1): the trapezoid rule over x = length (tokens)
    or log2(length), from the shortest length to upto, divided by that range. An upto between two scored lengths
    reads the curve there by linear interpolation. ValueError (the reason shown on the board) when the lengths do
    not span [shortest, upto]."""
    if scale not in SCALES:
        raise ValueError(f"AUC scale must be one of {', '.join(SCALES)}, got {scale!r}")
    lengths = np.asarray(sorted(int(x) for x in lengths), dtype=float)
    if lengths.size == 0 or lengths[-1] < upto:
        raise ValueError(f"needs scores up to {format_length(upto)}")
    if lengths[0] >= upto:
        raise ValueError(f"needs a score below {format_length(upto)}")
    x = lengths if scale == "tokens" else np.log2(lengths)
    end = float(upto) if scale == "tokens" else math.log2(upto)
    weights = np.zeros(lengths.size)
    for j in range(lengths.size - 1):
        if x[j] >= end:
            break
        right = min(x[j + 1], end)
        theta = (right - x[j]) / (x[j + 1] - x[j])  # where the segment stops, 1 when it is whole
        half = (right - x[j]) / 2
        weights[j] += half * (2 - theta)
        weights[j + 1] += half * theta
    return weights / (end - x[0])


def weighted_interval(cells: Sequence[np.ndarray], weights: Sequence[float], *, level: float = 0.95,
                      clusters: Sequence[Sequence | None] | None = None) -> Interval:
    """The interval of Σ a_c · mean(cell c) (weights a summing to 1): see the module docstring."""
    parts = [np.asarray(c, dtype=float) for c in cells]
    a = np.asarray(weights, dtype=float)
    if not parts or any(p.size == 0 for p in parts):
        return Interval(NAN, NAN, NAN, 0, "n too small")
    n = int(sum(p.size for p in parts))
    mean = float(sum(w * p.mean() for w, p in zip(a, parts)))
    binary = all(is_binary(p) for p in parts)
    clusters = clusters or [None] * len(parts)
    if not binary and (min(p.size for p in parts) < 2 or n < MIN_BOOT_N):
        return Interval(mean, NAN, NAN, n, "n too small")
    var_c, units = _cell_variances(parts, clusters, binary=binary)
    var = float((a ** 2 * var_c).sum())
    crossed = _crossed_variance(parts, a, clusters)
    clustered = any(cluster_codes(c, p.size) is not None for p, c in zip(parts, clusters) if c is not None)
    blind = 1.0 / float((a / units).max())  # what the data vouch for where the variance says nothing
    sizes = np.array([p.size for p in parts], dtype=float)
    design = 1.0 / float((a ** 2 / sizes).sum())  # Kish's effective n of the weights (k² / Σ 1/n_i at equal ones)
    if crossed is not None:  # G clusters in all: never more independent units than that
        var, clustered = max(var, crossed[0]), True
        blind = min(blind, crossed[1])
        units = np.minimum(units, crossed[1])
    if binary:
        shrunk = float(sum(w * (p.sum() + 2) / (p.size + 4) for w, p in zip(a, parts)))
        return matched_clopper_pearson(mean, var, n_blind=blind if mean in (0.0, 1.0) else design, cap=design,
                                       spread=shrunk * (1 - shrunk), df=_df(units, crossed) if clustered else None, level=level, n=n, method="clopper-pearson (weighted, Korn-Graubard)")
    df = satterthwaite(a ** 2 * var_c, units - 1) if crossed is None else crossed[1] - 1.0
    cp = matched_clopper_pearson(mean, var, n_blind=blind, df=df, level=level, n=n, method="")
    return hull(t_interval(mean, var, df, level, n, ""), cp, "weighted t + matched clopper-pearson")


def _df(units: np.ndarray, crossed: tuple[float, int] | None) -> float:
    """Degrees of freedom of a clustered variance: units less cells, or G − 1 where clusters cross cells."""
    return float(units.sum() - units.size) if crossed is None else float(crossed[1] - 1)


def _cell_variances(parts: list[np.ndarray], clusters: Sequence, *, binary: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's variance of its mean (shrunk towards ½ for 0/1 scores) and its independent units."""
    var_c, units = np.zeros(len(parts)), np.zeros(len(parts))
    for i, (p, c) in enumerate(zip(parts, clusters)):
        if binary:
            var_c[i] = float(shrunk_variances(p.sum(), (p * p).sum(), p.size)) / p.size
        else:
            var_c[i] = float(p.var(ddof=1)) / p.size
        units[i] = p.size
        codes = cluster_codes(c, p.size) if c is not None else None
        if codes is not None:
            cv, units[i] = floored_cluster_variance(p, codes)
            var_c[i] = max(var_c[i], cv)
    return var_c, units


def _crossed_variance(parts: list[np.ndarray], a: np.ndarray, clusters: Sequence) -> tuple[float, int] | None:
    """Where one cluster id holds samples of several cells (a document used at two lengths), the cells are not
    independent: the linearised variance over those clusters, G/(G−1) Σ_g u_g², and G. None when no id crosses."""
    owners: dict = {}
    for i, c in enumerate(clusters):
        for key in set(k for k in (c or ()) if k is not None and not (isinstance(k, float) and math.isnan(k))):
            owners.setdefault(key, set()).add(i)
    if not any(len(cells) > 1 for cells in owners.values()):
        return None
    totals: dict = {}
    for i, (p, c) in enumerate(zip(parts, clusters)):
        contrib = a[i] * (p - p.mean()) / p.size
        for j, value in enumerate(contrib):
            key = c[j] if c is not None and c[j] is not None and c[j] == c[j] else ("sample", i, j)
            totals[key] = totals.get(key, 0.0) + float(value)
    G = len(totals)
    u = np.fromiter(totals.values(), dtype=float)
    return (G / (G - 1) * float((u ** 2).sum()) if G > 1 else math.inf), G


def auc_summary(df: pd.DataFrame, avgs: pd.DataFrame, uptos: Sequence[int], *, scale: Scale = "tokens",
                level: float = 0.95) -> pd.DataFrame:
    """Per model, for each L in `uptos`: auc_<L> (0..1), auc_<L>_lo, auc_<L>_hi and auc_<L>_note (why it is missing
    or has no interval, "" otherwise) and auc_from (the shortest length, where every AUC of the model starts), over
    the model's common task set at every length (length_averages'
    task_set_key), so one AUC never mixes task sets. `df` is the per-sample frame, `avgs` length_averages'."""
    columns = ["model", "auc_from", *(f"{auc_key(L)}{s}" for L in uptos for s in ("", "_lo", "_hi", "_note"))]
    rows = []
    for model, group in avgs.sort_values("length").groupby("model", sort=True):
        row: dict[str, object] = {"model": model, "auc_from": int(group["length"].iat[0])}
        for upto in uptos:
            row.update(zip((f"{auc_key(upto)}{s}" for s in ("", "_lo", "_hi", "_note")),
                           _model_auc(df[df["model"] == model], group, upto, scale=scale, level=level)))
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def _model_auc(scores: pd.DataFrame, group: pd.DataFrame, upto: int, *, scale: Scale,
               level: float) -> tuple[float, float, float, str]:
    """(AUC, lo, hi, note) of one model's length_averages rows."""
    headline = str(group["headline"].iat[0] or "") if "headline" in group else ""
    if headline:
        return NAN, NAN, NAN, headline
    lengths = [int(x) for x in group["length"]]
    try:
        weights = auc_weights(lengths, upto, scale)
    except ValueError as e:
        return NAN, NAN, NAN, str(e)
    used = group[weights > 0]
    weights = weights[weights > 0]
    missing = used[~np.isfinite(used["mean"].to_numpy(dtype=float))]
    if len(missing):
        return NAN, NAN, NAN, f"no average at {format_length(int(missing['length'].iat[0]))}"
    point = float((weights * used["mean"].to_numpy(dtype=float)).sum())
    if (used["source"] == "reported").any():
        return point, NAN, NAN, "reported"
    if "stopped" in used and (used["stopped"].fillna(0).sum() or (used["method"] == "anytime-valid").any()):
        return point, NAN, NAN, "sequential: no fixed-n interval"
    tasks = sorted(t for t in str(used["task_set_key"].iat[0]).split(",") if t)
    cells, cell_weights, clusters = [], [], []
    for length, w in zip(used["length"], weights):
        at = scores[scores["length"] == length]
        for task in tasks:
            rows = at[at["task"] == task]
            cells.append(rows["score"].to_numpy(dtype=float))
            cell_weights.append(w / len(tasks))
            clusters.append(list(rows["cluster"]) if "cluster" in rows and rows["cluster"].notna().any() else None)
    iv = weighted_interval(cells, cell_weights, level=level, clusters=clusters)
    return point, iv.lo, iv.hi, "" if math.isfinite(iv.lo) else iv.method


def with_auc(summary: pd.DataFrame, df: pd.DataFrame, avgs: pd.DataFrame, *, asked: Sequence[int] = (),
             scale: Scale = "tokens", level: float = 0.95) -> pd.DataFrame:
    """The board's per-model summary with the AUC columns of its default L's (default_auc_lengths) and `asked`."""
    uptos = default_auc_lengths(avgs["length"], asked)
    if not uptos:
        return summary
    return summary.merge(auc_summary(df, avgs, uptos, scale=scale, level=level), on="model", how="left")


def auc_start_text(summary: pd.DataFrame) -> dict[str, str]:
    """Per model, ` (from 8K)` where the models of a table start their AUCs at different lengths (their areas cover
    different ranges, so they say where theirs starts); "" for all when they share one."""
    if "auc_from" not in summary or summary["auc_from"].dropna().nunique() < 2:
        return {m: "" for m in summary["model"]}
    return {r.model: f" (from {format_length(r.auc_from)})" if pd.notna(r.auc_from) else ""
            for r in summary.itertuples()}


def auc_columns(frame: pd.DataFrame) -> list[str]:
    """The AUC stems a summary carries (auc_128k, auc_1m), in the order of their lengths."""
    stems = [c for c in frame.columns if c.startswith("auc_") and f"{c}_note" in frame.columns]
    return sorted(stems, key=lambda c: parse_length(c[4:]))


def auc_value_columns(frame: pd.DataFrame) -> list[str]:
    """The AUC columns on the 0..1 scale (value, lo, hi), which results.csv/json give in percent."""
    return [f"{c}{s}" for c in auc_columns(frame) for s in ("", "_lo", "_hi")]


def auc_header(stem: str) -> str:
    return f"AUC@{stem[4:].upper()}"


def auc_preamble(summary: pd.DataFrame, scale: Scale) -> tuple[str, ...]:
    """How to read the AUC columns, when the board has any."""
    stems = auc_columns(summary)
    if not stems:
        return ()
    over = "token count (Context Arena's AUC)" if scale == "tokens" else "log2 of the length"
    return (f"{', '.join(auc_header(s) for s in stems)}: the area under the model's score-by-length curve from its "
            f"shortest scored length up to L, over the {over}, divided by that range (trapezoid rule; an L between two "
            "scored lengths reads the curve there by linear interpolation, and a model not scored up to L gets "
            "none); its interval treats lengths as independent samples unless they share a cluster.",)
