"""Display tables for the report: numbers formatted as plain text, percent scale.

Builders here only format; they take frames already produced by
:mod:`leaderboard.aggregate` / :mod:`leaderboard.ranking` and return
:class:`leaderboard.render.Table` objects (escaping is the renderer's job).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from .aggregate import PairedComparison
from .frame import format_length
from .render import Table

REPORTED_MARK = "†"
DASH = "—"


def pct(value: object, *, signed: bool = False) -> str:
    if value is None or pd.isna(value):
        return DASH
    return f"{float(value) * 100:+.1f}" if signed else f"{float(value) * 100:.1f}"


def with_ci(mean: object, lo: object, hi: object, *, signed: bool = False) -> str:
    if lo is None or pd.isna(lo) or pd.isna(hi):
        return pct(mean, signed=signed)
    return f"{pct(mean, signed=signed)} [{pct(lo, signed=signed)}, {pct(hi, signed=signed)}]"


def ordinal(rank: object) -> str:
    if rank is None or pd.isna(rank):
        return ""
    rank = int(rank)
    suffix = "th" if 10 <= rank % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(rank % 10, "th")
    return f"{rank}{suffix}"


def effective_text(
    length: object, *, shortest: int, longest: int, passes_all: bool = False, known: bool = True
) -> str:
    """RULER-style: ``<4K`` when even the shortest length fails, ``≥128K`` when all pass."""
    if not known:
        return DASH
    if length is None or pd.isna(length):
        return f"<{format_length(shortest)}"
    if passes_all and int(length) == longest:
        return f"≥{format_length(longest)}"
    return format_length(length)


def summary_frame(
    avgs: pd.DataFrame, eff: pd.DataFrame, wavg: pd.DataFrame, meta: pd.DataFrame
) -> pd.DataFrame:
    """One row per model with everything the main table shows, sorted as RULER (wAvg dec)."""
    out = eff.merge(wavg, on="model", how="outer").merge(
        meta, left_on="model", right_index=True, how="left"
    )
    out["_unranked"] = out["rank_dec"].isna()
    out = out.sort_values(
        ["_unranked", "rank_dec", "avg", "model"],
        ascending=[True, True, False, True],
        na_position="last",
    )
    return out.drop(columns="_unranked").reset_index(drop=True)


def main_table(avgs: pd.DataFrame, summary: pd.DataFrame) -> Table:
    lengths = sorted(int(x) for x in avgs["length"].unique())
    cells = avgs.set_index(["model", "length"])
    headers = (
        "Model",
        "Claimed",
        "Effective",
        "Effective (CI lower)",
        *(format_length(x) for x in lengths),
        "Avg",
        "wAvg (inc)",
        "wAvg (dec)",
    )
    rows = []
    for r in summary.itertuples(index=False):
        reported = r.source == "reported"
        scores = []
        for length in lengths:
            if (r.model, length) in cells.index:
                c = cells.loc[(r.model, length)]
                scores.append(with_ci(c["mean"], c["lo"], c["hi"]))
            else:
                scores.append(DASH)
        rows.append(
            (
                f"{r.model} {REPORTED_MARK}" if reported else r.model,
                format_length(r.claimed_length),
                effective_text(
                    r.effective_length,
                    shortest=r.shortest,
                    longest=r.longest,
                    passes_all=r.passes_all,
                ),
                effective_text(
                    r.effective_length_lower,
                    shortest=r.shortest,
                    longest=r.longest,
                    passes_all=r.passes_all,
                    known=r.lower_known,
                ),
                *scores,
                f"{pct(r.avg)} ({ordinal(r.rank_avg)})" if ordinal(r.rank_avg) else pct(r.avg),
                f"{pct(r.wavg_inc)} ({ordinal(r.rank_inc)})"
                if ordinal(r.rank_inc)
                else pct(r.wavg_inc),
                f"{pct(r.wavg_dec)} ({ordinal(r.rank_dec)})"
                if ordinal(r.rank_dec)
                else pct(r.wavg_dec),
            )
        )
    return Table(headers=headers, rows=tuple(rows))


def category_display(cats: pd.DataFrame) -> Table:
    lengths = [c for c in cats.columns if c != "avg"]
    headers = ("Model", "Category", *(format_length(x) for x in lengths), "Avg")
    rows = tuple(
        (
            model,
            category,
            *(pct(cats.loc[(model, category), x]) for x in lengths),
            pct(cats.loc[(model, category), "avg"]),
        )
        for model, category in cats.index
    )
    return Table(headers=headers, rows=rows)


def task_display(tasks: pd.DataFrame) -> Table:
    lengths = sorted(int(x) for x in tasks["length"].unique())
    cells = tasks.set_index(["model", "task", "length"])
    rows = []
    for (model, task), _ in tasks.groupby(["model", "task"], sort=True):
        row = [model, task]
        for length in lengths:
            key = (model, task, length)
            row.append(
                with_ci(*cells.loc[key, ["mean", "lo", "hi"]]) if key in cells.index else DASH
            )
        rows.append(tuple(row))
    return Table(headers=("Model", "Task", *(format_length(x) for x in lengths)), rows=tuple(rows))


def comparison_display(comp: PairedComparison) -> Table:
    rows = [
        (r.task, format_length(r.length), str(r.n), with_ci(r.diff, r.lo, r.hi, signed=True))
        for r in comp.cells.itertuples(index=False)
    ]
    rows += [
        (
            f"all tasks (avg of {r.n_tasks})",
            format_length(r.length),
            str(r.n),
            with_ci(r.diff, r.lo, r.hi, signed=True),
        )
        for r in comp.by_length.itertuples(index=False)
    ]
    rows.append(
        (
            "overall",
            "all",
            str(comp.n_pairs),
            with_ci(comp.overall, comp.overall_lo, comp.overall_hi, signed=True),
        )
    )
    caption = f"{comp.model_a} − {comp.model_b}"
    return Table(
        headers=("Task", "Length", "Pairs", f"Difference [{comp.ci:.0%} CI]"),
        rows=tuple(rows),
        caption=caption,
    )


EXAMPLE_FIELDS = ("model", "task", "length", "index", "score", "prediction", "reference")


def examples_display(
    examples: Iterable[Mapping[str, object]], *, per_task: int = 3, text_limit: int = 2000
) -> Table:
    """A few predictions per task; long outputs are cut, nothing is interpreted."""
    kept: dict[str, int] = {}
    rows = []
    for example in examples:
        task = str(example.get("task", ""))
        if kept.get(task, 0) >= per_task:
            continue
        kept[task] = kept.get(task, 0) + 1
        row = []
        for field in EXAMPLE_FIELDS:
            value = example.get(field, "")
            if field == "length" and isinstance(value, numbers.Integral):
                value = format_length(value)
            elif field == "score" and isinstance(value, numbers.Real):
                value = f"{float(value):.2f}"
            elif isinstance(value, Sequence) and not isinstance(value, str):
                value = " | ".join(str(v) for v in value)
            text = "" if value is None else str(value)
            row.append(text if len(text) <= text_limit else text[: text_limit - 1] + "…")
        rows.append(tuple(row))
    return Table(
        headers=EXAMPLE_FIELDS, rows=tuple(rows), pre=frozenset({"prediction", "reference"})
    )
