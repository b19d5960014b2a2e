"""The task × length table printed at the end of `ctxbench score`: scores ×100, and perplexity for ppl/* tasks."""

from __future__ import annotations

import math

import pandas as pd
from rich.table import Table

from ctxbench.harness.core.store import RunStore


def frame(store: RunStore) -> pd.DataFrame:
    rows = [r for r in store.latest().values() if r.get("score") is not None]
    return pd.DataFrame(rows)


def perplexity_frame(store: RunStore) -> pd.DataFrame:
    """Per ppl task and length: exp(summed NLL / scored tokens) over its documents."""
    rows = [(r["task"], r["length"], r["nll"], r["tokens"]) for r in store.latest().values()
            if r.get("metric") == "perplexity" and not r.get("error")]
    df = pd.DataFrame(rows, columns=["task", "length", "nll", "tokens"]).groupby(["task", "length"]).sum()
    return df.assign(ppl=[math.exp(n / t) for n, t in zip(df["nll"], df["tokens"])]).reset_index()


def table(store: RunStore, *, title: str) -> Table:
    df, ppl = frame(store), perplexity_frame(store)
    t = Table(title=title, show_lines=False)
    if df.empty and ppl.empty:
        t.add_column("no scored samples")
        return t
    lengths = sorted((set(df["length"]) if not df.empty else set()) | set(ppl["length"]))
    t.add_column("task")
    for L in lengths:
        t.add_column(str(L), justify="right")
    t.add_column("empty", justify="right")
    if not df.empty:
        scores = df.pivot_table(index="task", columns="length", values="score", aggfunc="mean").reindex(columns=lengths) * 100
        empties = df.groupby("task")["empty"].sum()
        for task, row in scores.iterrows():
            t.add_row(task, *[f"{v:.1f}" if v == v else "-" for v in row], str(int(empties.get(task, 0))))
        t.add_section()
        t.add_row("average", *[f"{scores[L].mean():.1f}" if scores[L].notna().any() else "-" for L in lengths],
                  str(int(df["empty"].sum())), style="bold")
    if not ppl.empty:
        t.add_section()
        by = ppl.pivot_table(index="task", columns="length", values="ppl").reindex(columns=lengths)
        for task, row in by.iterrows():
            t.add_row(f"{task} (perplexity)", *[f"{v:.3f}" if v == v else "-" for v in row], "-")
    return t
