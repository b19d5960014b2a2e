"""Display tables for the report: numbers formatted as plain text, percent scale.

Builders here only format; they take frames already produced by :mod:`leaderboard.aggregate` /
:mod:`leaderboard.ranking` and return :class:`leaderboard.render.Table` objects (escaping is the renderer's job).
Every score cell shows its n; a cell with fewer samples scored than planned is marked INCOMPLETE_MARK, one with
failed samples FAILED_MARK and how many, so no partial or failed cell looks like a complete one.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from .aggregate import SEQUENTIAL, PairedComparison
from .auc import auc_columns, auc_header, auc_start_text
from .frame import format_length
from .ranking import NO_THRESHOLD, comparison_groups
from .render import Table

REPORTED_MARK = "†"
INCOMPLETE_MARK = "*"
FAILED_MARK = "!"
SEQUENTIAL_MARK = "‡"
DASH = "—"
TOO_SMALL = "n too small"


def pct(value: object, *, signed: bool = False) -> str:
    if value is None or pd.isna(value):
        return DASH
    return f"{float(value) * 100:+.1f}" if signed else f"{float(value) * 100:.1f}"


def with_ci(mean: object, lo: object, hi: object, *, signed: bool = False, method: str = "") -> str:
    if mean is None or pd.isna(mean):
        return DASH
    if lo is None or pd.isna(lo) or pd.isna(hi):
        return f"{pct(mean, signed=signed)} ({TOO_SMALL})" if method == TOO_SMALL else pct(mean, signed=signed)
    return f"{pct(mean, signed=signed)} [{pct(lo, signed=signed)}, {pct(hi, signed=signed)}]"


def counts_text(n: int, planned: int, errored: int, pending: int, stopped: int = 0) -> str:
    """`n=20`, or `n=12/20 *` (incomplete), or `n=18/20 ! 2 failed`, or `n=12/20 ‡` (a sequential run's prefix)."""
    text = f"n={n}" if n == planned else f"n={n}/{planned}"
    if pending:
        text += f" {INCOMPLETE_MARK}"
    if stopped:
        text += f" {SEQUENTIAL_MARK}"
    if errored:
        text += f" {FAILED_MARK} {errored} failed"
    return text


def score_cell(row) -> str:
    """One cell of a score table: the mean, its interval (or why none), n and the marks."""
    get = row.get if hasattr(row, "get") else lambda k, d=None: getattr(row, k, d)  # a Series, a dict or a namedtuple
    if get("source") == "reported":
        return pct(get("mean"))
    n, planned = int(get("n", 0) or 0), int(get("planned", 0) or 0)
    errored, pending = int(get("errored", 0) or 0), int(get("pending", 0) or 0)
    stopped = int(get("stopped", 0) or 0) if pd.notna(get("stopped", 0)) else 0
    note = get("note", "") or ""
    if note:
        return f"{DASH} ({note.split(':')[0]})"
    sequential = stopped or get("method", "") == SEQUENTIAL  # a prefix, or a length a sequential rule decided at N
    counts = counts_text(n, max(planned, n), errored, pending, int(sequential))
    return f"{with_ci(get('mean'), get('lo'), get('hi'), method=get('method', ''))} {counts}"


def marks_legend(frames: Iterable[pd.DataFrame]) -> tuple[str, ...]:
    """The legend lines for the marks that the given frames actually carry (nothing is explained that is not shown)."""
    frames = [f for f in frames if f is not None and not f.empty]
    pending = any(int(f["pending"].sum()) for f in frames if "pending" in f)
    failed = any(int(f["errored"].sum()) for f in frames if "errored" in f)
    too_small = any((f["method"] == TOO_SMALL).any() for f in frames if "method" in f)
    stopped = any(int(f["stopped"].fillna(0).sum()) for f in frames if "stopped" in f) or any(
        (f["method"] == SEQUENTIAL).any() for f in frames if "method" in f)
    notes = []
    if stopped:
        notes.append(f"{SEQUENTIAL_MARK} sequential (ctxbench score --until): scored round by round until the verdict "
                     "was known; n=scored/planned is then a prefix of the suite's samples, not a full-N number. A "
                     "length's average shows its anytime-valid interval (a confidence sequence, valid at a "
                     "data-dependent stop). Rerun the same command without --until to extend it to N.")
    if pending:
        notes.append(f"{INCOMPLETE_MARK} incomplete: fewer samples scored than planned (n=done/planned); "
                     "the run was interrupted or is still running: rerun the same `ctxbench score` command.")
    if failed:
        notes.append(f"{FAILED_MARK} failed samples are not in the score; rerun the same `ctxbench score` command "
                     "to retry them.")
    if too_small:
        notes.append(f"{TOO_SMALL}: continuous scores need at least 10 samples per cell for a bootstrap interval.")
    if pending or failed:
        notes.append("Effective, Avg and wAvg are withheld for a model with an incomplete or failed cell: they would "
                     "come from fewer samples than planned.")
    return tuple(notes)


def ordinal(rank: object) -> str:
    if rank is None or pd.isna(rank):
        return ""
    rank = int(rank)
    suffix = "th" if 10 <= rank % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(rank % 10, "th")
    return f"{rank}{suffix}"


def effective_text(
    length: object, *, shortest: int, longest: int, passes_all: bool = False, known: bool = True, withheld: str = ""
) -> str:
    """RULER-style: ``<4K`` when even the shortest length fails, ``≥128K`` when all pass; ``— (why)`` when withheld."""
    if withheld:
        return f"{DASH} ({withheld})"
    if not known:
        return DASH
    if not shortest:
        return f"{DASH} (withheld)"
    if length is None or pd.isna(length):
        return f"<{format_length(shortest)}"
    if passes_all and int(length) == longest:
        return f"≥{format_length(longest)}"
    return format_length(length)


def summary_frame(
    avgs: pd.DataFrame, eff: pd.DataFrame, wavg: pd.DataFrame, meta: pd.DataFrame
) -> pd.DataFrame:
    """One row per model with everything the main table shows, sorted as RULER (wAvg dec)."""
    out = eff.merge(wavg, on="model", how="outer").merge(meta, left_on="model", right_index=True, how="left")
    finite = avgs[pd.notna(avgs["mean"])]
    sets = finite.groupby("model").agg(task_set=("task_set", "first"), n_tasks=("n_tasks", "first"),
                                       task_set_key=("task_set_key", "first"),
                                       too_small=("method", lambda m: bool((m == TOO_SMALL).any())))
    out = out.merge(sets, left_on="model", right_index=True, how="left")
    out["task_set"] = out["task_set"].fillna("withheld")
    out["task_set_key"] = out["task_set_key"].fillna("")
    out["withheld"] = out["withheld"].fillna("") if "withheld" in out else ""
    out["too_small"] = out["too_small"].fillna(False).astype(bool)
    out["_unranked"] = out["rank_dec"].isna()
    out = out.sort_values(["_unranked", "rank_dec", "avg", "model"], ascending=[True, True, False, True],
                          na_position="last")
    return out.drop(columns="_unranked").reset_index(drop=True)


def _ranked(value: object, rank: object, withheld: str = "") -> str:
    if withheld and withheld != NO_THRESHOLD:
        return f"{DASH} ({withheld})"
    return f"{pct(value)} ({ordinal(rank)})" if ordinal(rank) else pct(value)


def tasks_text(r) -> str:
    """The Tasks column: how many tasks a model's averages cover ('reported' for a paper's own averages)."""
    if r.task_set == "reported":
        return "reported"
    if r.task_set == "withheld":
        return "withheld"
    return str(int(r.n_tasks)) if r.task_set == "all" else r.task_set


def curve_tasks(r) -> str:
    """A model's legend entry in the plots: how many tasks its curve averages."""
    if r.task_set in ("reported", "withheld") or pd.isna(r.n_tasks):
        return str(r.task_set)
    return f"{int(r.n_tasks)} task{'s' if int(r.n_tasks) != 1 else ''}"


def main_tables(avgs: pd.DataFrame, summary: pd.DataFrame) -> tuple[Table, ...]:
    """The main table, and apart from it the models scored on other tasks (their averages are not comparable)."""
    main, apart = comparison_groups(summary)
    tables = [main_table(avgs, summary[summary["model"].isin(main)])]
    if apart:
        caption = ("Scored on other tasks: not comparable with the table above, whose averages cover "
                   f"{_shared_text(summary, main)}")
        tables.append(main_table(avgs, summary[summary["model"].isin(apart)], caption=caption))
    return tuple(tables)


def _shared_text(summary: pd.DataFrame, main: set[str]) -> str:
    measured = summary[summary["model"].isin(main) & (summary["task_set"] != "reported")]
    keys = sorted({str(k) for k in measured["task_set_key"] if k})
    return f"the same {len(keys[0].split(','))} tasks" if len(keys) == 1 else "other tasks"


def main_table(avgs: pd.DataFrame, summary: pd.DataFrame, *, caption: str = "") -> Table:
    lengths = sorted(int(x) for x in avgs["length"].unique())
    cells = avgs.set_index(["model", "length"])
    relative = "relative_effective_length" in summary.columns  # board build --relative-effective X
    aucs = auc_columns(summary)  # AUC@L beside effective length (leaderboard/auc.py)
    starts = auc_start_text(summary)
    headers = ("Model", "Claimed", "Effective", "Effective (CI lower)", *(("Effective (relative)",) if relative else ()),
               *(auc_header(c) for c in aucs), *(format_length(x) for x in lengths), "Avg", "wAvg (inc)", "wAvg (dec)",
               "Tasks")
    rows = []
    for r in summary.itertuples(index=False):
        reported = r.source == "reported"
        scores = [score_cell(cells.loc[(r.model, length)]) if (r.model, length) in cells.index else DASH
                  for length in lengths]
        withheld = str(r.withheld or "")
        prefix = _prefix_mark(avgs, r.model)  # an average over a sequential run's prefixes is marked as they are
        lower = effective_text(r.effective_length_lower, shortest=r.shortest, longest=r.longest,
                               passes_all=r.passes_all, known=r.lower_known, withheld=withheld)
        if not r.lower_known and not reported and r.too_small and not withheld:
            lower = f"{DASH} ({TOO_SMALL})"
        rows.append((
            f"{r.model} {REPORTED_MARK}" if reported else r.model,
            format_length(r.claimed_length),
            effective_text(r.effective_length, shortest=r.shortest, longest=r.longest, passes_all=r.passes_all,
                           withheld=withheld),
            lower,
            *((_relative_text(r),) if relative else ()),
            *(auc_text(r, c) + (starts[r.model] if pd.notna(getattr(r, c)) else "") for c in aucs),
            *scores,
            _ranked(r.avg, r.rank_avg, withheld) + prefix,
            _ranked(r.wavg_inc, r.rank_inc, withheld) + prefix,
            _ranked(r.wavg_dec, r.rank_dec, withheld) + prefix,
            tasks_text(r),
        ))
    return Table(headers=headers, rows=tuple(rows), caption=caption)


def auc_text(r, stem: str) -> str:
    """An AUC@L cell: `88.5 [86.1, 90.7]`, or `— (needs scores up to 1M)`, or the value and why it has no interval."""
    value, note = getattr(r, stem), getattr(r, f"{stem}_note")
    note = str(note) if isinstance(note, str) else ""
    if value is None or pd.isna(value):
        return f"{DASH} ({note})" if note else DASH
    text = with_ci(value, getattr(r, f"{stem}_lo"), getattr(r, f"{stem}_hi"))
    return f"{text} ({note.split(':')[0]})" if note and note != "reported" else text


def _prefix_mark(avgs: pd.DataFrame, model: str) -> str:
    if "stopped" not in avgs:
        return ""
    return f" {SEQUENTIAL_MARK}" if int(avgs.loc[avgs["model"] == model, "stopped"].fillna(0).sum()) else ""


def _relative_text(r) -> str:
    if reason := str(r.relative_withheld or "") if pd.notna(r.relative_withheld) else "":
        return f"{DASH} ({reason})"
    return effective_text(r.relative_effective_length, shortest=r.shortest, longest=r.longest,
                          passes_all=pd.notna(r.relative_effective_length) and int(r.relative_effective_length) == r.longest)


def rank_note(summary: pd.DataFrame) -> str:
    ranked = int(summary["ranked"].sum()) if "ranked" in summary else 0
    if ranked:
        return (f"Ranks (1st = best) compare the {ranked} models scored on the same tasks at the same lengths; "
                "other models are not ranked.")
    return "No ranks: fewer than two models were scored on the same tasks at the same lengths."


def category_display(cats: pd.DataFrame) -> Table:
    lengths = [c for c in cats.columns if c != "avg"]
    headers = ("Model", "Category", *(format_length(x) for x in lengths), "Avg")
    rows = tuple(
        (model, category, *(pct(cats.loc[(model, category), x]) for x in lengths), pct(cats.loc[(model, category), "avg"]))
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
            row.append(score_cell(cells.loc[key]) if key in cells.index else DASH)
        rows.append(tuple(row))
    return Table(headers=("Model", "Task", *(format_length(x) for x in lengths)), rows=tuple(rows))


def p_text(p: object) -> str:
    return DASH if p is None or pd.isna(p) else f"{float(p):.3g}"


def comparison_display(comp: PairedComparison) -> Table:
    rows = [(r.task, format_length(r.length), str(r.n), str(r.n_discordant), pct(r.diff, signed=True), p_text(r.p),
             p_text(r.p_holm)) for r in comp.cells.itertuples(index=False)]
    rows += [(f"all tasks (mean of {r.n_tasks})", format_length(r.length), str(r.n), str(r.n_discordant),
              pct(r.diff, signed=True), p_text(r.p), p_text(r.p_holm)) for r in comp.by_length.itertuples(index=False)]
    rows.append(("overall", "all", str(comp.n_pairs), str(comp.n_discordant), pct(comp.overall, signed=True),
                 p_text(comp.p_value), ""))
    return Table(headers=("Task", "Length", "Pairs", "Discordant", "Difference", "p", "p (Holm)"), rows=tuple(rows),
                 caption=f"{comp.model_a} − {comp.model_b}")


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
    return Table(headers=EXAMPLE_FIELDS, rows=tuple(rows), pre=frozenset({"prediction", "reference"}))


def reasoning_display(cells: pd.DataFrame | None) -> Table | None:
    """Thinking runs' cost per cell: mean reasoning tokens per sample and the samples whose reasoning never closed
    (thinking_unfinished: each counts 0 in its cell's score). None when no run stored reasoning."""
    if cells is None or "reasoning_tokens" not in cells or not cells["reasoning_tokens"].notna().any():
        return None
    shown = cells[cells["reasoning_tokens"].notna()].sort_values(["model", "task", "length"])
    rows = tuple((str(r.model), str(r.task), format_length(int(r.length)), f"{float(r.reasoning_tokens):.0f}",
                  str(int(r.unfinished)), f"{int(r.done)}") for r in shown.itertuples())
    return Table(headers=("Model", "Task", "Length", "Mean reasoning tokens", "thinking_unfinished", "Scored"), rows=rows)


def over_budget_notes(cells: pd.DataFrame | None) -> tuple[str, ...]:
    """One line naming the models whose server ignored max_new_tokens (rows with `over_budget`): their answers were
    cut at the budget before scoring, and their generated-token costs are the budget's, not what the server sent."""
    if cells is None or "over_budget" not in cells or not cells["over_budget"].fillna(0).any():
        return ()
    per_model = cells.groupby("model")["over_budget"].sum()
    named = ", ".join(f"{model} ({int(n)} answer{'s' if n != 1 else ''})" for model, n in per_model.items() if n)
    return (f"Server ignored the answer budget: {named}. Those answers were longer than max_new_tokens and were cut "
            "at the budget before scoring (row key over_budget).",)
