"""The full-N schedule: every planned sample of every cell, cell by cell, in bounded chunks.

Memory does not grow with the suite: samples are generated (or read from their cache) one chunk at a time and
scored before the next chunk is read. A chunk is one task at one length (batches never mix lengths), sorted by
prompt so that prompts sharing a prefix (depth grids, shared haystacks) are adjacent, each declaring the prefix it
shares with the one before it (harness/run/prefix.py) for the backends' prefix reuse. A backend that decodes a
batch together from prompts prefilled alone (hf on CPU, `batches_across_cells`) gets chunks of one length across
the suite's generating cells instead: a step for 8 rows costs about what a step for 1 does there, and a cell often
holds fewer samples than a batch. The bar's total is prompt tokens (a 128K sample is far more work than a 4K one,
so the ETA is right across lengths).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
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
        self.across_cells = bool(getattr(backend, "batches_across_cells", False)) and self.batch_size > 1
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
        """One turn per chunk of a cell's missing samples (or, across cells, of one length's generating cells); the
        chunk's samples built as the turn is reached."""
        for group in self._cell_groups():
            samples = chain.from_iterable(self._samples(cell) for cell in group)
            length, names = group[0].length, ", ".join(c.task.name for c in group)
            for chunk in chunks(samples, chunk_size(length, self.batch_size)):
                chunk = share_prefixes(chunk)  # shared contexts back to back, each declared; one length per chunk
                yield Turn(f"scoring {self.name} · {names} @ {length}", self._batches(group, chunk))

    def _cell_groups(self) -> list[list[Any]]:
        """The cells whose samples share chunks: each cell alone, or across cells the generating cells of one length
        (in the order of their first cell); perplexity cells stay alone."""
        groups: list[list[Any]] = []
        by_length: dict[int, list[Any]] = {}
        for cell in self.cells:
            if not any(missing(cell, j, self.done) for j in cell.indices):
                continue
            if not self.across_cells or cell.task.needs == "prompt_logprobs":
                groups.append([cell])
            elif cell.length in by_length:
                by_length[cell.length].append(cell)
            else:
                groups.append(by_length.setdefault(cell.length, [cell]))
        return groups

    def _samples(self, cell: Any) -> Iterator[Any]:
        todo = [j for j in cell.indices if missing(cell, j, self.done)]
        suite = self.ready.plan.suite
        return datasets.iter_samples(cell.task, length=cell.length, indices=todo, seed=suite.seed, ctx=self.ready.ctx)

    def _batches(self, group: list[Any], chunk: list[Any]) -> Iterator[Batch]:
        cells = {cell.task.name: cell for cell in group}
        logprobs = group[0].task.needs == "prompt_logprobs"
        for start in range(0, len(chunk), self.batch_size):
            batch = chunk[start: start + self.batch_size]
            if logprobs:
                asks = [(group[0].task, s, 0) for s in batch]
            else:
                asks = [(cells[s.task].task, s, r) for s in batch for r in range(cells[s.task].repeats)
                        if repeat_id(s.id, r) not in self.done]
            yield Batch(asks, work=group[0].length * len(batch), logprobs=logprobs)
