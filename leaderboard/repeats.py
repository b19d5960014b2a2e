"""Repeats (`ctxbench score --repeats k`): each repeat's score beside the interval, so a reader sees how much a
cell moves from one generation to the next.

The board's score and interval stay as they are: a sample's repeats are averaged into one row before any statistic
(store_frame.average_repeats), n counts distinct samples, and the repeats never count as independent samples. Here
each repeat r gets its own score: the mean of the samples' r-th scores (tasks weighing equally for an average), over
the samples that have all k repeats, and the spread is the largest minus the smallest.
"""

from __future__ import annotations

import pandas as pd

from .frame import AVG_TASK, format_length
from .render import Section, Table
from .tables import pct, with_ci

COLUMNS = ["model", "task", "length", "repeats", "per_repeat", "spread", "mean", "lo", "hi", "n"]


def _repeated(df: pd.DataFrame) -> pd.DataFrame:
    """Measured rows whose sample was generated more than once."""
    if "repeat_scores" not in df.columns:
        return df.iloc[0:0]
    several = df["repeat_scores"].map(lambda v: isinstance(v, (list, tuple)) and len(v) > 1)
    return df[several & (df["source"] == "measured")]


def _per_repeat(scores: pd.Series) -> list[float]:
    """Each repeat's mean over the samples that have all of the cell's repeats."""
    k = max(len(v) for v in scores)
    full = [v for v in scores if len(v) == k]
    return [sum(v[r] for v in full) / len(full) for r in range(k)]


def repeat_spread(df: pd.DataFrame, tasks: pd.DataFrame, avgs: pd.DataFrame) -> pd.DataFrame:
    """Per (model, task, length) and per (model, length) average: the repeats' own scores and their spread, with the
    board's score, interval and n beside them (0..1). Empty when no run has --repeats above 1."""
    rows = _repeated(df)
    cells = []
    for (model, task, length), g in rows.groupby(["model", "task", "length"], sort=True):
        cells.append((model, task, int(length), _per_repeat(g["repeat_scores"])))
    by_length: dict[tuple[str, int], list[list[float]]] = {}
    for model, _, length, per in cells:
        by_length.setdefault((model, length), []).append(per)
    averages = [(model, AVG_TASK, length, [sum(p[r] for p in pers) / len(pers) for r in range(min(map(len, pers)))])
                for (model, length), pers in by_length.items() if len(pers) > 1]
    out = []
    for model, task, length, per in [*cells, *averages]:
        table = avgs if task == AVG_TASK else tasks[tasks["task"] == task]
        hit = table[(table["model"] == model) & (table["length"] == length) & (table["source"] == "measured")]
        board = hit.iloc[0] if len(hit) else pd.Series({"mean": None, "lo": None, "hi": None, "n": 0})
        out.append((model, task, length, len(per), per, max(per) - min(per), board["mean"], board["lo"], board["hi"],
                    int(board["n"])))
    frame = pd.DataFrame(out, columns=COLUMNS)
    return frame.sort_values(["model", "length", "task"], kind="stable", ignore_index=True)


def repeats_section(frame: pd.DataFrame) -> Section | None:
    """The per-repeat scores beside each interval, or None without repeats."""
    if frame.empty:
        return None
    rows = tuple((r.model, r.task, format_length(r.length), f"{with_ci(r.mean, r.lo, r.hi)} (n={r.n})",
                  ", ".join(pct(v) for v in r.per_repeat), pct(r.spread)) for r in frame.itertuples(index=False))
    table = Table(headers=("Model", "Task", "Length", "Score [interval]", "Per repeat", "Spread (max − min)"), rows=rows)
    return Section(title="Repeats", tables=(table,), notes=(
        "Per repeat: the score of each generation of the samples (--repeats), over the samples that have all of "
        "them; avg rows weigh tasks equally. The score and interval are the board's: each sample's repeats averaged, "
        "n distinct samples, the repeats never counted as independent samples.",))


def repeat_records(frame: pd.DataFrame) -> list[dict]:
    """results.json's `repeats` list, on the percent scale."""
    records = []
    for r in frame.itertuples(index=False):
        records.append({"model": r.model, "task": r.task, "length": int(r.length), "repeats": int(r.repeats),
                        "per_repeat": [round(v * 100, 6) for v in r.per_repeat], "spread": round(r.spread * 100, 6),
                        "mean": None if pd.isna(r.mean) else round(float(r.mean) * 100, 6),
                        "lo": None if pd.isna(r.lo) else round(float(r.lo) * 100, 6),
                        "hi": None if pd.isna(r.hi) else round(float(r.hi) * 100, 6), "n": int(r.n)})
    return records
