"""`ctxbench board build --format json`: the board as one file other tools read, under a versioned schema.

results.json mirrors the report's internals and may change with them; board.json names each field on purpose
(`FIELDS`), and a change that renames or drops one bumps `SCHEMA` (new fields may be added within a version).
Scores are percentages; a missing value is null. docs/publishing.md documents every field (a test checks it).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ctxbench.harness.core.io import atomic_write, jsonable

SCHEMA = "ctxbench-board/1"
BOARD_FILE = "board.json"

# list in board.json -> (list in results.json, {field in board.json: field in results.json})
FIELDS: dict[str, tuple[str, dict[str, str]]] = {
    "models": ("models", {
        "model": "model", "source": "source", "avg": "avg", "wavg_inc": "wavg_inc", "wavg_dec": "wavg_dec",
        "effective_length": "effective_length", "effective_length_lower": "effective_length_lower",
        "withheld": "withheld", "rank_avg": "rank_avg", "task_set": "task_set", "n_tasks": "n_tasks",
        "claimed_length": "claimed_length"}),
    "averages": ("lengths", {
        "model": "model", "length": "length", "score": "mean", "lo": "lo", "hi": "hi", "n": "n",
        "planned": "planned", "errored": "errored", "pending": "pending", "n_tasks": "n_tasks", "status": "status",
        "source": "source"}),
    "cells": ("tasks", {
        "model": "model", "task": "task", "length": "length", "score": "mean", "lo": "lo", "hi": "hi", "n": "n",
        "method": "method", "planned": "planned", "errored": "errored", "pending": "pending", "status": "status",
        "source": "source"}),
    "comparisons": ("comparisons", {
        "model_a": "model_a", "model_b": "model_b", "difference": "overall", "ci95": "ci95", "p_value": "p_value",
        "method": "method", "verdict": "verdict", "n_pairs": "n_pairs", "n_only_a": "n_unmatched_a",
        "n_only_b": "n_unmatched_b"}),
    "claimed": ("claimed", {
        "published_model": "published_model", "model": "model", "task": "task", "length": "length",
        "published": "published", "measured": "measured", "lo": "lo", "hi": "hi", "n": "n",
        "difference": "difference", "verdict": "verdict"}),
    "repeats": ("repeats", {
        "model": "model", "task": "task", "length": "length", "repeats": "repeats", "per_repeat": "per_repeat",
        "spread": "spread"}),
}
TOP_FIELDS = ("schema", "title", "built_with", "scale", "ci", "threshold", "effective_length_rule", *FIELDS)


def _value(value: Any) -> Any:
    """JSON-safe: NaN and the empty string of a missing number become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def board_document(results: dict[str, Any]) -> dict[str, Any]:
    """board.json's content from the report's results (results.json's dict)."""
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "title": results.get("title", ""),
        "built_with": next((h for h in results.get("provenance", {}).get("header", []) if h.startswith("Built ")), ""),
        "scale": "percent",
        "ci": results.get("ci"),
        "threshold": results.get("threshold"),
        "effective_length_rule": results.get("effective_length_rule"),
    }
    for name, (source, fields) in FIELDS.items():
        doc[name] = [{out: _value(row.get(field)) for out, field in fields.items()} for row in results.get(source) or []]
    return jsonable(doc)


def write_board_json(board_dir: Path, out: Path) -> Path:
    """Read the built board's results.json in `board_dir`, write board.json into `out`."""
    results = json.loads((Path(board_dir) / "results.json").read_text(encoding="utf-8"))
    target = Path(out) / BOARD_FILE
    Path(out).mkdir(parents=True, exist_ok=True)
    atomic_write(target, json.dumps(board_document(results), indent=2, allow_nan=False) + "\n")
    return target
