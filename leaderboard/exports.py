"""What a board says about where its numbers come from, and the CSV files it writes beside the report.

- The provenance header: suites, samples per cell, seeds, dates, the ctxbench version and commit of every run and
  of the board itself, run ids and model fingerprints.
- `results.csv`: one row per (model, task, length) cell and one `avg` row per (model, length), each with n,
  planned, errored and a status; importable again with `ctxbench board import` (extra columns are ignored). The
  `avg` rows end with `auc_from` (the shortest length, where the model's AUCs start) and each AUC@L: `auc_128k`,
  `auc_128k_lo`, `auc_128k_hi` (percent) and `auc_128k_note` (why it is missing or has no interval).
- RULER's `summary.csv`, one per model and length, at `summary/<model>/<length>/summary.csv`: RULER's
  scripts/eval/evaluate.py writes one per prediction directory (`<model>/<benchmark>/<length>/pred/`), as a
  pandas frame of three rows (Tasks, Score, Nulls) under a numeric header; we keep those rows and that header
  exactly (Score in percent rounded to 2, Nulls "empty/scored") and add two rows after them: Samples
  ("scored/planned") and Failed (errored samples).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import pandas as pd

from ctxbench.harness.core.io import atomic_dir, atomic_write, slug
from ctxbench.harness.core.provenance import git_commit, version

from .auc import auc_columns, auc_value_columns
from .frame import AVG_TASK
from .render import Section, Table

CSV_COLUMNS = ["model", "task", "length", "score", "lo", "hi", "interval", "n", "planned", "errored", "pending",
               "status", "n_tasks", "n_tasks_all", "task_set", "source", "claimed_length", "effective_length",
               "effective_length_lower", "withheld", "avg", "wavg_inc", "wavg_dec", "rank_avg", "rank_inc", "rank_dec"]


def _weights_summary(formats: list[str]) -> str:
    """The runs' weight formats for the header; on a mixed board, how many runs each applies to (a GGUF run beside
    plain checkpoints must not read as the whole board's format)."""
    known = sorted(set(formats) - {""})
    if not known:
        return "?"
    return ", ".join(f"{k} ({formats.count(k)} of {len(formats)} runs)" if len(set(formats)) > 1 else k for k in known)


def provenance_section(runs: pd.DataFrame | None, *, built: str | None = None) -> tuple[tuple[str, ...], Section | None]:
    """(header lines, a table of the runs) saying where every number came from."""
    built = built or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    commit = git_commit()
    board = f"Built {built} with ctxbench {version('ctxbench') or '?'}" + (f" (commit {commit})" if commit else "") + "."
    if runs is None or runs.empty:
        return (board,), None
    def listed(col: str) -> str:
        return ", ".join(sorted({_text(v) for v in runs[col]} - {""})) or "?"
    dates = sorted(d for d in list(runs["created"]) + list(runs["last_session"]) if d)
    weights = _weights_summary([_text(v) for v in runs["weights"]]) if "weights" in runs else "?"
    lines = (
        f"Suites: {listed('suite')}; samples per cell: {listed('samples_per_cell')}; seeds: {listed('seed')}; "
        f"runs from {dates[0][:10] if dates else '?'} to {dates[-1][:10] if dates else '?'}"
        + (f"; weights: {weights}." if weights != "?" else "."),
        board,
    )
    rows = tuple(
        (r.run_id, r.model, r.fingerprint, _text(getattr(r, "weights", "")) or "–",
         _text(getattr(r, "precision", "")) or "–", r.suite, _text(r.seed),
         str(r.samples_per_cell), f"{r.done}/{r.planned}", str(r.errored), f"{r.created[:19]} → {r.last_session[:19]}",
         f"{r.ctxbench} {r.commit}".strip())
        for r in runs.sort_values(["model", "run_id"]).itertuples()
    )
    table = Table(headers=("Run", "Model", "Weights fingerprint", "Weights", "Precision", "Suite", "Seed", "Samples/cell",
                           "Scored/planned", "Failed", "Dates (UTC, first start → last end)", "ctxbench"), rows=rows)
    return lines, Section(title="Provenance", tables=(table,), collapsed=True)


def _text(value: object) -> str:
    """A provenance value as printed: whole numbers without '.0' (a seed read through a float column), blanks empty."""
    if value is None or (isinstance(value, float) and value != value) or str(value) in ("None", "nan", "<NA>"):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def training_section(runs: pd.DataFrame | None) -> Section | None:
    """What trained each checkpoint ctxbench trained (from the run records): trainer, run, base, steps, answer tokens
    and the synthetic data's drop rate, so a Δ is read beside what produced it. None when no run was trained here."""
    if runs is None or runs.empty or "training" not in runs:
        return None
    rows, seen = [], set()
    for r in runs.sort_values(["model", "run_id"]).itertuples():
        t = r.training if isinstance(r.training, dict) else {}
        if not t.get("trainer") or (r.model, t.get("run_id")) in seen:
            continue
        seen.add((r.model, t.get("run_id")))
        d = t.get("data_summary") or {}
        answer = d.get("answer_tokens")
        if d.get("requested"):
            drops = (f"{d['requested'] - d['kept']} of {d['requested']} {d.get('unit', 'item')}s "
                     f"({100 * (d['requested'] - d['kept']) / d['requested']:.0f}%)")
            reasons = ", ".join(f"{k} {v}" for k, v in sorted((d.get("drops") or {}).items()))
            drops += f": {reasons}" if reasons else ""
        else:
            drops = "–"
        rows.append((r.model, str(t.get("trainer")), str(t.get("run_id")), str(t.get("base_model") or "?"),
                     str(t.get("steps") if t.get("steps") is not None else "?"), str(t.get("data_hash") or "?"),
                     f"{answer:,}" if isinstance(answer, int) else "–", drops))
    if not rows:
        return None
    table = Table(headers=("Model", "Trainer", "Training run", "Base model", "Steps", "Data hash", "Answer tokens",
                           "Generator drops"), rows=tuple(rows))
    return Section(title="Training", tables=(table,),
                   paragraphs=("Checkpoints ctxbench trained, as their manifests record them. Answer tokens: the labelled "
                         "tokens of the training data (hqa_sft: assistant turns; logo: chosen replies). Generator "
                         "drops: synthetic items the generator failed to produce, by reason.",))


def results_csv(tasks: pd.DataFrame | None, avgs: pd.DataFrame | None, summary: pd.DataFrame | None,
                short: pd.DataFrame | None) -> str:
    """Per-cell and per-length rows in percent (see the module docstring)."""
    parts = []
    if tasks is not None and not tasks.empty:
        parts.append(_percent(tasks.assign(interval=tasks["method"])))
    if avgs is not None and not avgs.empty:
        per_model = summary.drop(columns=[c for c in summary.columns if c in avgs.columns and c != "model"])
        rows = avgs.merge(per_model, on="model", how="left")
        rows = rows.assign(task=AVG_TASK, interval=rows["method"])
        for col in ("avg", "wavg_inc", "wavg_dec", *auc_value_columns(summary)):
            rows[col] = rows[col] * 100
        parts.append(_percent(rows))
    if short is not None and not short.empty:
        parts.append(short)
    if not parts:
        return ",".join(CSV_COLUMNS) + "\n"
    out = pd.concat(parts, ignore_index=True)
    aucs = [] if summary is None else auc_columns(summary)
    columns = CSV_COLUMNS + (["auc_from"] if aucs else []) + [f"{c}{s}" for c in aucs for s in ("", "_lo", "_hi", "_note")]
    for col in columns:
        if col not in out:
            out[col] = pd.NA
    out = out[columns]
    for col in out.columns:
        if not pd.api.types.is_numeric_dtype(out[col]):
            out[col] = out[col].map(spreadsheet_safe)
    for col in ("n", "planned", "errored", "pending", "n_tasks", "n_tasks_all", "claimed_length", "effective_length",
                "effective_length_lower", "rank_avg", "rank_inc", "rank_dec", *(["auc_from"] if aucs else [])):
        out[col] = pd.to_numeric(out[col], errors="coerce").round().astype("Int64")
    return out.to_csv(index=False, float_format="%.4f", lineterminator="\n")


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: object) -> object:
    """A text cell a spreadsheet would run as a formula (=, +, -, @, tab, CR first) gets a leading apostrophe, as
    OWASP's CSV-injection advice has it; numbers, and text that is a number (-3.5), stay as they are."""
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):
        return value
    try:
        float(value)
    except ValueError:
        return "'" + value
    return value


def _percent(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.rename(columns={"mean": "score"}).copy()
    for col in ("score", "lo", "hi"):
        out[col] = out[col] * 100
    return out


def write_ruler_summaries(out_dir: Path, df: pd.DataFrame, tasks: pd.DataFrame) -> list[Path]:
    """RULER's summary.csv per (model, length): Tasks / Score / Nulls, then Samples and Failed (see the docstring).

    summary/ is built whole beside the old one and swapped in, so a model no longer on the board leaves no folder."""
    with atomic_dir(out_dir / "summary") as tmp:
        written = _ruler_summaries(tmp, df, tasks)
    return [out_dir / "summary" / p.relative_to(tmp) for p in written]


def _ruler_summaries(root: Path, df: pd.DataFrame, tasks: pd.DataFrame) -> list[Path]:
    written = []
    measured = tasks[tasks["source"] == "measured"]
    folders = _folders(sorted(measured["model"].unique()))
    for (model, length), cells in measured.groupby(["model", "length"], sort=True):
        cells = cells.sort_values("task")
        scored = df[(df["model"] == model) & (df["length"] == length)]
        empty = scored.groupby("task")["empty"].sum() if "empty" in scored else pd.Series(dtype=int)
        names = list(cells["task"])
        score = [round(float(m) * 100, 2) if pd.notna(m) else "" for m in cells["mean"]]
        nulls = [f"{int(empty.get(t, 0))}/{int(n)}" for t, n in zip(names, cells["n"])]
        samples = [f"{int(n)}/{int(p)}" for n, p in zip(cells["n"], cells["planned"])]
        failed = [str(int(e)) for e in cells["errored"]]
        frame = pd.DataFrame([["Tasks", *names], ["Score", *score], ["Nulls", *nulls], ["Samples", *samples],
                              ["Failed", *failed]])
        path = root / folders[model] / str(int(length)) / "summary.csv"
        atomic_write(path, frame.to_csv(index=False, lineterminator="\n"))
        written.append(path)
    return written


def _folders(models: list[str]) -> dict[str, str]:
    """A safe, distinct folder name per model (slugs that collide get a short hash of the name)."""
    slugs = {m: slug(m, max_len=80) for m in models}
    taken = [v for v in slugs.values()]
    return {m: s if taken.count(s) == 1 else f"{s}-{hashlib.sha1(m.encode()).hexdigest()[:6]}" for m, s in slugs.items()}
