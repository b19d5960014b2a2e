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
    """Per ppl task and length: exp(summed NLL / scored tokens) over its scored documents, with how many of the planned
    documents were scored (done), failed (errored) or not run yet (planned - done - errored)."""
    from ctxbench.leaderboard.store_frame import loss_tasks

    latest = store.latest()
    rec = store.read_record() if store.record_path.exists() else {}
    losses = loss_tasks(rec, latest)
    cells: dict[tuple[str, int], list] = {}  # (task, length) -> [nll, tokens, done, errored]
    for r in latest.values():
        if r.get("task") not in losses or r.get("length") is None:
            continue
        c = cells.setdefault((r["task"], int(r["length"])), [0.0, 0, 0, 0])
        if r.get("error") or r.get("nll") is None:
            c[3] += 1
        else:
            c[0], c[1], c[2] = c[0] + r["nll"], c[1] + r["tokens"], c[2] + 1
    planned = {(t, int(L)): int(n) for t, per in (rec.get("plan") or {}).items() if t in losses for L, n in per.items()}
    rows = [(t, L, *cells.get((t, L), [0.0, 0, 0, 0]), planned.get((t, L), sum(cells.get((t, L), [0, 0, 0, 0])[2:])))
            for t, L in sorted(set(cells) | set(planned))]
    df = pd.DataFrame(rows, columns=["task", "length", "nll", "tokens", "done", "errored", "planned"])
    return df.assign(ppl=[math.exp(n / t) if t else math.nan for n, t in zip(df["nll"], df["tokens"])])


def perplexity_cell(row) -> str:
    """The perplexity, marked (as the score cells are) when documents of the cell failed or were not run."""
    missing = row.planned - row.done
    if not row.done:
        return f"failed {row.errored}/{row.planned}" if row.errored else f"not run 0/{row.planned}"
    if not missing:
        return f"{row.ppl:.3f}"
    failed = f", {row.errored} failed" if row.errored else ""
    return f"{row.ppl:.3f} ! ({row.done}/{row.planned}{failed})"


def table(store: RunStore, *, title: str, width: int | None = None) -> Table:
    """The run's table; within `width` columns (a terminal's) cells drop their intervals, then the n of complete
    cells, before any cell would wrap onto a second line; the caption says what was left out and where it is."""
    from rich.console import Console

    from ctxbench.leaderboard.store_frame import store_frames

    frames, ppl = store_frames([store]), perplexity_frame(store)
    if frames.scores.empty and ppl.empty:
        t = Table(title=title, show_lines=False)
        t.add_column("no scored samples")
        for r in frames.cells.itertuples():
            t.add_row(f"{r.task} @ {r.length}: {r.errored} failed, {r.pending} not run of {r.planned}")
        return t
    probe = Console(width=1 << 14)
    for detail in ("full", "no intervals", "marks only"):
        t = _score_table(frames, ppl, title=title, detail=detail)
        if width is None or probe.measure(t).maximum <= width:
            break
    if detail != "full":
        left_out = "Intervals" if detail == "no intervals" else "Intervals and the n of complete cells"
        note = f"{left_out} left out to fit {width} columns; widen the terminal, or see `ctxbench board build`."
        t.caption = f"{t.caption} {note}" if t.caption else note
    return t


def _cell(row, detail: str) -> str:
    """A score cell at one level of detail: full (mean [interval] n=), no intervals (mean n=), marks only (the mean,
    with n= and marks only where samples are missing or failed)."""
    from ctxbench.leaderboard.tables import score_cell

    if detail == "full":
        return score_cell(row)
    row = {**(row.to_dict() if hasattr(row, "to_dict") else row._asdict()), "lo": math.nan, "hi": math.nan}
    complete = not int(row.get("pending", 0) or 0) and not int(row.get("errored", 0) or 0)
    text = score_cell(row)
    return text.split(" n=")[0] if detail == "marks only" and complete else text


def _score_table(frames, ppl: pd.DataFrame, *, title: str, detail: str) -> Table:
    from ctxbench.leaderboard.aggregate import length_averages, task_length_table
    from ctxbench.leaderboard.frame import format_length
    from ctxbench.leaderboard.tables import marks_legend

    t = Table(title=title, show_lines=False)
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
        row = [_cell(cells.loc[(task, L)], detail) if (task, L) in cells.index else "—" for L in lengths]
        t.add_row(task, *row, str(int(empties.get(task, 0))))
    if not avgs.empty:
        t.add_section()
        by_length = avgs.set_index("length")
        first = avgs[avgs["mean"].notna()]
        task_set = first["task_set"].iat[0] if len(first) else "withheld"
        label = "average" if task_set == "all" else f"average ({task_set})"
        t.add_row(label, *[_cell(by_length.loc[L], detail) if L in by_length.index else "—" for L in lengths],
                  str(int(frames.scores["empty"].sum())), style="bold")
    legend = marks_legend([tasks, avgs]) if scored else []
    if legend:
        t.caption = " ".join(legend)
    if not ppl.empty:
        t.add_section()
        cell = {(r.task, int(r.length)): perplexity_cell(r) for r in ppl.itertuples()}
        for task in sorted(ppl["task"].unique()):
            t.add_row(f"{task} (perplexity)", *[cell.get((task, L), "—") for L in lengths], "—")
        if any(r.done < r.planned for r in ppl.itertuples()):
            note = "! perplexity over the scored documents only (scored/planned); rerun the command to retry the rest."
            t.caption = f"{t.caption} {note}" if t.caption else note
    return t
