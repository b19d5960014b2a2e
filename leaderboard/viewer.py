"""The board's sample viewer: every (model, task, length) cell one click from its samples.

``samples.html`` is static and self-contained (no server; it works from file://). Its script and the board's index of
cells are two small files under ``samples/``; each cell's rows are one more file there (``samples/c<k>.js``), loaded
only when a filter needs that cell, by <script> injection (fetch() of file:// is blocked), so a board of 39,000
samples opens as fast as one of 40. Every text a run stored (prompts, answers, reasoning, model names) is untrusted:
it is written as JSON with ``<``, ``>`` and ``&`` escaped and shown by the page through textContent only.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd

from ctxbench.harness.core.io import atomic_write

from . import viewer_page
from .frame import format_length
from .viewer_prompts import FOLD_CHARS, KEEP_FULL, SHORTEST, DetailKey, first_repeats, marks_of, prompt_view, store_prompts

FOLDER = "samples"
PAGE = "samples.html"
LOAD_LIMIT = 5_000  # samples the page loads at once; a wider filter asks for a narrower one (page weight)
DETAIL_FIELDS = ("prompt", "reasoning", "prompt_tokens", "generated_tokens", "reasoning_tokens", "metric")
_TABLE = re.compile(r"<table>.*?</table>", re.S)  # the board's own markup: every text in it is escaped (render.py)
_HEAD = re.compile(r"<thead><tr>(.*?)</tr></thead>", re.S)
_ROW = re.compile(r"<tr>(.*?)</tr>", re.S)
_JS_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}



@dataclass(frozen=True)
class ViewerCell:
    """One cell's samples file and what its link shows."""

    model: str
    task: str
    length: int
    file: str
    n: int
    mean: float

    @property
    def prompts(self) -> str:
        """The cell's prompt views, one per sample in the cell file's order (``p<k>.js`` beside ``c<k>.js``)."""
        return "p" + self.file[1:]

    def href(self) -> str:
        return view_href(model=self.model, task=self.task, length=self.length)


def view_href(**view: Any) -> str:
    """samples.html opened on a view (model, task, length, ...), as the page reads its address's fragment."""
    return f"{PAGE}#" + "&".join(f"{k}={quote(str(v), safe='')}" for k, v in view.items())


def js_literal(value: Any) -> str:
    """JSON that stays inert inside any HTML or script context: no ``</script>``, no comment or entity opener."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return "".join(_JS_ESCAPES.get(ch, ch) for ch in text)


def sample_details(stores: Iterable[Any], *, prompts: bool = True) -> dict[DetailKey, dict[str, Any]]:
    """Per stored sample (its first repeat), what the score frame leaves out: reasoning, token counts, metric, and
    its prompt view (the stored prompt where a run kept one, else regenerated and checked by hash: viewer_prompts).
    ``stores`` are the board's RunStores (store_frame.select_runs)."""
    out: dict[DetailKey, dict[str, Any]] = {}
    for store in stores:
        views = store_prompts(store) if prompts else {}
        for key, row in first_repeats(store):
            detail = {f: row[f] for f in DETAIL_FIELDS if row.get(f) not in (None, "")}
            stored = detail.pop("prompt", None)
            view = prompt_view(str(stored), marks_of(row), source="stored") if stored else views.get(key)
            out[key] = {**detail, **({"prompt_view": view} if view else {})}
    return out


def metric_lines(names: Iterable[str]) -> dict[str, str]:
    """One line per metric: what counts as right (the first line of its registered docstring)."""
    from ctxbench.harness.core import registry

    known = registry.entries("metric")
    lines = {}
    for name in sorted({str(n) for n in names if n}):
        doc = (known[name].__doc__ or "").strip() if name in known else ""
        lines[name] = doc.splitlines()[0] if doc else "a task-specific score (see the task's page)"
    return lines


def _number(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _row(r: Mapping[str, Any], detail: Mapping[str, Any]) -> dict[str, Any]:
    """One sample as the page reads it (a frame built by hand may lack the store's columns)."""
    depth, index, answers = _number(r.get("depth")), int(r.get("index") or 0), r.get("answers")
    return {
        "id": f"{r['task']}@{int(r['length'])}#{index}", "model": str(r["model"]), "run_id": str(r.get("run_id") or ""),
        "task": str(r["task"]), "length": int(r["length"]), "index": index,
        "depth": None if depth is None else round(depth, 4), "score": round(float(r["score"]), 6),
        "answer": r["prediction"] if isinstance(r.get("prediction"), str) else "",
        "gold": [str(a) for a in answers] if isinstance(answers, (list, tuple)) else [],
        "prompt_hash": str(r.get("prompt_hash") or ""), **detail,
    }


def write_viewer(out: Path, df: pd.DataFrame, details: Mapping[DetailKey, Mapping[str, Any]] | None = None, *,
                 title: str = "ctxbench samples") -> list[ViewerCell]:
    """Write samples.html, its script, the index and one file per cell into ``out``; the cells, for the board's links.
    Imported (reported) rows have no samples and get no cell."""
    details = details or {}
    measured = df[(df["source"] == "measured") & df["score"].notna()] if len(df) else df
    cells, metrics = [], set()
    folder = out / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    for k, ((model, task, length), rows) in enumerate(measured.groupby(["model", "task", "length"], sort=True)):
        records = [_row(r, details.get((str(r.get("run_id")), str(task), int(length), int(r.get("index") or 0)), {}))
                   for r in rows.sort_values("index" if "index" in rows else "score").to_dict(orient="records")]
        metrics |= {rec.get("metric") for rec in records}
        cell = ViewerCell(str(model), str(task), int(length), f"c{k}.js", len(records), float(rows["score"].mean()))
        prompts = [rec.pop("prompt_view", None) for rec in records]  # apart: loaded only when a card shows them
        atomic_write(folder / cell.file, f"ctxbenchCell({js_literal(cell.file)},{js_literal(records)});\n")
        atomic_write(folder / cell.prompts, f"ctxbenchPrompts({js_literal(cell.prompts)},{js_literal(prompts)});\n")
        cells.append(cell)
    depths = sorted({round(float(d), 4) for d in measured["depth"].dropna()}) if "depth" in measured else []
    index = {"folder": FOLDER, "fold": FOLD_CHARS, "keep": KEEP_FULL, "shortest": SHORTEST, "limit": LOAD_LIMIT, "models": sorted({c.model for c in cells}),
             "tasks": sorted({c.task for c in cells}), "lengths": sorted({c.length for c in cells}),
             "depths": depths, "metrics": metric_lines(metrics),
             "cells": [{"model": c.model, "task": c.task, "length": c.length, "file": c.file, "prompts": c.prompts,
                        "n": c.n} for c in cells]}
    atomic_write(folder / "index.js", f"window.ctxbenchIndex={js_literal(index)};\n")
    atomic_write(folder / "viewer.js", viewer_page.SCRIPT)
    atomic_write(out / PAGE, viewer_page.PAGE.format(csp=viewer_page.CSP, title=html.escape(title), css=viewer_page.CSS,
                                                     fold=FOLD_CHARS, folder=FOLDER))
    return cells


def samples_section(cells: list[ViewerCell]) -> str:
    """The board's "Samples" section: per model and task a row, per length a link to that cell's samples."""
    if not cells:
        return ""
    lengths = sorted({c.length for c in cells})
    by_key = {(c.model, c.task, c.length): c for c in cells}
    head = "".join(f"<th>{html.escape(str(x))}</th>" for x in lengths)
    rows = []
    for model, task in sorted({(c.model, c.task) for c in cells}):
        tds = []
        for length in lengths:
            c = by_key.get((model, task, length))
            tds.append("<td>–</td>" if c is None else
                       f'<td><a class="cell" href="{html.escape(c.href())}">{c.mean * 100:.1f} (n={c.n})</a></td>')
        rows.append(f"<tr><td>{html.escape(model)}</td><td>{html.escape(task)}</td>{''.join(tds)}</tr>")
    return ("<section id=\"samples\"><h2>Samples</h2><p class=\"note\">Each cell (mean score, n samples) opens its "
            f'samples: prompt, answer, reasoning, score and tokens, with filters and a diff of two models; '
            f'<a href="{PAGE}">all samples</a>.</p><table><thead><tr><th>Model</th><th>Task</th>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></section>")


def with_samples_section(page: str, section: str) -> str:
    """index.html with the Samples section after its first section (the main results), or before </body>."""
    if not section:
        return page
    at = page.find("</section>")
    at = at + len("</section>") if at >= 0 else page.rfind("</body>")
    return page[:at] + "\n" + section + "\n" + page[at:]


def link_tables(page: str, cells: list[ViewerCell]) -> str:
    """Each score of the board's tables whose rows are models (or models and tasks) and whose columns are lengths
    becomes a link to those samples: a main-table score opens the model's samples at that length, a per-task score
    that cell's."""
    tasks, keys = {(c.model, c.task) for c in cells}, {k for c in cells for k in ((c.model, c.task, c.length), (c.model, c.length))}
    models, labels = {m for m, _ in tasks}, {format_length(c.length): c.length for c in cells}

    def table(match: re.Match) -> str:
        text = match.group(0)
        head = _HEAD.search(text)
        headers = [html.unescape(h) for h in re.findall(r"<th>(.*?)</th>", head.group(1), re.S)] if head else []
        columns = {i: labels[h] for i, h in enumerate(headers) if h in labels}
        if not columns or headers[0] != "Model":
            return text
        by_task = headers[1] == "Task"

        def row(m: re.Match) -> str:
            tds = re.findall(r"<td>(.*?)</td>", m.group(1), re.S)
            model, task = html.unescape(tds[0]) if tds else "", html.unescape(tds[1]) if by_task and tds else ""
            if len(tds) != len(headers) or model not in models or (by_task and (model, task) not in tasks):
                return m.group(0)
            view = lambda i: {"model": model, **({"task": task} if by_task else {}), "length": columns[i]}  # noqa: E731
            return "<tr>" + "".join(f'<td><a class="samples" href="{html.escape(view_href(**view(i)))}">{td}</a></td>'
                                    if i in columns and (*view(i).values(),) in keys else f"<td>{td}</td>" for i, td in enumerate(tds)) + "</tr>"

        return text[:head.end()] + _ROW.sub(row, text[head.end():])

    return _TABLE.sub(table, page)


def board_page(out: Path, page: str, df: pd.DataFrame, details: Mapping[DetailKey, Mapping[str, Any]], title: str) -> str:
    """Write the viewer into the board folder ``out``; index.html's text with its scores linked to their samples and
    a Samples section of every cell."""
    cells = write_viewer(out, df, details, title=f"{title}: samples")
    return with_samples_section(link_tables(page, cells), samples_section(cells))
