"""One look for every long-running bar (scoring, generation, packing, training): count, elapsed, ETA."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


def progress(console: Console | None = None, *, unit: str | None = None, count: str | None = None, **kwargs: Any) -> Progress:
    """A rich Progress; `unit` (e.g. "tok") shows a running total instead of done/total; `count` is a format string
    for that column instead (e.g. "{task.fields[samples]}", when the bar's total measures work, not items)."""
    count = TextColumn(count) if count else TextColumn(f"{{task.completed:,.0f}} {unit}") if unit else MofNCompleteColumn()
    return Progress(TextColumn("{task.description}"), BarColumn(), count, TimeElapsedColumn(), TimeRemainingColumn(),
                    console=console or Console(stderr=True), **kwargs)
