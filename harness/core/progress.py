"""One look for every long-running bar (scoring, generation, packing, training): count, elapsed, ETA.

The ETA is the work left at this session's average rate. Rich's own estimate uses the last 30 s only, so a run
whose samples each take longer than that (any Gemma sample on a CPU) showed `-:--:--` from start to end. The
description gives way first on a narrow terminal, so the count and both times always show whole.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, Task, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Column
from rich.text import Text

SESSION_START = "session_start"  # a task field: how much was done before this session (a resumed run)


def remaining_seconds(done: float, left: float, elapsed: float | None) -> float | None:
    """Seconds to do `left` at the average rate of `done` units in `elapsed` seconds; None before the first unit."""
    if not elapsed or done <= 0:
        return None
    return max(left, 0) * elapsed / done


def clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}"


class AverageTimeRemaining(TimeRemainingColumn):
    """Time left from this session's average rate (rich's: from a 30 s window, blank whenever a unit takes longer)."""

    def render(self, task: Task) -> Text:
        if task.finished or task.total is None:
            return super().render(task)
        eta = remaining_seconds(task.completed - task.fields.get(SESSION_START, 0), task.total - task.completed, task.elapsed)
        return super().render(task) if eta is None else Text(clock(eta), style="progress.remaining")


class SessionProgress(Progress):
    """A Progress whose tasks remember what was done before this session, for AverageTimeRemaining."""

    def add_task(self, description: str, start: bool = True, total: float | None = 100.0, completed: float = 0,
                 visible: bool = True, **fields: Any):
        fields.setdefault(SESSION_START, completed)
        return super().add_task(description, start, total, completed, visible, **fields)


def progress(console: Console | None = None, *, unit: str | None = None, count: str | None = None, **kwargs: Any) -> Progress:
    """A rich Progress; `unit` (e.g. "tok") shows a running total instead of done/total; `count` is a format string
    for that column instead (e.g. "{task.fields[samples]}", when the bar's total measures work, not items)."""
    whole = Column(no_wrap=True)
    count = (TextColumn(count, table_column=whole) if count else
             TextColumn(f"{{task.completed:,.0f}} {unit}", table_column=whole) if unit else MofNCompleteColumn(table_column=whole))
    kwargs.setdefault("expand", True)  # the description column takes (and on a narrow terminal gives up) the rest
    return SessionProgress(TextColumn("{task.description}", table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis")),
                           BarColumn(bar_width=24), count, TimeElapsedColumn(table_column=Column(no_wrap=True, min_width=7)),
                           AverageTimeRemaining(table_column=Column(no_wrap=True, min_width=7)),
                           console=console or Console(stderr=True), **kwargs)
