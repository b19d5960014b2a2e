"""The one scoring loop: a schedule says what to score next and whether it is done; the loop generates, builds the
rows, appends them to the store and counts them, whichever the schedule (full N: full.py; --until: sequential.py;
tasks another harness drives, lm-eval: external.py).

A schedule hands out turns (a progress line and its batches, each one backend call); after every batch it is told
what was scored (`saw`), and after every turn it may say how the bar stands (`turn_done`). The store is appended
before the schedule sees the rows, so an interruption never loses a scored batch.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any, Protocol

from ctxbench.harness.core.progress import progress
from ctxbench.harness.core.reasoning import UNFINISHED
from ctxbench.harness.core.rows import Row
from ctxbench.harness.core.signals import Interrupted
from ctxbench.harness.core.store import RunStore, error_reason
from ctxbench.harness.core.types import Sample
from ctxbench.harness.run.batch import generated_rows, logprob_rows


@dataclass
class RunOutcome:
    """What a run did: planned samples (this shard), how many are done, and errors by reason."""

    store: RunStore
    planned: int
    done: int = 0
    errors: collections.Counter = field(default_factory=collections.Counter)
    interrupted: bool = False
    unfinished: int = 0  # samples whose reasoning never closed (thinking_unfinished): scored 0, never retried

    @property
    def failed(self) -> int:
        return sum(self.errors.values())


class RunInterrupted(Interrupted):
    """Ctrl-C or SIGTERM during a run; carries where it stopped."""

    def __init__(self, outcome: RunOutcome):
        super().__init__(f"interrupted at {outcome.done}/{outcome.planned}")
        self.outcome = outcome


@dataclass(frozen=True)
class Batch:
    """One backend call: (task, sample, repeat) asks, or (logprobs) a perplexity task's samples, or (external) one
    task another harness scores whole (lm-eval: its rows, unknown in number until then, join the planned count);
    `work`: how far it moves the bar."""

    asks: list[tuple[Any, Sample | None, int]]
    work: int = 0
    logprobs: bool = False
    external: bool = False


@dataclass(frozen=True)
class Turn:
    """What a schedule scores next: the bar's line and its batches (built lazily: samples are generated as reached)."""

    description: str
    batches: Any  # Iterable[Batch]


class Schedule(Protocol):
    """Which samples a run scores, in what order, and when it stops."""

    title: str
    needs_score: bool  # a row without a score counts as failed (a sequential verdict needs every score)

    def bar(self) -> dict[str, int]: ...  # the bar's total and completed work before the first turn

    def next(self) -> Turn | None: ...  # what to score next; None once it is done

    def saw(self, rows: list[Row]) -> None: ...  # the rows of a batch, stored

    def turn_done(self) -> dict[str, int]: ...  # after a turn: the bar's update ({} for none)

    def count(self, outcome: RunOutcome) -> str: ...  # the bar's count of samples


def score_batch(batch: Batch, backend: Any, ready: Any, console: Any = None) -> list[Row]:
    """The rows of one batch: generated and scored, (perplexity) log-prob rows, or (external) the rows another
    harness produced for its task."""
    if batch.external:
        task = batch.asks[0][0]
        rows = task.run_external(backend=backend, renderer=ready.renderer, limit=None, seed=ready.plan.suite.seed,
                                 console=console)
        return [Row.from_json(r) if not isinstance(r, Row) else r for r in rows]
    if batch.logprobs:
        return logprob_rows(batch.asks[0][0], [s for _, s, _ in batch.asks], backend)
    gen = ready.plan.generation
    return generated_rows(batch.asks, backend, gen, ready.renderer.template_kwargs, ready.ctx.tokenizer,
                          spend=getattr(ready.cost, "spend", None))  # priced, and held to the run's ceiling


def tally(outcome: RunOutcome, rows: list[Row], needs_score: bool) -> None:
    """Count a batch's rows: done, or failed by reason (a missing score fails only where the schedule needs one)."""
    for r in rows:
        if r.error or (needs_score and r.score is None):
            outcome.errors[error_reason(r.error or "no score")] += 1
        else:
            outcome.done += 1
            outcome.unfinished += r.extra.get("failure") == UNFINISHED


def drive(schedule: Schedule, backend: Any, ready: Any, store: RunStore, outcome: RunOutcome, console: Any) -> None:
    """Score what the schedule asks for until it is done: generate -> row -> append -> count, one way."""
    with progress(console, count="{task.fields[samples]}") as bar:
        job = bar.add_task(schedule.title, **schedule.bar(), samples=schedule.count(outcome))
        while (turn := schedule.next()) is not None:
            bar.update(job, description=turn.description)
            for batch in turn.batches:
                rows = score_batch(batch, backend, ready, console)
                store.append(rows)
                outcome.planned += len(rows) if batch.external else 0
                tally(outcome, rows, schedule.needs_score)
                schedule.saw(rows)
                bar.update(job, advance=batch.work, samples=schedule.count(outcome))
            bar.update(job, **schedule.turn_done(), samples=schedule.count(outcome))
