"""Short-context results (lm-eval tasks, stored with length 0) kept apart from the length axis.

They are not a context length: averaging MMLU into a per-length score, an effective length or a wAvg
would mix two different questions. They get their own table (per task, with CIs) and category means.
"""

from __future__ import annotations

import pandas as pd

from .aggregate import task_length_table
from .render import Section, Table
from .tables import marks_legend, score_cell

SHORT = 0  # the length that marks a short-context (lm-eval) row


def split(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(long-context rows, short-context rows)."""
    short = df["length"] == SHORT
    return df[~short], df[short]


def section(short: pd.DataFrame, cells: pd.DataFrame | None = None, *, n_boot: int, seed: int,
            ci: float) -> tuple[Section, dict]:
    """A per-task table (mean, interval and n per model) and, where tasks have categories, category means."""
    tasks = task_length_table(short, cells, n_boot=n_boot, seed=seed, ci=ci)
    rows = tuple((r.model, r.task, score_cell(r)) for r in tasks.sort_values(["model", "task"]).itertuples())
    tables = [Table(headers=("Model", "Task", "Score [CI] n"), rows=rows)]
    cats = short.dropna(subset=["category"])
    by_cat = pd.DataFrame(columns=["model", "category", "score"])
    if not cats.empty:
        task_means = cats.groupby(["model", "category", "task"])["score"].mean()
        by_cat = task_means.groupby(["model", "category"]).mean().reset_index()
        tables.append(Table(
            headers=("Model", "Category", "Score"),
            rows=tuple((r.model, r.category, f"{100 * r.score:.1f}") for r in by_cat.itertuples()),
            caption="By category (mean of task means)",
        ))
    records = {
        "tasks": [{"model": r.model, "task": r.task, "mean": 100 * r.mean, "lo": 100 * r.lo, "hi": 100 * r.hi, "n": int(r.n),
                   "planned": int(r.planned), "errored": int(r.errored), "status": r.status} for r in tasks.itertuples()],
        "categories": [{"model": r.model, "category": r.category, "mean": 100 * r.score} for r in by_cat.itertuples()],
    }
    note = ("Short-context tasks (lm-evaluation-harness) have no context-length axis, so they are left out "
            "of per-length scores, effective length and wAvg.",)
    return Section(title="Short-context tasks", tables=tuple(tables), paragraphs=note, notes=marks_legend([tasks])), records
