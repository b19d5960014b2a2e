"""The sequential schedule (`ctxbench score --until ...`; the rule and its verdicts: harness/run/until.py), driven by
the one scoring loop (harness/run/loop.py).

Lengths take turns: each turn scores the next rounds of one length (as many as fill one backend batch, one sample of
each task per round, generated lazily for those indices only), then recomputes that length's verdict from its
complete rounds and stops it once settled, at the suite's N, or (--vs) where the earlier run's rows end. A round with
a failed sample stops its length for this session, and a length never stops for good while a failed sample stands
(a rerun retries every failed sample and goes on). Tasks with unequal N at one length bet only on the rounds every
task has (the smallest N): the rest of their samples are then scored at fixed N. adaptive.json is rewritten after
every turn, so an interrupted run says how far each length got.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxbench.harness.core import datasets
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.rows import Row
from ctxbench.harness.core.store import RunStore
from ctxbench.harness.run import until as adaptive
from ctxbench.harness.run.loop import Batch, RunOutcome, Turn
from ctxbench.harness.run.prefix import share_asks


class Stream:
    """A cell's pending samples in index order, generated (or read from their cache) as the rounds reach them: one
    pass over the sample cache per run, not one per round, and no sample built before its round."""

    def __init__(self, cell: Any, seed: int, ctx: Any, done: set[str]):
        todo = [j for j in range(cell.planned) if f"{cell.task.name}@{cell.length}#{j}" not in done]
        self.samples = datasets.iter_samples(cell.task, length=cell.length, indices=todo, seed=seed, ctx=ctx)
        self.held: dict[int, Any] = {}  # read ahead of their round (a cache written out of index order)

    def take(self, indices: list[int]) -> list[Any]:
        out = []
        for j in indices:
            while j not in self.held:
                sample = next(self.samples)
                self.held[sample.index] = sample
            out.append(self.held.pop(j))
        return out


@dataclass
class Length:
    """One length of a sequential run: its tasks (name -> samples at this length), scores so far, and verdict."""

    length: int
    cells: list[Any]
    limit: int  # rounds it may score: the smallest N of its tasks, or (--vs) the earlier run's complete rounds
    scores: dict[tuple[str, int], float] = field(default_factory=dict)  # (task, index) -> score in 0..1
    failed: set[tuple[str, int]] = field(default_factory=set)  # (task, index) whose latest row is an error
    paired: dict[tuple[str, int], float] = field(default_factory=dict)  # --vs: the earlier run's scores
    status: dict[str, Any] = field(default_factory=dict)
    streams: dict[str, Stream] = field(default_factory=dict)  # task -> its samples, read or generated as rounds reach them

    @property
    def tasks(self) -> dict[str, int]:
        return {c.task.name: c.planned for c in self.cells}

    @property
    def n(self) -> int:
        """The rounds the sequence may bet on: a round is one sample of *every* task, so the smallest N. Past it the
        mean of the rounds would no longer be the board's score (the unweighted mean of the task means)."""
        return min(self.tasks.values())

    @property
    def n_max(self) -> int:
        return max(self.tasks.values())

    def tail(self) -> list[Any]:
        """The cells a length that reached its smallest N still scores at fixed N (their samples past it), else []."""
        if self.status.get("stopped") != "reached N" or self.n_max == self.n:
            return []
        return [c for c in self.cells if c.planned > self.n]

    def values(self, rounds: int) -> list[list[float]]:
        """Each round's per-task scores, or (--vs) paired differences in [-1, 1]: the confidence sequence bets on
        the samples themselves (a bare round mean would count as one sample: 28% of RULER's samples, not 18%)."""
        scores = self.scores if not self.paired else {k: v - self.paired[k] for k, v in self.scores.items()
                                                      if k in self.paired}
        return adaptive.round_values(scores, self.tasks, rounds)

    def assess(self, rule: Any) -> dict[str, Any]:
        """The verdict from the complete rounds. A failed sample that stands keeps the length open ("failed
        samples"), even past a settled verdict: the rerun retries it before the length stops for good."""
        from ctxbench.harness.core.stats.sequential import verdict  # numpy on first use

        rounds = adaptive.complete_rounds(self.scores, self.tasks, self.limit)
        v = verdict(rule, self.values(rounds)) if rounds else None
        settled = bool(v and v.settled) and not self.failed
        stopped = ("failed samples" if self.failed else "settled" if settled else "reached N" if rounds >= self.n else
                   "end of the earlier run" if rounds >= self.limit else "running")
        self.status = {"rounds": rounds, "n": self.n, "settled": settled, "stopped": stopped,
                       "decision": v.decision if v else "undecided", "lo": v.lo if v else None, "hi": v.hi if v else None,
                       "tasks": sorted(self.tasks), **({"n_max": self.n_max} if self.n_max > self.n else {})}
        return self.status

    @property
    def final(self) -> bool:
        return self.status.get("stopped") in adaptive.FINAL


def lengths_of(cells: list[Any], store: RunStore, until: adaptive.Until) -> tuple[list[Length], list[Any]]:
    """The sequential lengths (their cells' stored scores read once) and the cells scored in full: losses, and the
    samples past the smallest N of a length that reached it undecided."""
    per: dict[int, list[Any]] = defaultdict(list)
    rest = []
    for c in cells:
        (rest if c.task.needs == "prompt_logprobs" else per[c.length]).append(c)
    latest = store.latest()
    earlier = RunStore(Path(until.vs).parent, Path(until.vs).name).latest() if until.vs else {}
    out = []
    for length, group in sorted(per.items()):
        item = Length(length, group, limit=min(c.planned for c in group))
        item.scores = _scores(latest, group)
        item.failed = _failed(latest, group)
        if until.vs:
            item.paired = _scores(earlier, group)
            item.limit = adaptive.complete_rounds(item.paired, item.tasks, item.n)
        out.append(item)
    rule = until.rule(len(out))
    for item in out:
        item.assess(rule)
        rest += [c for c in item.tail() if _unscored(latest, c)]
    return out, rest


def _unscored(latest: dict[str, dict[str, Any]], cell: Any) -> bool:
    return any((latest.get(f"{cell.task.name}@{cell.length}#{j}") or {}).get("score") is None for j in cell.indices)


def check_pairs(until: adaptive.Until, lengths: list[Length], seed: int) -> None:
    """--vs pairs samples by id (task, length, index): the earlier run must hold the same samples (its seed) and at
    least one complete round at every length, or nothing can be paired; refused before anything is written."""
    earlier = RunStore(Path(until.vs).parent, Path(until.vs).name).read_record()
    name = Path(until.vs).name
    if int(earlier.get("seed") or 0) != seed:
        raise ConfigError(f"--vs: {name} was scored with seed {earlier.get('seed')} and this run with {seed}: their "
                          f"samples differ, so none pair; pass --seed {earlier.get('seed')}")
    empty = [str(x.length) for x in lengths if x.limit == 0]
    if empty:
        raise ConfigError(f"--vs: {name} has no complete round (every task's sample 0) at length {', '.join(empty)}; "
                          "score it there first, or drop those lengths (--lengths)")


def _failed(latest: dict[str, dict[str, Any]], cells: list[Any]) -> set[tuple[str, int]]:
    """The samples of these cells whose latest row failed (an error, or no score): retried before the length stops."""
    names, length = {c.task.name for c in cells}, cells[0].length
    return {(r["task"], int(r["index"])) for r in latest.values() if r.get("task") in names
            and r.get("length") == length and (r.get("error") or r.get("score") is None)}


def _scores(latest: dict[str, dict[str, Any]], cells: list[Any]) -> dict[tuple[str, int], float]:
    names = {c.task.name for c in cells}
    length = cells[0].length
    return {(r["task"], int(r["index"])): adaptive.clip(r["score"]) for r in latest.values()
            if r.get("task") in names and r.get("length") == length and not r.get("error") and r.get("score") is not None}


def _write(store: RunStore, until: adaptive.Until, lengths: list[Length], earlier: dict[str, Any]) -> None:
    cells: dict[str, dict[str, int]] = defaultdict(dict)
    for item in lengths:
        for task, n in item.tasks.items():  # past the smallest N a length that reached it scores at fixed N
            cells[task][str(item.length)] = n if item.tail() else min(item.status["rounds"], n)
    adaptive.write_state(store.dir, until, {x.length: x.status for x in lengths}, dict(cells), earlier)


class SequentialSchedule:
    """Lengths take turns: each turn asks for the next rounds of one length (as many as fill one backend batch), and
    after it the length's verdict is recomputed; a length leaves once final, failed for this session, or at its limit.
    Done when no length is active; the cells it leaves to a full-N schedule are `rest()`."""

    needs_score = True  # a verdict needs every score: a row without one is a failed sample, retried by a rerun

    def __init__(self, cells: list[Any], done: set[str], backend: Any, ready: Any, store: RunStore):
        self.until, self.done, self.ready, self.store = ready.plan.until, done, ready, store
        self.lengths, self._rest = lengths_of(cells, store, self.until)
        self.rule = self.until.rule(len(self.lengths))
        self.earlier = adaptive.read_state(store.dir)
        self.batch_size = max(1, int(getattr(backend, "batch_size", 1)))
        self.name = ready.plan.label or ready.plan.model
        self.title = f"scoring {self.name} until {self.until.kind}"
        self.active = [item for item in self.lengths if not item.final]
        self.item: Length | None = None
        self.asked, self.failed = 0, False
        _write(store, self.until, self.lengths, self.earlier)
        self._turns = self._all_turns()

    def bar(self) -> dict[str, int]:
        return {"total": max(1, sum(x.n for x in self.lengths)),
                "completed": sum(x.status["rounds"] for x in self.lengths)}

    def next(self) -> Turn | None:
        return next(self._turns, None)

    def _all_turns(self):
        while self.active:
            for item in list(self.active):
                start = item.status["rounds"]
                stop = min(start + max(1, self.batch_size // len(item.cells)), item.limit)
                asks = self._asks(item, range(start, stop))
                self.item, self.asked, self.failed = item, len(asks), False
                batches = [Batch(asks[i: i + self.batch_size]) for i in range(0, len(asks), self.batch_size)]
                yield Turn(f"scoring {self.name} @ {item.length} · round {start + 1}", batches)

    def _asks(self, item: Length, rounds: range) -> list[tuple[Any, Any, int]]:
        """The missing samples of `rounds` at one length, and its failed samples (a rerun retries them first),
        sorted by prompt: a round's samples that share a context are back to back, each declaring the prefix it shares
        with the one before it (harness/run/prefix.py)."""
        asks = []
        for cell in item.cells:
            retry = {j for t, j in item.failed if t == cell.task.name}
            todo = sorted({j for j in rounds if j < cell.planned and f"{cell.task.name}@{item.length}#{j}" not in self.done}
                          | retry)
            if todo:
                if cell.task.name not in item.streams:
                    scored = self.done - {f"{cell.task.name}@{item.length}#{j}" for j in retry}
                    item.streams[cell.task.name] = Stream(cell, self.ready.plan.suite.seed, self.ready.ctx, scored)
                asks += [(cell.task, s, 0) for s in item.streams[cell.task.name].take(todo)]
        return share_asks(asks)

    def saw(self, rows: list[Row]) -> None:
        item = self.item
        for row in rows:
            if row.error or row.score is None:
                item.failed.add((row.task, row.index))
                self.failed = True
                continue
            self.done.add(row.id)
            item.failed.discard((row.task, row.index))
            item.scores[(row.task, row.index)] = adaptive.clip(row.score)

    def turn_done(self) -> dict[str, int]:
        """The turn's length reassessed; it leaves on a failure (the rerun retries it), once final, or at its limit."""
        item = self.item
        item.assess(self.rule)
        if item.final or self.failed or not self.asked or item.status["rounds"] >= item.limit:
            self.active.remove(item)
        _write(self.store, self.until, self.lengths, self.earlier)
        return {"completed": sum(x.status["rounds"] if not x.final else x.n for x in self.lengths)}

    def count(self, outcome: RunOutcome) -> str:
        failed = f", {outcome.failed} failed" if outcome.failed else ""
        return f"{outcome.done} samples{failed}"

    def rest(self) -> list[Any]:
        """The cells scored in full after the rounds: losses, and past the smallest N of a length that reached it."""
        return self._rest + [c for x in self.lengths for c in x.tail() if c not in self._rest]
