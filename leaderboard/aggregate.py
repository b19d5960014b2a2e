"""Aggregate per-sample scores into RULER-style tables, with intervals and tests from :mod:`leaderboard.stats`.

All scores stay on the 0..1 scale here; only rendering multiplies by 100. Every cell carries its n and, when the
store's plan is given (`cells`), its planned, errored and pending samples. A model's score at a length is the mean
of its task means over the tasks it has scores for at EVERY one of its lengths (its common task set), so a length
is never averaged over a different set of tasks than another; the set is recorded with each row. Reported
(paper) rows have no samples, so they pass through without intervals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .bootstrap import cell_rng
from .frame import AVG_TASK, normalise
from .ranking import effective_length, resolve_threshold, weighted_averages
from .stats import holm, mean_interval, paired_test, sign_flip_interval, stratified_interval, verdict

__all__ = [
    "PairedComparison",
    "category_table",
    "common_tasks",
    "depth_length_matrix",
    "effective_length",
    "headline_withheld",
    "length_averages",
    "paired_comparison",
    "position_curve",
    "resolve_threshold",
    "task_length_table",
    "weighted_averages",
]

NAN = float("nan")
CELL_COUNTS = ("planned", "errored", "pending", "stopped")  # stopped: never scored, a sequential verdict was known
SEQUENTIAL = "anytime-valid"  # the method of a sequential length's interval (a confidence sequence at its stop)


def _cell_stats(df: pd.DataFrame, keys: list[str], *, n_boot: int, seed: int, ci: float) -> pd.DataFrame:
    """Mean and interval of ``score`` per group of ``keys`` (binomial for 0/1 scores, bootstrap or "n too small")."""
    rows = []
    for key, group in df.groupby(keys, sort=True):
        values = group["score"].to_numpy(dtype=float)
        source = group["source"].iat[0]
        if source == "reported":
            rows.append((*key, float(values.mean()), NAN, NAN, 0, "reported", source))
            continue
        iv = mean_interval(values, level=ci, n_boot=n_boot, rng=cell_rng(seed, *key), clusters=_clusters(group))
        rows.append((*key, iv.mean, iv.lo, iv.hi, iv.n, iv.method, source))
    return pd.DataFrame(rows, columns=[*keys, "mean", "lo", "hi", "n", "method", "source"])


def _clusters(rows: pd.DataFrame) -> list | None:
    """The rows' `cluster` ids (samples sharing a haystack or document), or None when the frame records none."""
    if "cluster" not in rows.columns or rows["cluster"].isna().all():
        return None
    return [c if pd.notna(c) else ("row", i) for i, c in enumerate(rows["cluster"])]


def status(n: int, errored: int, pending: int, source: str = "measured", stopped: int = 0) -> str:
    """A cell's state: reported, errored (some samples failed), incomplete (some never ran), sequential (a sequential
    run stopped it once its verdict was known: a prefix of its samples) or complete."""
    if source == "reported":
        return "reported"
    return "errored" if errored else "incomplete" if pending else "sequential" if stopped else "complete"


def task_length_table(
    df: pd.DataFrame, cells: pd.DataFrame | None = None, *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> pd.DataFrame:
    """Mean score per (model, task, length) with its interval, n, and (from `cells`) planned/errored/pending.

    Cells that were planned but have no scored sample appear with a NaN mean, so they are never silently absent.
    """
    df = normalise(df)
    out = _cell_stats(df, ["model", "task", "length"], n_boot=n_boot, seed=seed, ci=ci)
    if cells is not None and not cells.empty:
        cols = [c for c in ["model", "task", "length", *CELL_COUNTS, "errors", "sequential_lo", "sequential_hi",
                            "sequential"] if c in cells]
        out = out.merge(cells[cols], on=["model", "task", "length"], how="outer")
        out["n"] = out["n"].fillna(0).astype(int)
        out["source"] = out["source"].fillna("measured")
        out["method"] = out["method"].fillna("no scored sample")
    for col in CELL_COUNTS:
        if col not in out:
            out[col] = out["n"] if col == "planned" else 0
        out[col] = out[col].fillna(out["n"] if col == "planned" else 0).astype(int)
    if "errors" not in out:
        out["errors"] = ""
    out["errors"] = out["errors"].fillna("")
    out["status"] = [status(r.n, r.errored, r.pending, r.source, r.stopped) for r in out.itertuples()]
    return out.sort_values(["model", "task", "length"]).reset_index(drop=True)


def common_tasks(table: pd.DataFrame) -> dict[str, tuple[set[str], set[str]]]:
    """Per model with per-task rows (measured, or reported per task): (tasks with a score at every length where it
    has any score, all its tasks). A reported table's `avg` rows are the paper's own average and not a task.

    A length with no score at all (a run stopped before it) does not empty the set: it is shown as not run."""
    out = {}
    for model, rows in table[(table["source"] == "measured") | (table["task"] != AVG_TASK)].groupby("model"):
        scored = rows[rows["mean"].notna()]
        per_length = [set(scored.loc[scored["length"] == L, "task"]) for L in sorted(scored["length"].unique())]
        out[model] = (set.intersection(*per_length) if per_length else set(), set(rows["task"]))
    return out


def headline_withheld(table: pd.DataFrame) -> dict[str, str]:
    """Per measured model, why its headline numbers (Effective, Avg, wAvg) are withheld, "" when they are not:
    every planned cell of the model must be complete, or a run in progress or with failed samples would put a
    number on the board that its missing samples could still change."""
    out = {}
    for model, rows in table[table["source"] == "measured"].groupby("model"):
        out[model] = "incomplete" if rows["pending"].sum() else "failed samples" if rows["errored"].sum() else ""
    return out


def length_averages(
    df: pd.DataFrame, cells: pd.DataFrame | None = None, *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> pd.DataFrame:
    """A model's score at each length: the unweighted mean of its task means over its common task set (as RULER).

    `task_set` says whether that is every task of the model ("all") or fewer ("k of K tasks scored at every
    length"); with no common task it is withheld (NaN) and `note` says why. The interval is
    stats.stratified_interval; `planned`/`errored`/`pending` count the samples of the averaged cells. Reported
    ``avg`` rows pass through; reported per-task rows are averaged like measured ones but get no interval.
    ``lo_spent`` is the lower end at level 1 − (1 − ci)/K for a model scored at K lengths (α spent over them, for
    ranking.effective_length's CI lower); a sequential length keeps its anytime-valid lower end.
    """
    df = normalise(df)
    table = task_length_table(df, cells, n_boot=n_boot, seed=seed, ci=ci)
    common, withheld = common_tasks(table), headline_withheld(table)
    looks = table.groupby("model")["length"].nunique().to_dict()  # lengths per model: CI lower spends α over them
    rows = []
    for (model, length), group in table.groupby(["model", "length"], sort=True):
        scores = df[(df["model"] == model) & (df["length"] == length)]
        runs = ",".join(sorted(set(scores["run_id"]) - {""}))
        base = dict(model=model, length=length, source=group["source"].iat[0],
                    claimed_length=scores["claimed_length"].max() if len(scores) else NAN, run_ids=runs,
                    headline=withheld.get(model, ""))
        if base["source"] == "reported":
            rows.append(_reported_average(base, scores, common.get(model)))
        else:
            rows.append(_measured_average(base, group, scores, common[model], looks=looks[model], n_boot=n_boot,
                                          seed=seed, ci=ci))
    return pd.DataFrame(rows, columns=LENGTH_AVERAGE_COLUMNS)


LENGTH_AVERAGE_COLUMNS = ["model", "length", "mean", "lo", "hi", "lo_spent", "method", "n_tasks", "n_tasks_all", "n",
                          "planned", "errored", "pending", "stopped", "status", "task_set", "task_set_key", "note",
                          "source", "claimed_length", "run_ids", "headline"]
NO_SAMPLES = {"lo": NAN, "hi": NAN, "method": "reported", "n": 0, "planned": 0, "errored": 0, "pending": 0, "stopped": 0,
              "status": "reported"}


def _task_set(keep: set[str], every: set[str]) -> str:
    return "all" if keep == every else f"{len(keep)} of {len(every)} tasks (those scored at every length)"


def _reported_average(base: dict, scores: pd.DataFrame, common: tuple[set[str], set[str]] | None) -> dict:
    """A paper's number at a length: its own average where it gives one (or where the model has no common task set),
    else the mean of its per-task rows over the same common task set as a measured model. No samples, no interval."""
    avg = scores[scores["task"] == AVG_TASK]
    if len(avg) or common is None:
        return {**base, **NO_SAMPLES, "mean": float(avg["score"].mean()) if len(avg) else NAN, "n_tasks": 0,
                "n_tasks_all": 0, "task_set": "reported", "task_set_key": "reported", "note": ""}
    keep, every = common
    mean = float(scores[scores["task"].isin(keep)].groupby("task")["score"].mean().mean()) if keep else NAN
    return {**base, **NO_SAMPLES, "mean": mean, "n_tasks": len(keep), "n_tasks_all": len(every),
            "task_set": _task_set(keep, every), "task_set_key": ",".join(sorted(keep)),
            "note": "" if keep else "withheld: no task has a score at every length"}


def _measured_average(base: dict, group: pd.DataFrame, scores: pd.DataFrame, common: tuple[set[str], set[str]], *,
                      looks: int, n_boot: int, seed: int, ci: float) -> dict:
    """A measured model's average at a length over its common task set: the stratified interval over the tasks'
    samples (clusters kept), a sequential run's anytime-valid one where it stopped, and the lower end at the level
    spent over the model's `looks` lengths."""
    keep, every = common
    if not int(group["n"].sum()):
        keep, note = set(), "not run: no scored sample at this length"
    else:
        note = "" if keep else "withheld: no task has a score at every length"
    in_set = group[group["task"].isin(keep)] if keep else group
    strata = [scores.loc[scores["task"] == t, "score"].to_numpy(dtype=float) for t in sorted(keep)]
    clusters = [_clusters(scores[scores["task"] == t]) for t in sorted(keep)]
    clusters = clusters if any(c is not None for c in clusters) else None
    rng = cell_rng(seed, base["model"], base["length"])
    iv = stratified_interval(strata, level=ci, n_boot=n_boot, rng=rng, clusters=clusters)
    counts = {c: int(in_set[c].sum()) for c in CELL_COUNTS}
    iv = _sequential_interval(iv, group, counts, keep)
    spent = iv.lo if looks == 1 or iv.method == SEQUENTIAL else stratified_interval(
        strata, level=1 - (1 - ci) / looks, n_boot=n_boot, rng=cell_rng(seed, base["model"], base["length"]),
        clusters=clusters).lo
    return {**base, "mean": iv.mean, "lo": iv.lo, "hi": iv.hi, "lo_spent": spent, "method": iv.method,
            "n_tasks": len(keep), "n_tasks_all": len(every), "n": iv.n, **counts,
            "status": status(iv.n, counts["errored"], counts["pending"], stopped=counts["stopped"])
            if keep else note.split(":")[0],
            "task_set": _task_set(keep, every), "task_set_key": ",".join(sorted(keep)), "note": note}


def _sequential_interval(iv, group: pd.DataFrame, counts: dict[str, int], keep: set[str]):
    """A length a sequential run stopped (--until) shows its anytime-valid interval, not a fixed-n one: its n depended
    on the data, which a fixed-n interval does not allow for. Only where every sample of the length is scored, and
    only on the task set the sequential run averaged (beside another run's tasks it covers another mean)."""
    if "sequential_lo" not in group or group["sequential_lo"].isna().all() or counts["pending"] or counts["errored"]:
        return iv
    if set(group.loc[group["sequential_lo"].notna(), "task"]) != set(keep):
        return iv
    import dataclasses

    return dataclasses.replace(iv, lo=float(group["sequential_lo"].dropna().iat[0]),
                               hi=float(group["sequential_hi"].dropna().iat[0]), method=SEQUENTIAL)


def category_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per-model, per-category mean score at each length, plus an ``avg`` column.

    Only each model's common task set is used (tasks scored at every one of its lengths), so a category's
    lengths average the same tasks. A category's score at a length is the mean of its task means; ``avg`` is the
    mean over the lengths. Rows without a category (and reported ``avg`` rows) are left out.
    """
    df = normalise(df)
    df = df[df["category"].notna() & (df["task"] != AVG_TASK)]
    if df.empty:
        return pd.DataFrame(index=pd.MultiIndex.from_tuples([], names=["model", "category"]))
    per_length = df.groupby(["model", "length"])["task"].agg(set)
    keep = {m: set.intersection(*s) for m, s in per_length.groupby(level="model")}
    df = df[[t in keep[m] for m, t in zip(df["model"], df["task"])]]
    if df.empty:
        return pd.DataFrame(index=pd.MultiIndex.from_tuples([], names=["model", "category"]))
    task_means = df.groupby(["model", "category", "length", "task"])["score"].mean()
    per_cat = task_means.groupby(level=["model", "category", "length"]).mean()
    table = per_cat.unstack("length").sort_index(axis=1)
    table.columns = [int(c) for c in table.columns]
    table["avg"] = table.mean(axis=1, skipna=True)
    return table


def depth_length_matrix(df: pd.DataFrame, task: str, *, bins: Sequence[float] | None = None) -> pd.DataFrame:
    """Mean accuracy per (model, depth) row and length column for one grid task.

    Depths are snapped to the nearest of ``bins`` when given (the depths the grid asked for), otherwise rounded
    to whole percent, so float noise in recorded depths does not split cells.
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
    table = df.pivot_table(index=["model", "depth"], columns="length", values="score", aggfunc="mean")
    table.columns = [int(c) for c in table.columns]
    return table.sort_index()


def position_curve(df: pd.DataFrame, task: str, *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95) -> pd.DataFrame:
    """Accuracy by gold ``position`` per model for one task, with intervals."""
    df = normalise(df)
    df = df[(df["task"] == task) & df["position"].notna()].copy()
    if df.empty:
        return pd.DataFrame(columns=["model", "position", "mean", "lo", "hi", "n", "method", "source"])
    df["position"] = df["position"].astype(np.int64)
    return _cell_stats(df, ["model", "position"], n_boot=n_boot, seed=seed, ci=ci)


@dataclass(frozen=True)
class PairedComparison:
    """Result of :func:`paired_comparison`; differences are A − B on the 0..1 scale.

    ``cells`` has one row per (task, length), ``by_length`` one per length (tasks weigh equally), each with its
    pairs, discordant pairs, exact p-value and the Holm-adjusted one; ``overall`` weighs (task, length) cells
    equally. ``verdict`` says in words whether the overall difference is significant.
    """

    model_a: str
    model_b: str
    cells: pd.DataFrame
    by_length: pd.DataFrame
    overall: float
    p_value: float
    method: str
    n_pairs: int
    n_discordant: int
    n_unmatched_a: int
    n_unmatched_b: int
    verdict: str
    alpha: float = 0.05
    ci: tuple[float, float] | None = None  # 1 − alpha interval of `overall`, the inverted test (None: see ci_note)
    ci_note: str = ""


PAIR_KEY = ["task", "length", "seed", "index"]  # the seed is part of a sample's identity: its needles depend on it


def _sample_scores(df: pd.DataFrame, model: str) -> pd.Series:
    rows = df[df["model"] == model]
    if rows.empty:
        raise ValueError(f"paired comparison: no rows for model {model!r}")
    rows = rows[rows["source"] == "measured"]
    if rows.empty:
        raise ValueError(f"paired comparison: model {model!r} has only reported rows (no per-sample scores)")
    # the same sample rendered twice (another template) is averaged so each sample pairs once
    return rows.groupby(PAIR_KEY)["score"].mean()


def _pair_clusters(df: pd.DataFrame, index: pd.MultiIndex) -> pd.Series | None:
    """Each matched sample's cluster (shared haystack or document), or None when the frame records none."""
    if "cluster" not in df.columns or df["cluster"].isna().all():
        return None
    ids = df[df["source"] == "measured"].groupby(PAIR_KEY)["cluster"].first().reindex(index)
    return pd.Series([c if pd.notna(c) else ("row", i) for i, c in enumerate(ids)], index=index)


def _tested(a: np.ndarray, b: np.ndarray, strata, rng, clusters=None) -> tuple:
    t = paired_test(a, b, strata=strata, rng=rng, clusters=clusters)
    return t.n_pairs, t.n_discordant, t.diff, t.p_value


def paired_interval(joined: pd.DataFrame, *, n_discordant: int, min_discordant: int = 10, level: float = 0.95,
                    p_value: float | None = None, clusters: Sequence | None = None,
                    rng: np.random.Generator | None = None) -> tuple[tuple[float, float] | None, str]:
    """The overall paired difference's interval (cells weighing equally), inverted from the sign-flip test that
    gives the verdict (stats.sign_flip_interval; clusters flip together), so it excludes 0 exactly when the test
    rejects at 1 − level. Given the test's own `p_value` (an exact sign test, or Monte Carlo on other draws), an
    interval on the other side of the level is withheld and the test decides. Below `min_discordant` differing
    pairs there is no interval either: the exact test alone decides."""
    if n_discordant < min_discordant:
        return None, f"no interval: {n_discordant} of the pairs differ (fewer than {min_discordant}); the exact test decides"
    index = joined.index  # level values, not index.to_frame(): a study's calibration calls this thousands of times
    strata = list(zip(index.get_level_values("task"), index.get_level_values("length")))
    lo, hi, p_zero = sign_flip_interval(joined["a"].to_numpy(dtype=float), joined["b"].to_numpy(dtype=float),
                                        strata=strata, clusters=clusters, level=level, rng=rng)
    p = p_zero if p_value is None else p_value
    if (lo <= 0 <= hi) == (p < 1 - level):
        return None, f"no interval: at p = {p:.3g} the inverted interval falls on the other side of the level; the test decides"
    return (lo, hi), "sign-flip test inverted, cells weighing equally" + ("; clusters flip together" if clusters else "")


def paired_comparison(
    df: pd.DataFrame, *, model_a: str, model_b: str, seed: int = 0, alpha: float = 0.05
) -> PairedComparison:
    """A − B over samples matched on (task, length, seed, index), with exact paired tests.

    Each cell gets the exact sign test (binary scores) or sign-flip permutation test (continuous); each length
    and the overall difference are tested with cells as strata (each weighs equally). Per-cell and per-length
    p-values are Holm-adjusted within their family. Samples present for only one model are dropped and counted.
    """
    df = normalise(df)
    a, b = _sample_scores(df, model_a), _sample_scores(df, model_b)
    joined = pd.concat({"a": a, "b": b}, axis=1, join="inner")
    if joined.empty:
        raise ValueError(f"paired comparison: {model_a!r} and {model_b!r} share no (task, length, seed, index) samples")
    keys = joined.index.to_frame(index=False)
    cell_key = list(zip(keys["task"], keys["length"]))
    clusters = _pair_clusters(df, joined.index)

    def of(g: pd.DataFrame) -> list | None:
        return None if clusters is None else clusters.loc[g.index].tolist()

    cell_rows = []
    for (task, length), g in joined.groupby(level=["task", "length"], sort=True):
        rng = cell_rng(seed, model_a, model_b, task, length)
        cell_rows.append((task, length, *_tested(g["a"].to_numpy(), g["b"].to_numpy(), None, rng, of(g))))
    cells = pd.DataFrame(cell_rows, columns=["task", "length", "n", "n_discordant", "diff", "p"])
    cells["p_holm"] = holm(cells["p"].tolist())
    length_rows = []
    for length, g in joined.groupby(level="length", sort=True):
        tasks = g.index.get_level_values("task")
        rng = cell_rng(seed, model_a, model_b, length)
        length_rows.append((length, len(set(tasks)), *_tested(g["a"].to_numpy(), g["b"].to_numpy(), list(tasks), rng,
                                                              of(g))))
    by_length = pd.DataFrame(length_rows, columns=["length", "n_tasks", "n", "n_discordant", "diff", "p"])
    by_length["p_holm"] = holm(by_length["p"].tolist())
    overall = paired_test(joined["a"].to_numpy(), joined["b"].to_numpy(), strata=cell_key, clusters=of(joined),
                          rng=cell_rng(seed, model_a, model_b))
    ci, ci_note = paired_interval(joined, n_discordant=overall.n_discordant, level=1 - alpha, p_value=overall.p_value,
                                  clusters=of(joined), rng=cell_rng(seed, model_a, model_b))
    return PairedComparison(
        model_a=model_a, model_b=model_b, cells=cells, by_length=by_length, overall=overall.diff, ci=ci, ci_note=ci_note,
        p_value=overall.p_value, method=overall.method, n_pairs=overall.n_pairs, n_discordant=overall.n_discordant,
        n_unmatched_a=len(a) - len(joined), n_unmatched_b=len(b) - len(joined),
        verdict=verdict(overall, alpha=alpha, names=(model_a, model_b)), alpha=alpha)
