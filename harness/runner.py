"""The one run loop: for each task × length, stream samples in bounded chunks, ask the backend, score, append.

Memory does not grow with the suite: samples are generated (or read from their cache) one chunk at a time,
sent, scored and appended before the next chunk is read; only the set of finished sample ids is kept.
Batches never mix lengths (a chunk is one task at one length), and within a chunk prompts are sorted so
that prompts sharing a prefix (depth grids, shared haystacks) are adjacent for prefix caches.

Tasks driven by another harness (lm-eval) are "external": they produce their own rows through the same store,
record and resume logic. Every check of the plan (harness/planning.py) runs before the store opens and before
the weights load; a finished rerun loads no weights. Every planned sample ends with a row: a prediction, or a
recorded error that a rerun of the same command retries. Each invocation is a session of the record, with its
execution settings and, when it ends (finished, failed or interrupted), its end time.

A task declares the backend capability it is scored with (`task.needs`); the run refuses a backend without it
before any work. Perplexity tasks need "prompt_logprobs": their samples carry token ids, sent as windows to
`backend.token_logprobs`, and their rows hold the summed negative log-likelihood, the token count and the
loss per position bucket instead of a prediction and a 0..1 score (score is None: boards skip them).

The record of a checkpoint ctxbench trained carries its training provenance (run id, config and data hashes,
trainer, base model), read from the ctxbench_manifest.json beside its weights.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import platform
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from ctxbench.harness.core import datasets
from ctxbench.harness.core.config import Suite
from ctxbench.harness.core.identity import backend_execution_args
from ctxbench.harness.core.metrics import is_empty
from ctxbench.harness.core.progress import progress
from ctxbench.harness.core.provenance import plugins_used, versions
from ctxbench.harness.core.reasoning import UNFINISHED, opened_in_prompt
from ctxbench.harness.core.redact import redact_all
from ctxbench.harness.core.rows import Row
from ctxbench.harness.core.signals import Interrupted
from ctxbench.harness.core.store import RunStore, error_reason
from ctxbench.harness.core.types import (
    Generation,
    Prediction,
    Request,
    RunRecord,
    Sample,
    TokenLogprobs,
    repeat_id,
)
from ctxbench.harness.plan_size import chunk_size
from ctxbench.harness.planning import (  # noqa: F401 - Cell, plan_cells, model_fingerprint: re-exported
    Cell,
    Prepared,
    RunPlan,
    check_lengths,
    model_fingerprint,
    open_model,
    plan_cells,
    prepare,
)


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


def chunks(items: Iterable[Sample], size: int) -> Iterator[list[Sample]]:
    buf: list[Sample] = []
    for item in items:
        buf.append(item)
        if len(buf) >= size:
            yield buf
            buf = []
    if buf:
        yield buf


def request(s: Sample, gen: Generation = Generation(), template_kwargs: dict[str, Any] | None = None,
            repeat: int = 0) -> Request:
    return Request(repeat_id(s.id, repeat), s.prompt, s.max_new_tokens, s.add_special_tokens, s.prompt_tokens, s.user_text, s.answer_prefix,
                   thinking=gen.on, max_thinking_tokens=gen.thinking_budget, system_prompt=gen.system_prompt,
                   sampling=gen.gen_kwargs, repeat=repeat, turns=s.turns, template_kwargs=tuple(sorted((template_kwargs or {}).items())))


def build_backend(plan: RunPlan, truncation: str) -> Any:
    """The plan's backend with its weights loaded (the plan step's view, built)."""
    return open_model(plan, truncation).build()


MANIFEST = "ctxbench_manifest.json"  # written beside the weights by ctxbench's trainers
PROVENANCE = ("run_id", "trainer", "label", "config_hash", "data_hash", "base_model", "base_model_gguf", "steps", "seed",
              "created", "data_summary")


def training_provenance(model: str) -> dict[str, Any]:
    """What trained this checkpoint, if ctxbench did: the manifest's identifying fields; {} for any other model."""
    path = Path(model) / MANIFEST
    if not path.is_file():
        return {}
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"error": f"unreadable {MANIFEST}"}
    return {k: manifest.get(k) for k in PROVENANCE if k in manifest}


def run(plan: RunPlan, *, fresh: bool = False, console: Console | None = None, backend: Any = None,
        judge_budget: Any = None) -> RunOutcome:
    """Score the plan's suite into the store; rerunning resumes. `backend` overrides building one (tests, notebooks).

    Three steps: prepare (every check, nothing written, no weights), build the backend's weights (unless the run is
    already complete: then the store alone answers), score."""
    console = console or Console(stderr=True)
    ready = prepare(plan, fresh=fresh, backend=backend, judge_budget=judge_budget)
    if ready.judge.calls:  # the cost of a paid judge, said before the run (refused over --judge-budget by prepare)
        console.print(ready.judge.line(), highlight=False, style="dim")
    plan = ready.plan  # its thinking mode resolved
    if ready.complete:
        console.print(f"{ready.store.dir.name}: all {ready.planned} samples are scored already; the table is from the store",
                      highlight=False, style="dim")
        return RunOutcome(ready.store, planned=ready.planned, done=ready.planned)
    if plan.until is not None and _sequential_done(ready, console):
        return RunOutcome(ready.store, planned=ready.planned, done=len(ready.done))
    backend = ready.model.build() if backend is None else backend
    check_lengths(ready.cells, backend, plan.suite.truncation,  # a built backend may state a shorter context
                  thinking=plan.generation.thinking_budget)
    store, cells = ready.store, ready.cells
    with store.writer():
        if fresh:
            store.reset()
            if plan.shard[1] == 1:
                for path in [*store.dir.glob("lmeval_results.json"), *store.dir.glob("adaptive.json")]:
                    path.unlink()  # lm-eval's results and a sequential run's verdicts go with the rows
        record, session = _record(ready, backend)
        store.begin(record, session)
        console.print(ready.estimate.line(), highlight=False, style="dim")  # after the refusals: those stay one line
        done = store.done_ids()
        outcome = RunOutcome(store, planned=ready.planned)
        outcome.done = sum(1 for c in cells for j in c.ids() if j in done)
        ended = "failed"
        try:
            if plan.until is not None:  # sequential: round by round until each length's verdict is settled
                from ctxbench.harness.adaptive_run import score_rounds

                cells = score_rounds(cells, done, backend, ready, store, outcome, console)
            _score_cells(cells, done, backend, ready, store, outcome, console)
            if plan.shard[0] == 0:  # external tasks (lm-eval) run whole, in the first shard only
                _run_external(ready.external, plan.suite, backend, ready.renderer, store, console)
            ended = "finished" if not outcome.failed else "failed"
        except KeyboardInterrupt:
            ended = "interrupted"
            outcome.interrupted = True
            raise RunInterrupted(outcome) from None
        finally:
            store.end_session(session, ended=_now(), outcome=ended)
    return outcome


def _sequential_done(ready: Prepared, console: Console) -> bool:
    """A sequential run whose every length has stopped under its rule needs no weights (checked before they load);
    what a sequential run cannot guarantee is refused first (harness/adaptive_checks.py)."""
    from ctxbench.harness.adaptive_checks import check_sequential
    from ctxbench.harness.adaptive_run import lengths_of

    lengths, rest = lengths_of(ready.cells, ready.store, ready.plan.until)
    check_sequential(ready, lengths)  # clusters, a changed --alpha, --vs's pairs: refused before anything is written
    if rest or not all(x.final for x in lengths):
        return False
    console.print(f"{ready.store.dir.name}: every length has stopped under --until {ready.plan.until.kind}; the table "
                  "is from the store (rerun without --until to extend it to N)", highlight=False, style="dim")
    return True


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _record(ready: Prepared, backend: Any) -> tuple[RunRecord, dict[str, Any]]:
    """The run's record (identity from the plan step) and this invocation's session entry (its execution settings)."""
    plan, cells, now = ready.plan, ready.cells, _now()
    secrets = plan.secrets()
    command = redact_all(sys.argv, secrets)  # no URL password or token reaches the record
    planned: dict[str, dict[str, int]] = {}
    for c in cells:
        planned.setdefault(c.task.name, {})[str(c.length)] = c.planned
    info = backend.info()
    ident = ready.identity
    record = RunRecord(
        run_id=ready.store.dir.name, created=now, suite=plan.suite.name, suite_config=ident["suite_config"], model=plan.model,
        backend=ident["backend"], backend_args=redact_all({**plan.backend_args, **info}, secrets),
        tokenizer=str(getattr(backend.tokenizer, "name_or_path", "")), tokenizer_fingerprint=ident["tokenizer_fingerprint"],
        template=ident["template"], seed=ident["seed"], truncation=ident["truncation"], versions=versions(), command=command,
        label=plan.label or plan.model, model_fingerprint=ident["model_fingerprint"],
        plan=planned, external=[t.name for t in ready.external], training=training_provenance(plan.model),
        losses=sorted({c.task.name for c in cells if c.task.needs == "prompt_logprobs"}),
        identity_args=ident["identity_args"], generation=ident["generation"], plugins=_plugins(plan, cells))
    i, n = plan.shard
    session = {"started": now, "shard": f"{i}/{n}", "command": command, "versions": record.versions,
               "host": platform.node(), "pid": os.getpid(), "execution": execution(plan, info, secrets),
               **({"plugins": record.plugins} if record.plugins else {})}
    return record, session


def _plugins(plan: RunPlan, cells) -> list[dict[str, str]]:
    """The plugins whose entries this run uses: its suite, tasks, their metrics and the backend."""
    used = [("suite", plan.suite.name), ("backend", plan.backend), *(("task", t.task) for t in plan.suite.tasks),
            *(("metric", c.task.metric) for c in cells)]
    return plugins_used(used)


def execution(plan: RunPlan, info: dict[str, Any], secrets: list[str]) -> dict[str, Any]:
    """This session's speed settings: the execution arguments given and the backend's resolved ones; a note where
    batch composition can change greedy outputs (bf16/fp16 on a GPU in batches, or a batching engine)."""
    speed = backend_execution_args(plan.backend)  # as the backend's Args declare them (core/identity.py)
    settings = {**plan.execution_args(),  # as given, then as the backend resolved them (batch_size 0 -> 16)
                **(plan.until.settings() if plan.until is not None else {}),  # a sequential run's rule (--until)
                **{k: v for k, v in info.items() if k in speed or k in ("batching", "dtype")}}
    batch = int(settings.get("batch_size") or 1)
    on_gpu = str(info.get("device", "")).startswith("cuda") and str(info.get("dtype", "")) in ("bfloat16", "float16")
    if (on_gpu and batch > 1) or plan.backend == "vllm":
        settings["batch_dependent"] = (f"greedy outputs can depend on which prompts share a batch here "
                                       f"({info.get('dtype', 'reduced precision')} on a GPU, batches of up to {batch}); "
                                       "a sample scored in another batch or session may differ")
    return redact_all(settings, secrets)


def _score_cells(cells, done, backend, ready: Prepared, store, outcome: RunOutcome, console) -> None:
    """Score every cell. The bar's total is prompt tokens (a 128K sample is far more work than a 4K one, so the
    ETA is right across lengths); it advances after every batch (one sample on CPU) and shows samples done."""
    ctx, suite, gen, name = ready.ctx, ready.plan.suite, ready.plan.generation, ready.plan.label or ready.plan.model
    template_kwargs = ready.renderer.template_kwargs
    batch_size = max(1, int(getattr(backend, "batch_size", 1)))
    if not cells:
        return
    work = sum(len(c.indices) * c.length for c in cells)
    finished = sum(c.length for c in cells for j in c.indices if not _missing(c, j, done))
    with progress(console, count="{task.fields[samples]}") as bar:
        job = bar.add_task(f"scoring {name}", total=work, completed=finished, samples=_count(outcome))
        for cell in cells:
            todo = [j for j in cell.indices if _missing(cell, j, done)]
            if not todo:
                continue
            bar.update(job, description=f"scoring {name} · {cell.task.name} @ {cell.length}")
            samples = datasets.iter_samples(cell.task, length=cell.length, indices=todo, seed=suite.seed, ctx=ctx)
            for chunk in chunks(samples, chunk_size(cell.length, batch_size)):
                chunk.sort(key=lambda s: s.prompt)  # shared prefixes adjacent (prefix caches); one length per chunk
                for start in range(0, len(chunk), batch_size):
                    batch = chunk[start: start + batch_size]
                    if cell.task.needs == "prompt_logprobs":
                        rows = _logprob_rows(cell.task, batch, backend)
                    else:
                        asks = [(s, r) for s in batch for r in range(cell.repeats) if repeat_id(s.id, r) not in done]
                        preds = backend.generate([request(s, gen, template_kwargs, r) for s, r in asks])
                        rows = [_row(cell.task, s, p, gen, ctx.tokenizer, r) for (s, r), p in zip(asks, preds)]
                    store.append(rows)
                    for r in rows:
                        if r.error:
                            outcome.errors[error_reason(r.error)] += 1
                        else:
                            outcome.done += 1
                            outcome.unfinished += r.extra.get("failure") == UNFINISHED
                    bar.update(job, advance=cell.length * len(batch), samples=_count(outcome))


def _missing(cell: Cell, index: int, done) -> bool:
    """Whether some repeat of the cell's sample `index` has no row yet."""
    sid = f"{cell.task.name}@{cell.length}#{index}"
    return any(repeat_id(sid, r) not in done for r in range(cell.repeats))


def _count(outcome: RunOutcome) -> str:
    failed = f", {outcome.failed} failed" if outcome.failed else ""
    return f"{outcome.done}/{outcome.planned} samples{failed}"


def _run_external(tasks: list[Any], suite: Suite, backend, renderer, store: RunStore, console: Console) -> None:
    """Tasks driven by another harness (lm-eval) produce their own rows; skipped once stored."""
    for task in tasks:
        if task.is_complete(store.dir):
            continue
        rows = task.run_external(backend=backend, renderer=renderer, limit=None, seed=suite.seed, console=console)
        store.append(rows)
        task.write_aggregates(store.dir)


def _logprob_rows(task, batch: list[Sample], backend) -> list[Row]:
    """Perplexity rows: every window of the batch's samples in one call, then each sample's sums and buckets."""
    windows = [task.logprob_requests(s) for s in batch]
    results = iter(backend.token_logprobs([w for ws in windows for w in ws]))
    rows = []
    for s, ws in zip(batch, windows):
        got: list[TokenLogprobs] = [next(results) for _ in ws]
        error = next((r.error for r in got if r.error), None)
        scored = {} if error else dict(task.score_logprobs(s, got))
        rows.append(Row(id=s.id, task=s.task, category=task.category, length=s.length, index=s.index,
                        prompt_hash=s.prompt_hash, prompt_tokens=s.prompt_tokens, seconds=round(sum(r.seconds for r in got), 4),
                        metric=s.metric, score=scored.pop("score", None), error=error, cluster=s.meta.get("cluster"),
                        meta={k: v for k, v in s.meta.items() if k not in ("token_ids", "cluster")},
                        extra={"windows": len(ws), **scored}))
    return rows




def _thinking(task, s: Sample, p: Prediction, tokenizer: Any) -> tuple[str, bool, dict[str, Any]]:
    """Thinking mode: (the answer, whether the reasoning closed, the row's reasoning fields). The reasoning is
    stripped before scoring, as the task splits it (Task.split_thinking), and stored beside the answer with its
    token count: the backend's own count, else every generated token for a block that never closed, else the
    model's tokenizer on the reasoning as written (delimiters included). A block that never closed is a failed
    sample (`failure: thinking_unfinished`): it counts 0 in its cell's denominator, its text is never scored, and a
    rerun does not retry it."""
    split = task.split_thinking(p.text, s, api_reasoning=p.reasoning, opened=opened_in_prompt(s.prompt))
    tokens = p.reasoning_tokens
    if not split.reasoning:
        tokens = 0
    elif tokens is None and not split.finished and split.form != "api":
        tokens = p.generated_tokens
    elif tokens is None:
        tokens = len(tokenizer(split.reasoning, add_special_tokens=False)["input_ids"])
    fields = {"reasoning": split.reasoning, "reasoning_tokens": int(tokens), "reasoning_format": split.form,
              "answer_tokens": max(p.generated_tokens - int(tokens), 0)}
    return split.answer, split.finished, fields if split.finished else {**fields, "failure": UNFINISHED}


def _row(task, s: Sample, p: Prediction, gen: Generation = Generation(), tokenizer: Any = None,
         repeat: int = 0) -> Row:
    """A sample's row; in thinking mode the reasoning is split off first (_thinking) and only the answer is scored."""
    answer, finished, thinking = _thinking(task, s, p, tokenizer) if gen.on and not p.error else (p.text, True, {})
    score, judged, failed = (None, {}, None) if p.error else _score(task, answer, s) if finished else (0.0, {}, None)
    return Row(
        id=repeat_id(s.id, repeat), task=s.task, category=task.category, length=s.length, index=s.index,
        depths=s.depths, prompt_hash=s.prompt_hash, prompt_tokens=p.prompt_tokens or s.prompt_tokens,
        max_new_tokens=s.max_new_tokens, prediction=answer, generated_tokens=p.generated_tokens,
        seconds=round(p.seconds, 4), metric=s.metric, score=score, empty=is_empty(answer), answers=s.answers,
        truncated_tokens=p.truncated_tokens, error=p.error or failed, depth=s.meta.get("depth"),
        position=s.meta.get("position"),
        cluster=s.meta.get("cluster"),  # samples sharing a haystack or document (None: independent); stats.py
        meta={k: v for k, v in s.meta.items() if k not in ("depth", "position", "user_text", "cluster")},
        extra={
            "timing": p.timing,
            "prefill_seconds": None if p.prefill_seconds is None else round(p.prefill_seconds, 4),
            "decode_seconds": None if p.decode_seconds is None else round(p.decode_seconds, 4),
            **thinking,  # reasoning, reasoning_tokens, reasoning_format, answer_tokens, failure (docs/thinking.md)
            **({"repeat": repeat} if gen.repeats > 1 else {}),  # which generation of the sample (--repeats)
            **({"over_budget": p.over_budget} if p.over_budget else {}),  # a server ignored max_tokens: cut to it
            **judged,  # an LLM judge's model, version and verdict (tasks/judge.py)
        })


def _score(task, answer: str, s: Sample) -> tuple[float | None, dict[str, Any], str | None]:
    """(score, extra row fields, error): a task that scores through a paid judge (score_row) may fail, and then the
    sample is an error row that a rerun retries, never a 0."""
    return task.score_row(answer, s)
