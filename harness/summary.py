"""The task × length table printed at the end of `ctxbench score`."""

from __future__ import annotations

import pandas as pd
from rich.table import Table

from ctxbench.harness.core.store import RunStore


def frame(store: RunStore) -> pd.DataFrame:
    rows = [r for r in store.latest().values() if r.get("score") is not None]
    return pd.DataFrame(rows)


def table(store: RunStore, *, title: str) -> Table:
    df = frame(store)
    t = Table(title=title, show_lines=False)
    if df.empty:
        t.add_column("no scored samples")
        return t
    scores = df.pivot_table(index="task", columns="length", values="score", aggfunc="mean") * 100
    empties = df.groupby("task")["empty"].sum()
    lengths = list(scores.columns)
    t.add_column("task")
    for L in lengths:
        t.add_column(str(L), justify="right")
    t.add_column("empty", justify="right")
    for task, row in scores.iterrows():
        t.add_row(task, *[f"{v:.1f}" if v == v else "-" for v in row], str(int(empties.get(task, 0))))
    t.add_section()
    t.add_row("average", *[f"{scores[L].mean():.1f}" for L in lengths], str(int(df["empty"].sum())), style="bold")
    return t
