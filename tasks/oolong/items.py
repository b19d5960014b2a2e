"""Oolong's official rows, grouped into their context windows.

Each official row is one question on one context window (25 per window in the synth split); rows of a window
repeat the window's text. Only the small columns and one copy of each window's text are kept (parquet: read a row
group at a time when a window's text is asked for), so the multi-gigabyte synth files are never held whole.
Windows are in the official script's order: sorted by context_window_id, a window's questions in file order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxbench.harness.core.errors import ConfigError

NEEDED = ("id", "context_window_id", "question", "answer")
SMALL = ("id", "context_window_id", "question", "answer", "answer_type", "task", "task_group", "dataset", "context_len",
         "input_subset", "num_labels", "question_type")
TEXTS = ("context_window_text", "context_window_text_with_labels")
CHARS_PER_TOKEN = 4  # parquet rows: the official context_len (tokens) stands in for the text's length before it is read


@dataclass(frozen=True)
class Window:
    """One context window: its official id, its rows (indices into OolongItems.rows) and its size in characters."""

    window_id: int
    rows: tuple[int, ...]
    chars: int


@dataclass
class OolongItems:
    rows: list[dict[str, Any]]
    windows: list[Window]
    texts: dict[tuple[int, str], str]  # (window id, column) -> text, for .jsonl copies
    where: dict[int, tuple[Path, int, int]]  # window id -> (parquet file, row group, offset) of its first row
    _group: tuple[Path, int, str] | None = None
    _texts: list[str] = field(default_factory=list)

    def text(self, window: Window, column: str) -> str:
        if (window.window_id, column) in self.texts:
            return self.texts[(window.window_id, column)]
        if window.window_id not in self.where:
            raise ConfigError(f"data_path: window {window.window_id} has no {column} column; give the official files")
        path, group, offset = self.where[window.window_id]
        if self._group != (path, group, column):
            import pyarrow.parquet as pq

            self._texts = pq.ParquetFile(path).read_row_group(group, columns=[column]).column(column).to_pylist()
            self._group = (path, group, column)
        return self._texts[offset]


def _check(ok: bool, path: Path, what: str) -> None:
    if not ok:
        raise ConfigError(f"data_path: {path} is not in Oolong's format ({what}); give the official files")


def _parquet(path: Path, rows: list, where: dict, chars: dict) -> None:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    names = set(pf.schema_arrow.names)
    _check(set(NEEDED) <= names and bool(names & set(TEXTS)), path, f"it needs the columns {', '.join(NEEDED)} and a text")
    for group in range(pf.num_row_groups):
        part = pf.read_row_group(group, columns=[c for c in SMALL if c in names]).to_pylist()
        for offset, row in enumerate(part):
            wid = int(row["context_window_id"])
            if wid not in where:
                where[wid] = (path, group, offset)
                chars[wid] = int(row.get("context_len") or 0) * CHARS_PER_TOKEN
            rows.append(row)


def _jsonl(path: Path, rows: list, texts: dict, chars: dict) -> None:
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ConfigError(f"data_path: {path}:{number} is not a JSON object ({e.msg}); give the official files") from None
            _check(isinstance(row, dict) and set(NEEDED) <= set(row) and bool(set(row) & set(TEXTS)), path,
                   f"line {number} needs the fields {', '.join(NEEDED)} and context_window_text")
            wid = int(row["context_window_id"])
            for column in TEXTS:
                if column in row and (wid, column) not in texts:
                    texts[(wid, column)] = row[column]
            chars.setdefault(wid, len(row.get(TEXTS[0]) or row.get(TEXTS[1]) or ""))
            rows.append({k: row[k] for k in SMALL if k in row})


def read_items(files: list[Path]) -> OolongItems:
    """Every row of the files (parquet or .jsonl), grouped into windows in the official order."""
    rows: list[dict[str, Any]] = []
    texts: dict[tuple[int, str], str] = {}
    where: dict[int, tuple[Path, int, int]] = {}
    chars: dict[int, int] = {}
    for path in files:
        if path.suffix == ".parquet":
            _parquet(path, rows, where, chars)
        else:
            _jsonl(path, rows, texts, chars)
    members: dict[int, list[int]] = {}
    for i, row in enumerate(rows):
        members.setdefault(int(row["context_window_id"]), []).append(i)
    windows = [Window(wid, tuple(members[wid]), chars[wid]) for wid in sorted(members)]
    return OolongItems(rows, windows, texts, where)
