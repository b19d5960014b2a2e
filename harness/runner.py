"""The one run loop: for each task × length, stream samples in bounded chunks, ask the backend, score, append.

Memory does not grow with the suite: samples are generated (or read from their cache) one chunk at a time,
sent, scored and appended before the next chunk is read; only the set of finished sample ids is kept.
Batches never mix lengths (a chunk is one task at one length), and within a chunk prompts are sorted so
that prompts sharing a prefix (depth grids, shared haystacks) are adjacent for prefix caches.

Tasks driven by another harness (lm-eval) are "external": they produce their own rows through the same store,
record and resume logic. Over-long lengths are refused before any sample is generated. Every planned sample
ends with a row: a prediction, or a recorded error that a rerun of the same command retries.

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
import hashlib
import json
import platform
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from ctxbench.harness.core import datasets, registry
from ctxbench.harness.core.backend import require
from ctxbench.harness.core.config import Suite, build_task
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError, PromptTooLongError
from ctxbench.harness.core.fitting import resolve_mode
from ctxbench.harness.core.io import slug
from ctxbench.harness.core.metrics import is_empty
from ctxbench.harness.core.models import tokenizer_fingerprint, weights_fingerprint
from ctxbench.harness.core.progress import progress
from ctxbench.harness.core.prompting import PromptRenderer
from ctxbench.harness.core.provenance import versions
from ctxbench.harness.core.redact import redact_all, url_secrets
from ctxbench.harness.core.store import RunStore, error_reason
from ctxbench.harness.core.types import Prediction, Request, RunRecord, Sample, TokenLogprobs

CHUNK_TOKENS = 1 << 23  # prompt tokens in flight per chunk (~32 MB of text): bounds memory, feeds vLLM large batches
MAX_CHUNK = 1024


@dataclass(frozen=True)
class RunPlan:
    suite: Suite
    model: str
    backend: str
    backend_args: dict[str, Any]
    out_dir: Path
    data_dir: Path | None = None
    label: str = ""  # display name on leaderboards (default: the model)
    shard: tuple[int, int] = (0, 1)  # (i, n): this process scores the i-th of n disjoint parts of the suite

    def run_id(self) -> str:
        blob = json.dumps({"suite": self.suite.model_dump(mode="json"), "model": self.model, "backend": self.backend,
                           "args": self.backend_args}, sort_keys=True)
        return f"{slug(self.label or Path(self.model).name or self.model)}-{slug(self.suite.name)}-" \
               f"{hashlib.sha256(blob.encode()).hexdigest()[:8]}"

    def in_shard(self, sample_id: str) -> bool:
        i, n = self.shard
        return n == 1 or int(hashlib.sha1(sample_id.encode()).hexdigest(), 16) % n == i


@dataclass(frozen=True)
class Cell:
    """One task at one length: the unit of generation, batching and progress."""

    task: Any
    length: int
    planned: int  # samples of the whole run (all shards)
    indices: tuple[int, ...]  # this shard's


@dataclass
class RunOutcome:
    """What a run did: planned samples (this shard), how many are done, and errors by reason."""

    store: RunStore
    planned: int
    done: int = 0
    errors: collections.Counter = field(default_factory=collections.Counter)
    interrupted: bool = False

    @property
    def failed(self) -> int:
        return sum(self.errors.values())


class RunInterrupted(Exception):
    """Ctrl-C during a run; carries where it stopped."""

    def __init__(self, outcome: RunOutcome):
        super().__init__(f"interrupted at {outcome.done}/{outcome.planned}")
        self.outcome = outcome


def plan_cells(suite: Suite, ctx: GenContext, keep=lambda sample_id: True) -> tuple[list[Cell], list[Any]]:
    """The suite's (task, length) cells and its external tasks, without generating any sample."""
    cells, external = [], []
    for i, spec in enumerate(suite.tasks):
        task = build_task(spec, where=f"tasks.{i}")
        if getattr(task, "external", False):
            external.append(task)
            continue
        n = task.samples_per_length(ctx)
        n = suite.samples if n is None else n
        for length in spec.lengths or suite.lengths:
            if length == 0:
                raise ConfigError(f"tasks.{i}: {spec.display} needs a length of at least 64 tokens; length 0 is for "
                                  "short-context (lm-eval) tasks only")
            cells.append(Cell(task, length, n, tuple(j for j in range(n) if keep(f"{task.name}@{length}#{j}"))))
    return cells, external


def check_lengths(cells: list[Cell], backend: Any, truncation: str) -> None:
    """Refuse, before any work, lengths the model cannot hold (a sample fills its length, generation included)."""
    over = sorted({c.length for c in cells if c.length > backend.context_length})
    if over and truncation == "refuse":
        raise PromptTooLongError(
            f"lengths: {', '.join(map(str, over))} exceed the model's context of {backend.context_length} tokens; "
            "drop them (--lengths) or pass --truncation middle to cut prompts in the middle")


def chunk_size(length: int, batch_size: int) -> int:
    return max(batch_size, min(MAX_CHUNK, CHUNK_TOKENS // max(length, 1)))


def chunks(items: Iterable[Sample], size: int) -> Iterator[list[Sample]]:
    buf: list[Sample] = []
    for item in items:
        buf.append(item)
        if len(buf) >= size:
            yield buf
            buf = []
    if buf:
        yield buf


def request(s: Sample) -> Request:
    return Request(s.id, s.prompt, s.max_new_tokens, s.add_special_tokens, s.prompt_tokens, s.user_text, s.answer_prefix)


def build_backend(plan: RunPlan, truncation: str) -> Any:
    for key, flag in (("model", "--model"), ("truncation", "--truncation")):
        if key in plan.backend_args:
            raise ConfigError(f"backend_args.{key}: set it with {flag}, not as a backend argument")
    return registry.get("backend", plan.backend, field="backend")(model=plan.model, truncation=truncation, **plan.backend_args)


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


def model_fingerprint(backend: Any, model: str) -> str:
    """The backend's own fingerprint if it has one, else a hash of the local weights, else the model's name."""
    own = getattr(backend, "fingerprint", None)
    if callable(own):
        return str(own())
    try:
        return weights_fingerprint(model)
    except (ConfigError, OSError):
        return "name:" + model


def run(plan: RunPlan, *, fresh: bool = False, console: Console | None = None, backend: Any = None) -> RunOutcome:
    """Score the plan's suite into the store; rerunning resumes. `backend` overrides building one (tests, notebooks)."""
    console = console or Console(stderr=True)
    suite = plan.suite
    if backend is None:
        backend = build_backend(plan, suite.truncation)
    renderer = PromptRenderer(backend.tokenizer, suite.template)
    ctx = GenContext(backend.tokenizer, renderer, data_dir=plan.data_dir, verify=resolve_mode(suite.verify, suite.samples))
    cells, external = plan_cells(suite, ctx, keep=plan.in_shard)
    check_lengths(cells, backend, suite.truncation)
    for task in {c.task.name: c.task for c in cells}.values():
        require(backend, task.needs, why=f"task {task.name}")
    for task in {id(c.task): c.task for c in cells if c.indices}.values():  # bad data: one line, before any write
        if hasattr(task, "prepare"):
            task.prepare(ctx)

    i, n = plan.shard
    store = RunStore(plan.out_dir, plan.run_id(), part=None if n == 1 else f"shard-{i}-of-{n}")
    with store.writer():
        if fresh:
            store.reset()
            if n == 1:
                for path in store.dir.glob("lmeval_results.json"):
                    path.unlink()
        now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        secrets = [s for v in plan.backend_args.values() if isinstance(v, str) for s in url_secrets(v)]
        command = redact_all(sys.argv, secrets)  # no URL password or token reaches the record
        planned: dict[str, dict[str, int]] = {}
        for c in cells:
            planned.setdefault(c.task.name, {})[str(c.length)] = c.planned
        record = RunRecord(
            run_id=plan.run_id(), created=now, suite=suite.name, suite_config=suite.model_dump(mode="json"), model=plan.model,
            backend=getattr(backend, "name", plan.backend), backend_args=redact_all({**plan.backend_args, **backend.info()}, secrets),
            tokenizer=str(getattr(backend.tokenizer, "name_or_path", "")), tokenizer_fingerprint=tokenizer_fingerprint(backend.tokenizer),
            template=renderer.template, seed=suite.seed, truncation=suite.truncation, versions=versions(), command=command,
            label=plan.label or plan.model, model_fingerprint=model_fingerprint(backend, plan.model),
            plan=planned, external=[t.name for t in external], training=training_provenance(plan.model),
            losses=sorted({c.task.name for c in cells if c.task.needs == "prompt_logprobs"}))
        store.begin(record, {"started": now, "shard": f"{i}/{n}", "command": command, "versions": record.versions,
                             "host": platform.node()})
        done = store.done_ids()
        outcome = RunOutcome(store, planned=sum(len(c.indices) for c in cells))
        outcome.done = sum(1 for c in cells for j in c.indices if f"{c.task.name}@{c.length}#{j}" in done)
        try:
            _score_cells(cells, done, backend, ctx, suite, store, outcome, console, plan.label or plan.model)
            if i == 0:  # external tasks (lm-eval) run whole, in the first shard only
                _run_external(external, suite, backend, renderer, store, console)
        except KeyboardInterrupt:
            outcome.interrupted = True
            raise RunInterrupted(outcome) from None
    return outcome


def _score_cells(cells, done, backend, ctx, suite, store, outcome: RunOutcome, console, name: str) -> None:
    """Score every cell. The bar's total is prompt tokens (a 128K sample is far more work than a 4K one, so the
    ETA is right across lengths); it advances after every batch (one sample on CPU) and shows samples done."""
    batch_size = max(1, int(getattr(backend, "batch_size", 1)))
    if not cells:
        return
    work = sum(len(c.indices) * c.length for c in cells)
    finished = sum(c.length for c in cells for j in c.indices if f"{c.task.name}@{c.length}#{j}" in done)
    with progress(console, count="{task.fields[samples]}") as bar:
        job = bar.add_task(f"scoring {name}", total=work, completed=finished, samples=_count(outcome))
        for cell in cells:
            todo = [j for j in cell.indices if f"{cell.task.name}@{cell.length}#{j}" not in done]
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
                        preds = backend.generate([request(s) for s in batch])
                        rows = [_row(cell.task, s, p) for s, p in zip(batch, preds)]
                    store.append(rows)
                    for r in rows:
                        if r["error"]:
                            outcome.errors[error_reason(r["error"])] += 1
                        else:
                            outcome.done += 1
                    bar.update(job, advance=cell.length * len(batch), samples=_count(outcome))


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


def _logprob_rows(task, batch: list[Sample], backend) -> list[dict[str, Any]]:
    """Perplexity rows: every window of the batch's samples in one call, then each sample's sums and buckets."""
    windows = [task.logprob_requests(s) for s in batch]
    results = iter(backend.token_logprobs([w for ws in windows for w in ws]))
    rows = []
    for s, ws in zip(batch, windows):
        got: list[TokenLogprobs] = [next(results) for _ in ws]
        error = next((r.error for r in got if r.error), None)
        row = {"id": s.id, "task": s.task, "category": task.category, "length": s.length, "index": s.index, "depths": [],
               "prompt_hash": s.prompt_hash, "prompt_tokens": s.prompt_tokens, "max_new_tokens": 0, "prediction": "",
               "generated_tokens": 0, "seconds": round(sum(r.seconds for r in got), 4), "metric": s.metric, "score": None,
               "empty": False, "answers": [], "truncated_tokens": 0, "error": error, "depth": None, "position": None,
               "meta": {k: v for k, v in s.meta.items() if k != "token_ids"}, "windows": len(ws)}
        rows.append({**row, **({} if error else task.score_logprobs(s, got))})
    return rows


def _row(task, s: Sample, p: Prediction) -> dict[str, Any]:
    score = None if p.error else task.score(p.text, s)
    return {
        "id": s.id, "task": s.task, "category": task.category, "length": s.length, "index": s.index,
        "depths": list(s.depths), "prompt_hash": s.prompt_hash, "prompt_tokens": p.prompt_tokens or s.prompt_tokens,
        "max_new_tokens": s.max_new_tokens, "prediction": p.text, "generated_tokens": p.generated_tokens,
        "seconds": round(p.seconds, 4), "timing": p.timing,
        "prefill_seconds": None if p.prefill_seconds is None else round(p.prefill_seconds, 4),
        "decode_seconds": None if p.decode_seconds is None else round(p.decode_seconds, 4),
        "metric": s.metric, "score": score, "empty": is_empty(p.text),
        "answers": list(s.answers), "truncated_tokens": p.truncated_tokens, "error": p.error,
        "depth": s.meta.get("depth"), "position": s.meta.get("position"),
        "meta": {k: v for k, v in s.meta.items() if k not in ("depth", "position", "user_text")},
    }
