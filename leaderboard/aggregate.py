"""Aggregate per-sample scores into RULER-style tables with bootstrap intervals.

All scores stay on the 0..1 scale here; only rendering multiplies by 100.
Reported (paper) rows have no samples, so they pass through with NaN intervals.
Threshold and ranking helpers live in :mod:`leaderboard.ranking` and are
re-exported here so callers find every table builder in one module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .bootstrap import boot_means, cell_rng, percentile_ci, stratified_boot_means
from .frame import AVG_TASK, normalise
from .ranking import effective_length, resolve_threshold, weighted_averages

__all__ = [
    "PairedComparison",
    "category_table",
    "depth_length_matrix",
    "effective_length",
    "length_averages",
    "paired_comparison",
    "position_curve",
    "resolve_threshold",
    "task_length_table",
    "weighted_averages",
]

NAN = float("nan")


def _cell_stats(
    df: pd.DataFrame, keys: list[str], *, n_boot: int, seed: int, ci: float
) -> pd.DataFrame:
    """Mean and percentile-bootstrap CI of ``score`` per group of ``keys``."""
    rows = []
    for key, group in df.groupby(keys, sort=True):
        values = group["score"].to_numpy(dtype=float)
        source = group["source"].iat[0]
        if source == "reported":
            lo, hi, n = NAN, NAN, 0
        else:
            draws = boot_means(values, n_boot=n_boot, rng=cell_rng(seed, *key))
            (lo, hi), n = percentile_ci(draws, ci=ci), values.size
        rows.append((*key, float(values.mean()), lo, hi, n, source))
    return pd.DataFrame(rows, columns=[*keys, "mean", "lo", "hi", "n", "source"])


def task_length_table(
    df: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> pd.DataFrame:
    """Mean score per (model, task, length) with a bootstrap CI over samples.

    ``n`` is the number of samples behind the mean (0 for reported rows).
    """
    df = normalise(df)
    return _cell_stats(df, ["model", "task", "length"], n_boot=n_boot, seed=seed, ci=ci)


def length_averages(
    df: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> pd.DataFrame:
    """A model's score at each length: the unweighted mean of its task means (as RULER).

    The CI resamples samples within each task independently (stratified
    bootstrap), so every task keeps equal weight in every replicate. Reported
    ``avg`` rows are passed through unchanged; reported per-task rows are
    averaged like measured ones but get no CI.
    """
    df = normalise(df)
    rows = []
    for (model, length), group in df.groupby(["model", "length"], sort=True):
        source = group["source"].iat[0]
        runs = ",".join(sorted(set(group["run_id"]) - {""}))
        claimed = group["claimed_length"].max()
        avg_rows = group[group["task"] == AVG_TASK]
        if source == "reported" and len(avg_rows):
            mean, lo, hi, n_tasks, n = float(avg_rows["score"].mean()), NAN, NAN, 0, 0
        else:
            strata = [g.to_numpy(dtype=float) for _, g in group.groupby("task")["score"]]
            mean = float(np.mean([s.mean() for s in strata]))
            n_tasks, n = len(strata), int(sum(s.size for s in strata))
            if source == "reported":
                lo, hi, n = NAN, NAN, 0
            else:
                draws = stratified_boot_means(
                    strata, n_boot=n_boot, rng=cell_rng(seed, model, length)
                )
                lo, hi = percentile_ci(draws, ci=ci)
        rows.append((model, length, mean, lo, hi, n_tasks, n, source, claimed, runs))
    columns = [
        "model",
        "length",
        "mean",
        "lo",
        "hi",
        "n_tasks",
        "n",
        "source",
        "claimed_length",
        "run_ids",
    ]
    return pd.DataFrame(rows, columns=columns)


def category_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per-model, per-category mean score at each length, plus an ``avg`` column.

    A category's score at a length is the mean of its task means (each task
    weighs equally); ``avg`` is the mean over the lengths the model was
    evaluated at. Rows are indexed by (model, category); columns are the
    integer lengths followed by ``"avg"``. Rows without a category (and
    reported ``avg`` rows) are left out.
    """
    df = normalise(df)
    df = df[df["category"].notna() & (df["task"] != AVG_TASK)]
    if df.empty:
        return pd.DataFrame(index=pd.MultiIndex.from_tuples([], names=["model", "category"]))
    task_means = df.groupby(["model", "category", "length", "task"])["score"].mean()
    per_length = task_means.groupby(level=["model", "category", "length"]).mean()
    table = per_length.unstack("length").sort_index(axis=1)
    table.columns = [int(c) for c in table.columns]
    table["avg"] = table.mean(axis=1, skipna=True)
    return table


def depth_length_matrix(
    df: pd.DataFrame, task: str, *, bins: Sequence[float] | None = None
) -> pd.DataFrame:
    """Mean accuracy per (model, depth) row and length column for one grid task.

    Depths are snapped to the nearest of ``bins`` when given (the depths the
    grid asked for), otherwise rounded to whole percent, so float noise in
    recorded depths does not split cells.
    """
    df = normalise(df)
    df = df[(df["task"] == task) & df["depth"].notna()].copy()
    if df.empty:
        return pd.DataFrame()
    depth = df["depth"].to_numpy(dtype=float)
    if bins is not None:
        centres = np.asarray(sorted(bins), dtype=float)
        df["depth"] = centres[np.abs(depth[:, None] - centres[None, :]).argmin(axis=1)]
    else:
        df["depth"] = np.rint(depth)
    table = df.pivot_table(
        index=["model", "depth"], columns="length", values="score", aggfunc="mean"
    )
    table.columns = [int(c) for c in table.columns]
    return table.sort_index()


def position_curve(
    df: pd.DataFrame, task: str, *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> pd.DataFrame:
    """Accuracy by gold ``position`` per model for one task, with bootstrap CIs."""
    df = normalise(df)
    df = df[(df["task"] == task) & df["position"].notna()].copy()
    if df.empty:
        return pd.DataFrame(columns=["model", "position", "mean", "lo", "hi", "n", "source"])
    df["position"] = df["position"].astype(np.int64)
    return _cell_stats(df, ["model", "position"], n_boot=n_boot, seed=seed, ci=ci)


@dataclass(frozen=True)
class PairedComparison:
    """Result of :func:`paired_comparison`; differences are A − B on the 0..1 scale.

    ``cells`` has one row per (task, length); ``by_length`` averages tasks
    (each equally) per length; ``overall`` averages all (task, length) cells.
    """

    model_a: str
    model_b: str
    cells: pd.DataFrame
    by_length: pd.DataFrame
    overall: float
    overall_lo: float
    overall_hi: float
    n_pairs: int
    n_unmatched_a: int
    n_unmatched_b: int
    ci: float


def _sample_scores(df: pd.DataFrame, model: str) -> pd.Series:
    rows = df[df["model"] == model]
    if rows.empty:
        raise ValueError(f"paired comparison: no rows for model {model!r}")
    rows = rows[rows["source"] == "measured"]
    if rows.empty:
        raise ValueError(
            f"paired comparison: model {model!r} has only reported rows (no per-sample scores)"
        )
    # Repeated runs of the same sample are averaged so each sample pairs once.
    return rows.groupby(["task", "length", "index"])["score"].mean()


def paired_comparison(
    df: pd.DataFrame,
    *,
    model_a: str,
    model_b: str,
    n_boot: int = 2000,
    seed: int = 0,
    ci: float = 0.95,
) -> PairedComparison:
    """Mean difference A − B over samples matched on (task, length, index).

    Pairing removes the per-sample difficulty both models share, so the
    interval is much tighter than comparing two independent CIs. Samples
    present for only one model are dropped and counted.
    """
    df = normalise(df)
    a, b = _sample_scores(df, model_a), _sample_scores(df, model_b)
    joined = pd.concat({"a": a, "b": b}, axis=1, join="inner")
    if joined.empty:
        raise ValueError(
            f"paired comparison: {model_a!r} and {model_b!r} share no (task, length, index) samples"
        )
    diffs = (joined["a"] - joined["b"]).rename("d")
    strata = {key: g.to_numpy(dtype=float) for key, g in diffs.groupby(level=["task", "length"])}

    cell_rows, draws_by_cell = [], {}
    for (task, length), d in strata.items():
        draws = boot_means(d, n_boot=n_boot, rng=cell_rng(seed, model_a, model_b, task, length))
        draws_by_cell[(task, length)] = draws
        cell_rows.append((task, length, d.size, float(d.mean()), *percentile_ci(draws, ci=ci)))
    cells = pd.DataFrame(cell_rows, columns=["task", "length", "n", "diff", "lo", "hi"])

    # Cell replicates are independent, so averaging them gives stratified replicates.
    length_rows = []
    for length, group in cells.groupby("length", sort=True):
        draws = np.mean([draws_by_cell[(t, length)] for t in group["task"]], axis=0)
        length_rows.append(
            (
                length,
                len(group),
                int(group["n"].sum()),
                float(group["diff"].mean()),
                *percentile_ci(draws, ci=ci),
            )
        )
    by_length = pd.DataFrame(length_rows, columns=["length", "n_tasks", "n", "diff", "lo", "hi"])
    overall_draws = np.mean(list(draws_by_cell.values()), axis=0)
    lo, hi = percentile_ci(overall_draws, ci=ci)
    return PairedComparison(
        model_a=model_a,
        model_b=model_b,
        cells=cells,
        by_length=by_length,
        overall=float(cells["diff"].mean()),
        overall_lo=lo,
        overall_hi=hi,
        n_pairs=len(joined),
        n_unmatched_a=len(a) - len(joined),
        n_unmatched_b=len(b) - len(joined),
        ci=ci,
    )
