"""Import published (paper) scores so they can sit next to measured runs.

Papers publish one percentage per (model, task or average, length) and no
samples, so imported rows carry ``source="reported"`` and never get a CI.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .frame import parse_length

REQUIRED = ("model", "task", "length", "score")
OPTIONAL = ("claimed_length", "category")
_BLANK = {"", "-", "—", "na", "n/a", "nan", "none"}
COLUMNS = [
    "model",
    "run_id",
    "task",
    "category",
    "length",
    "depth",
    "index",
    "score",
    "position",
    "source",
    "claimed_length",
]


def _fail(where: str, message: str) -> ValueError:
    return ValueError(f"{where}: {message}")


def _length(value: str, *, where: str, column: str, short_ok: bool = False) -> int:
    """Tokens; with short_ok, 0 (or 'short') is the short-context axis of lm-eval rows (MMLU and the like)."""
    if short_ok and value.strip().lower() == "short":
        return 0
    try:
        tokens = parse_length(value)
    except ValueError:
        tokens = -1
    if tokens < 0 or (tokens == 0 and not short_ok):
        short = " (0 or 'short' for a short-context task)" if short_ok else ""
        raise _fail(
            where, f"column {column!r} must be an integer (or a size like '4K'){short}, got {value!r}"
        )
    return tokens


def _score(value: str, *, where: str) -> float:
    try:
        score = float(value)
    except ValueError:
        score = math.nan
    if not (math.isfinite(score) and 0 <= score <= 100):
        raise _fail(where, f"column 'score' must be a number in 0..100, got {value!r}")
    return score / 100


def import_reported_csv(path: str | Path) -> pd.DataFrame:
    """Read published scores (0..100) from a CSV and return contract rows on the 0..1 scale.

    Required columns: ``model``, ``task`` (a task name or ``avg`` for the
    per-length average), ``length`` (``4096`` or ``4K``/``128k``/``1M``; ``0`` or ``short`` for a
    short-context task such as MMLU, which the board keeps off the length axis) and
    ``score``; optional ``claimed_length`` and ``category``; other columns are
    ignored, so a report's own ``results.csv`` can be imported back. Errors
    name the file, the data row (1 = first row after the header) and column.
    """
    path = Path(path)
    name = path.name
    if path.is_dir():
        raise _fail(name, "is a directory; give a CSV file")
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        try:
            return _read_reported(reader, name)
        except UnicodeDecodeError as e:
            raise _fail(name, f"not UTF-8 text (byte {e.start}); save the CSV as UTF-8") from None
        except csv.Error as e:
            raise _fail(f"{name} line {reader.line_num}", f"not readable as CSV ({e}); fix that line") from None


def _read_reported(reader: csv.DictReader, name: str) -> pd.DataFrame:
    header = [h.strip() for h in (reader.fieldnames or [])]
    if not header:
        raise _fail(name, f"empty file, expected a header with columns {', '.join(REQUIRED)}")
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise _fail(
            name, f"missing required column {missing[0]!r} (header: {', '.join(header)})"
        )
    reader.fieldnames = header
    records: list[dict[str, object]] = []
    seen: dict[tuple[str, str, int], int] = {}
    for number, raw in enumerate(reader, start=1):
        where = f"{name} row {number}"
        if None in raw:
            raise _fail(where, f"has more fields than the header ({len(header)})")
        cells = {k: (v or "").strip() for k, v in raw.items()}
        if all(not v for v in cells.values()):
            continue
        for column in ("model", "task"):
            if not cells[column]:
                raise _fail(where, f"column {column!r} must not be empty")
        length = _length(cells["length"], where=where, column="length", short_ok=True)
        claimed = cells.get("claimed_length", "")
        claimed_tokens = (
            np.nan
            if claimed.lower() in _BLANK
            else _length(claimed, where=where, column="claimed_length")
        )
        key = (cells["model"], cells["task"], length)
        if key in seen:
            raise _fail(
                where, f"duplicate (model, task, length) {key!r}, first in row {seen[key]}"
            )
        seen[key] = number
        category = cells.get("category", "")
        records.append(
            {
                "model": cells["model"],
                "run_id": f"reported:{name}",
                "task": cells["task"],
                "category": None if category.lower() in _BLANK else category,
                "length": length,
                "depth": np.nan,
                "index": 0,
                "score": _score(cells["score"], where=where),
                "position": np.nan,
                "source": "reported",
                "claimed_length": claimed_tokens,
            }
        )
    if not records:
        raise _fail(name, "no data rows")
    out = pd.DataFrame.from_records(records, columns=COLUMNS)
    out["claimed_length"] = out["claimed_length"].astype(float)
    return out
