"""The task × length table printed at the end of `ctxbench score`.

It is built by the board's own code (leaderboard.store_frame, leaderboard.aggregate), so the terminal and the
board agree: every cell shows its interval and n, incomplete and failed cells are marked, and the average row is
taken over the tasks scored at every length (and says so when that is fewer than all).
    Perplexity tasks (ppl/*) get rows of their own: exp(summed NLL / scored tokens) over their documents.
"""

from __future__ import annotations

import math

import pandas as pd
from rich.table import Table

from ctxbench.harness.core.store import RunStore


def perplexity_frame(store: RunStore) -> pd.DataFrame:
    """Per ppl task and length: exp(summed NLL / scored tokens) over its documents."""
    rows = [(r["task"], r["length"], r["nll"], r["tokens"]) for r in store.latest().values()
            if r.get("metric") == "perplexity" and not r.get("error")]
    df = pd.DataFrame(rows, columns=["task", "length", "nll", "tokens"]).groupby(["task", "length"]).sum()
    return df.assign(ppl=[math.exp(n / t) for n, t in zip(df["nll"], df["tokens"])]).reset_index()


def table(store: RunStore, *, title: str) -> Table:
    from ctxbench.leaderboard.aggregate import length_averages, task_length_table
    from ctxbench.leaderboard.frame import format_length
    from ctxbench.leaderboard.store_frame import store_frames
    from ctxbench.leaderboard.tables import marks_legend, score_cell

    frames = store_frames([store])
    t = Table(title=title, show_lines=False)
    ppl = perplexity_frame(store)
    if frames.scores.empty and ppl.empty:
        t.add_column("no scored samples")
        for r in frames.cells.itertuples():
            t.add_row(f"{r.task} @ {r.length}: {r.errored} failed, {r.pending} not run of {r.planned}")
        return t
    scored = not frames.scores.empty
    tasks = task_length_table(frames.scores, frames.cells) if scored else pd.DataFrame(columns=["task", "length"])
    long = frames.scores["length"] != 0  # short-context (lm-eval) tasks have no length axis to average over
    avgs = length_averages(frames.scores[long], frames.cells[frames.cells["length"] != 0]) if long.any() else tasks.iloc[:0]
    lengths = sorted({int(x) for x in tasks["length"].unique()} | {int(x) for x in ppl["length"]})
    empties = frames.scores.groupby("task")["empty"].sum() if scored else pd.Series(dtype=int)
    t.add_column("task")
    for length in lengths:
        t.add_column(format_length(length), justify="right")
    t.add_column("empty", justify="right")
    cells = tasks.set_index(["task", "length"])
    for task in sorted(tasks["task"].unique()):
        row = [score_cell(cells.loc[(task, L)]) if (task, L) in cells.index else "—" for L in lengths]
        t.add_row(task, *row, str(int(empties.get(task, 0))))
    if not avgs.empty:
        t.add_section()
        by_length = avgs.set_index("length")
        first = avgs[avgs["mean"].notna()]
        task_set = first["task_set"].iat[0] if len(first) else "withheld"
        label = "average" if task_set == "all" else f"average ({task_set})"
        t.add_row(label, *[score_cell(by_length.loc[L]) if L in by_length.index else "—" for L in lengths],
                  str(int(frames.scores["empty"].sum())), style="bold")
    legend = marks_legend([tasks, avgs]) if scored else []
    if legend:
        t.caption = " ".join(legend)
    if not ppl.empty:
        t.add_section()
        by = ppl.pivot_table(index="task", columns="length", values="ppl").reindex(columns=lengths)
        for task, row in by.iterrows():
            t.add_row(f"{task} (perplexity)", *[f"{v:.3f}" if v == v else "—" for v in row], "—")
    return t
