"""The external schedule: tasks another harness drives (lm-eval), scored by the one loop like every other schedule.

An external task is scored whole, in one backend session of its harness: its turn is one batch, and the loop hands
that batch to the task (`run_external`), appends the rows it returns and counts them as it counts generated rows.
After the rows are stored the schedule writes the harness's own aggregates beside them (`saw`), so a task whose
aggregates are on disk is complete and a rerun skips it (`is_complete`). External tasks run in the first shard only.
"""

from __future__ import annotations

from typing import Any

from ctxbench.harness.core.rows import Row
from ctxbench.harness.run.loop import Batch, RunOutcome, Turn


class ExternalSchedule:
    """Every external task not yet complete in the store, one turn each; done when the last one's aggregates are
    written."""

    needs_score = False  # a perplexity-like lm-eval metric has no 0..1 score per row: its rows are not failures

    def __init__(self, tasks: list[Any], run_dir: Any):
        self.tasks, self.run_dir = list(tasks), run_dir
        self.title = "lm-eval"
        self._todo = [t for t in self.tasks if not t.is_complete(run_dir)]
        self._current: Any = None
        self.rows_seen = 0

    @property
    def done(self) -> bool:
        """Whether every external task's rows and aggregates are stored."""
        return not self._todo and self._current is None

    def bar(self) -> dict[str, int]:
        return {"total": len(self.tasks), "completed": len(self.tasks) - len(self._todo)}

    def next(self) -> Turn | None:
        """The next task not yet complete, as one batch the task scores itself; None once every task is stored."""
        if not self._todo:
            return None
        self._current = task = self._todo.pop(0)
        return Turn(f"lm-eval · {task.name}", [Batch([(task, None, 0)], work=1, external=True)])

    def saw(self, rows: list[Row]) -> None:
        """The task's rows are stored: its aggregates go beside them, which marks it complete."""
        self.rows_seen += len(rows)
        self._current.write_aggregates(self.run_dir)
        self._current = None

    def turn_done(self) -> dict[str, int]:
        return {}

    def count(self, outcome: RunOutcome) -> str:
        return f"{len(self.tasks) - len(self._todo) - (self._current is not None)}/{len(self.tasks)} tasks"
