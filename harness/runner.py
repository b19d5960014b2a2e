"""The run loop: generate (cached) samples, ask the backend, score, append to the store. Resumable."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import platform
import re
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from harness import datasets, registry
from harness.backends.base import apply_truncation
from harness.config import Suite, build_task
from harness.metrics import is_empty
from harness.prompting import PromptRenderer
from harness.models import tokenizer_fingerprint
from harness.store import RunStore
from harness.types import Request, RunRecord, Sample
from tasks.base import GenContext


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("ctxbench", "torch", "transformers", "tokenizers", "wonderwords", "vllm", "numpy", "httpx", "lm_eval"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def progress(console: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TimeRemainingColumn(), console=console, transient=False)


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
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.label or Path(self.model).name or self.model)[:40]
        return f"{slug}-{self.suite.name}-{hashlib.sha256(blob.encode()).hexdigest()[:8]}"

    def in_shard(self, sample_id: str) -> bool:
        i, n = self.shard
        return n == 1 or int(hashlib.sha1(sample_id.encode()).hexdigest(), 16) % n == i


def make_samples(suite: Suite, ctx: GenContext, console: Console, keep=lambda sample_id: True) -> list[tuple[Any, Sample]]:
    specs = [(spec, build_task(spec)) for spec in suite.tasks]
    plan = []
    for spec, task in specs:
        if getattr(task, "external", False):
            continue
        n = task.samples_per_length(ctx) if hasattr(task, "samples_per_length") else None
        n = suite.samples if n is None else n
        for length in spec.lengths or suite.lengths:
            plan.append((task, length, [i for i in range(n) if keep(f"{task.name}@{length}#{i}")]))
    out = []
    with progress(console) as bar:
        job = bar.add_task("generating samples", total=sum(len(ix) for _, _, ix in plan))
        for task, length, indices in plan:
            for s in datasets.generate(task, length=length, indices=indices, seed=suite.seed, ctx=ctx,
                                       on_sample=lambda: bar.advance(job)):
                out.append((task, s))
    return out


def run(plan: RunPlan, *, fresh: bool = False, console: Console | None = None) -> RunStore:
    console = console or Console(stderr=True)
    suite = plan.suite
    backend = registry.get("backend", plan.backend, field="backend")(model=plan.model, truncation=suite.truncation, **plan.backend_args)
    renderer = PromptRenderer(backend.tokenizer, suite.template)
    ctx = GenContext(backend.tokenizer, renderer, data_dir=plan.data_dir, verify=suite.verify)
    samples = make_samples(suite, ctx, console, keep=plan.in_shard)
    if suite.truncation == "refuse":  # refuse before any work is stored, not half-way through
        for _, s in samples:
            apply_truncation(range(s.prompt_tokens), max_new_tokens=s.max_new_tokens, context_length=backend.context_length,
                             policy="refuse", sample_id=s.id)

    i, n = plan.shard
    store = RunStore(plan.out_dir, plan.run_id(), part=None if n == 1 else f"shard-{i}-of-{n}")
    if fresh:
        store.reset()
    store.write_record(RunRecord(
        run_id=plan.run_id(), created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), suite=suite.name,
        suite_config=suite.model_dump(mode="json"), model=plan.model, backend=plan.backend,
        backend_args={**plan.backend_args, **backend.info()}, tokenizer=str(getattr(backend.tokenizer, "name_or_path", "")),
        tokenizer_fingerprint=tokenizer_fingerprint(backend.tokenizer), template=renderer.template, seed=suite.seed,
        truncation=suite.truncation, versions=versions(), command=sys.argv, label=plan.label or plan.model,
    ))
    store.open_for_append()
    done = store.done_ids()
    todo = [(t, s) for t, s in samples if s.id not in done]
    # Group by generation budget, longest first (fewer pad tokens; OOM shows early), then by prompt text,
    # so prompts that share a prefix (depth grids, shared haystacks) are adjacent for prefix caches.
    todo.sort(key=lambda ts: (ts[1].max_new_tokens, -ts[1].length, ts[1].prompt))
    batch_size = max(1, int(getattr(backend, "batch_size", 1)))
    with progress(console) as bar:
        job = bar.add_task(f"scoring {plan.label or plan.model}", total=len(samples), completed=len(samples) - len(todo))
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            requests = [Request(s.id, s.prompt, s.max_new_tokens, s.add_special_tokens, s.prompt_tokens, s.user_text, s.answer_prefix)
                        for _, s in chunk]
            preds = backend.generate(requests)
            store.append([_row(t, s, p) for (t, s), p in zip(chunk, preds)])
            bar.advance(job, len(chunk))
    if i == 0:  # external tasks (lm-eval) run whole, in the first shard only
        _run_external(plan, suite, backend, renderer, store, console)
    return store


def _run_external(plan: RunPlan, suite: Suite, backend, renderer, store: RunStore, console: Console) -> None:
    """Tasks driven by another harness (lm-eval) produce their own rows; skipped once stored."""
    for spec in suite.tasks:
        task = build_task(spec)
        if not getattr(task, "external", False):
            continue
        if task.is_complete(store.dir):
            continue
        rows = task.run_external(backend=backend, renderer=renderer, limit=None, seed=suite.seed, console=console)
        store.append(rows)
        writer = getattr(task, "write_aggregates", None)
        if writer is not None and getattr(task, "last_results", None) is not None:
            writer(store.dir, task.last_results)


def _row(task, s: Sample, p) -> dict[str, Any]:
    score = None if p.error else task.score(p.text, s)
    return {
        "id": s.id, "task": s.task, "category": task.category, "length": s.length, "index": s.index,
        "depths": list(s.depths), "prompt_hash": s.prompt_hash, "prompt_tokens": p.prompt_tokens or s.prompt_tokens,
        "max_new_tokens": s.max_new_tokens, "prediction": p.text, "generated_tokens": p.generated_tokens,
        "seconds": round(p.seconds, 4), "metric": s.metric, "score": score, "empty": is_empty(p.text),
        "answers": list(s.answers), "truncated_tokens": p.truncated_tokens, "error": p.error,
        "depth": s.meta.get("depth"), "position": s.meta.get("position"),
        "meta": {k: v for k, v in s.meta.items() if k not in ("depth", "position")},
    }
