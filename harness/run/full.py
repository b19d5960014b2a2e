"""The full-N schedule: every planned sample of every cell, cell by cell, in bounded chunks.

Memory does not grow with the suite: samples are generated (or read from their cache) one chunk at a time and
scored before the next chunk is read. A chunk is one task at one length (batches never mix lengths), sorted by
prompt so that prompts sharing a prefix (depth grids, shared haystacks) are adjacent, each declaring the prefix it
shares with the one before it (harness/run/prefix.py) for the backends' prefix reuse. The bar's
total is prompt tokens (a 128K sample is far more work than a 4K one, so the ETA is right across lengths).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ctxbench.harness.core import datasets
from ctxbench.harness.core.rows import Row
from ctxbench.harness.core.types import repeat_id
from ctxbench.harness.run.batch import chunks
from ctxbench.harness.run.loop import Batch, RunOutcome, Turn
from ctxbench.harness.run.plan_size import chunk_size
from ctxbench.harness.run.prefix import share_prefixes


def missing(cell: Any, index: int, done: set[str]) -> bool:
    """Whether some repeat of the cell's sample `index` has no row yet."""
    sid = f"{cell.task.name}@{cell.length}#{index}"
    return any(repeat_id(sid, r) not in done for r in range(cell.repeats))


class FullSchedule:
    """Every missing sample (and repeat) of the cells; done when the last chunk is scored."""

    needs_score = False

    def __init__(self, cells: list[Any], done: set[str], backend: Any, ready: Any):
        self.cells, self.done, self.ready = cells, done, ready
        self.name = ready.plan.label or ready.plan.model
        self.title = f"scoring {self.name}"
        self.batch_size = max(1, int(getattr(backend, "batch_size", 1)))
        self._turns = self._all_turns()

    def bar(self) -> dict[str, int]:
        work = sum(len(c.indices) * c.length for c in self.cells)
        finished = sum(c.length for c in self.cells for j in c.indices if not missing(c, j, self.done))
        return {"total": work, "completed": finished}

    def next(self) -> Turn | None:
        return next(self._turns, None)

    def saw(self, rows: list[Row]) -> None:
        """A full run asks for each missing sample once: nothing it saw changes what comes next."""

    def turn_done(self) -> dict[str, int]:
        return {}

    def count(self, outcome: RunOutcome) -> str:
        failed = f", {outcome.failed} failed" if outcome.failed else ""
        return f"{outcome.done}/{outcome.planned} samples{failed}"

    def _all_turns(self) -> Iterator[Turn]:
        """One turn per chunk of a cell's missing samples; the chunk's samples built as the turn is reached."""
        suite, ctx = self.ready.plan.suite, self.ready.ctx
        for cell in self.cells:
            todo = [j for j in cell.indices if missing(cell, j, self.done)]
            if not todo:
                continue
            samples = datasets.iter_samples(cell.task, length=cell.length, indices=todo, seed=suite.seed, ctx=ctx)
            for chunk in chunks(samples, chunk_size(cell.length, self.batch_size)):
                chunk = share_prefixes(chunk)  # shared contexts back to back, each declared; one length per chunk
                yield Turn(f"scoring {self.name} · {cell.task.name} @ {cell.length}", self._batches(cell, chunk))

    def _batches(self, cell: Any, chunk: list[Any]) -> Iterator[Batch]:
        logprobs = cell.task.needs == "prompt_logprobs"
        for start in range(0, len(chunk), self.batch_size):
            batch = chunk[start: start + self.batch_size]
            if logprobs:
                asks = [(cell.task, s, 0) for s in batch]
            else:
                asks = [(cell.task, s, r) for s in batch for r in range(cell.repeats)
                        if repeat_id(s.id, r) not in self.done]
            yield Batch(asks, work=cell.length * len(batch), logprobs=logprobs)
