"""The policy model answers its own prompts through a ctxbench backend; every call is cached on disk.

The cache is a JSON-lines file keyed by (generator fingerprint, prompt): a rerun after an interruption,
or with another threshold or seed, asks the backend only for prompts it has not answered yet, and loads
no model when there are none. The fingerprint covers the weights, the backend, its arguments and the
generation length, so a changed generator never reuses stale replies. Backends decode greedily; the
authors' scripts sample (temperature 0.7, top-p 0.95): the manifest records that deviation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxbench.harness.core.io import append_jsonl, cut_torn_tail, read_jsonl
from ctxbench.harness.core.prompting import PromptRenderer
from ctxbench.harness.core.types import Request

PAPER_SAMPLING = {"temperature": 0.7, "top_p": 0.95}


def build_request(renderer: PromptRenderer, sample_id: str, task_text: str, answer_prefix: str, max_new_tokens: int) -> Request:
    """The one place a LOGO prompt becomes a backend Request (rendered with the generator's template)."""
    r = renderer.render(task_text, answer_prefix)
    return Request(sample_id, r.text, max_new_tokens, r.add_special_tokens, renderer.count(r), r.user, r.prefix)


def generator_fingerprint(model: str, backend: str, backend_args: dict[str, Any], max_new_tokens: int) -> str:
    from ctxbench.harness.core.models import weights_fingerprint

    blob = json.dumps({"weights": weights_fingerprint(model), "backend": backend, "backend_args": backend_args,
                       "max_new_tokens": max_new_tokens, "decoding": "greedy"}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def call_key(fingerprint: str, prompt: str) -> str:
    return hashlib.sha256(f"{fingerprint}\0{prompt}".encode()).hexdigest()[:32]


class CallCache:
    """Replies by call key, read once from an append-only JSON-lines file (a torn last line is cut)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.rows: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            cut_torn_tail(self.path)
            self.rows = {r["key"]: r for r in read_jsonl(self.path, require=("key", "text"))}

    def __contains__(self, key: str) -> bool:
        return key in self.rows

    def __getitem__(self, key: str) -> dict[str, Any]:
        return self.rows[key]

    def add(self, rows: list[dict[str, Any]]) -> None:
        append_jsonl(self.path, rows)
        self.rows.update((r["key"], r) for r in rows)


def generate_missing(requests: dict[str, Request], cache: CallCache, make_backend: Callable[[], Any], *,
                     progress: Callable[[int, int], None] | None = None) -> dict[str, int]:
    """Answer every request whose key is not cached, one backend batch at a time (each batch cached at once).

    Returns counts: cached (found), generated, failed (backend errors: not cached, retried on the next run; the first
    message as first_error), and truncated (prompts the backend's truncation policy cut to fit its window).
    """
    todo = [k for k in requests if k not in cache]
    counts = {"cached": len(requests) - len(todo), "generated": 0, "failed": 0, "truncated": 0}
    backend = make_backend() if todo else None  # first: a bad backend argument fails before any progress is shown
    if progress:
        progress(counts["cached"], len(requests))
    if not todo:
        return counts
    step = max(1, int(getattr(backend, "batch_size", 8) or 8))
    for i in range(0, len(todo), step):
        keys = todo[i:i + step]
        preds = backend.generate([requests[k] for k in keys])
        rows = []
        for k, p in zip(keys, preds):
            if p.error:
                counts["failed"] += 1
                counts.setdefault("first_error", p.error)
                continue
            rows.append({"key": k, "text": p.text, "generated_tokens": p.generated_tokens,
                         "finished": p.generated_tokens < requests[k].max_new_tokens, "truncated_tokens": p.truncated_tokens})
            counts["truncated"] += int(p.truncated_tokens > 0)
        cache.add(rows)
        counts["generated"] += len(rows)
        if progress:
            progress(counts["cached"] + i + len(keys), len(requests))
    return counts
