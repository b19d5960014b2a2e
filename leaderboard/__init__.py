"""Leaderboard: aggregate per-sample scores into RULER-style tables and reports.

Submodules are loaded on first attribute access so that ``import leaderboard``
stays cheap (pandas, scipy and matplotlib are only imported when used).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "normalise": "frame",
    "format_length": "frame",
    "parse_length": "frame",
    "task_length_table": "aggregate",
    "length_averages": "aggregate",
    "category_table": "aggregate",
    "depth_length_matrix": "aggregate",
    "position_curve": "aggregate",
    "paired_comparison": "aggregate",
    "PairedComparison": "aggregate",
    "effective_length": "ranking",
    "resolve_threshold": "ranking",
    "weighted_averages": "ranking",
    "import_reported_csv": "reported",
    "build_report": "report",
    "Report": "report",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'leaderboard' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
