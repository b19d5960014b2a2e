"""Every LLM call of the synthesis: through a ctxbench backend, cached on disk, with parse-and-retry.

The cache is an append-only JSON-lines file per generator fingerprint, keyed by (fingerprint, prompt):
each finished batch is appended with one write (a killed run leaves at most a torn last line, which the
reader ignores), so a rerun repeats no finished call, and greedy decoding plus the cache make its output
byte-identical. The backend is built on the first cache miss only: a fully cached rerun loads no model.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.io import append_jsonl, cut_torn_tail, read_jsonl
from ctxbench.harness.core.types import Request
from ctxbench.trainers.hqa import prompts

VOLATILE_BACKEND_ARGS = {"batch_size", "threads", "device", "max_concurrency", "timeout", "api_key", "gpu_memory_utilization"}


class GeneratorSpec(BaseModel):
    """The model that writes summaries and QAs (§4.1: Qwen2-72B-Instruct; §4.3: Llama-3.1-8B / Qwen2.5-7B)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    model: str = Field(description="alias, HF dir, hub id or served model name, e.g. smollm2-135m or Qwen/Qwen2-72B-Instruct")
    backend: str = Field("hf", description="ctxbench backend: hf (CPU/GPU), vllm (at scale) or openai (a served endpoint)")
    backend_args: dict[str, Any] = Field(default_factory=dict, description="backend arguments, e.g. {dtype: float32, "
                                         "threads: 1} or {tensor_parallel_size: 4}")
    max_new_tokens: int = Field(512, ge=1, description="tokens generated per call (summaries and QA replies)")
    answer_prefix: str = Field("", description="start of every QA reply, prefilled in the assistant turn (e.g. "
                               "'{\"question\": \"' steers a small model into JSON); the paper uses none")
    batch_size: int = Field(32, ge=1, description="prompts sent to the backend per call (then cached together)")


@dataclass(frozen=True)
class QA:
    question: str
    answer: str


def fingerprint(spec: GeneratorSpec) -> str:
    """What makes two generators answer a prompt alike: backend, weights, output-affecting arguments, budget."""
    from ctxbench.harness.core.models import weights_fingerprint

    try:
        weights = weights_fingerprint(spec.model)
    except ConfigError:  # a served model name that is not a local path or alias
        weights = f"name:{spec.model}"
    args = {k: v for k, v in spec.backend_args.items() if k not in VOLATILE_BACKEND_ARGS}
    blob = json.dumps({"backend": spec.backend, "model": spec.model, "weights": weights, "args": args,
                       "max_new_tokens": spec.max_new_tokens, "decoding": "greedy"}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def make_request(renderer, sample_id: str, text: str, answer_prefix: str, max_new_tokens: int) -> Request:
    """The one place a synthesis prompt becomes a backend Request."""
    r = renderer.render(text, answer_prefix)
    return Request(sample_id, r.text, max_new_tokens, r.add_special_tokens, renderer.count(r), r.user, r.prefix)


_OBJECT = re.compile(r"\{.*\}", re.S)


def parse_qa(reply: str) -> QA | str:
    """A reply's question and answer, from JSON or a Python dict literal (App. B asks for {'question': ...});
    otherwise the reason it was rejected: empty, no_object, unparsable, missing_fields."""
    if not reply or not reply.strip():
        return "empty"
    found = _OBJECT.search(reply)
    if not found:
        return "no_object"
    blob = found.group(0)
    obj = None
    for loads in (json.loads, ast.literal_eval):
        try:
            obj = loads(blob)
            break
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    if not isinstance(obj, dict):
        return "unparsable"
    q, a = obj.get("question"), obj.get("answer")
    if not isinstance(q, str) or not isinstance(a, (str, int, float)) or not q.strip() or not str(a).strip():
        return "missing_fields"
    return QA(q.strip(), str(a).strip())


class CallCache:
    """Replies by key, persisted as JSON lines {"key", "reply", "prompt_tokens", "generated_tokens"}; loaded once,
    appended per batch."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.rows: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            cut_torn_tail(self.path)
            for row in read_jsonl(self.path, require=("key", "reply")):
                self.rows[row["key"]] = row

    def add(self, rows: list[dict[str, Any]]) -> None:
        append_jsonl(self.path, rows)
        self.rows.update((r["key"], r) for r in rows)


class Generator:
    """Cached, batched calls to a ctxbench backend. `used` holds every distinct call the synthesis asked for (cached
    or made), so its totals are the same however often the run was interrupted; `made` counts this process's calls."""

    def __init__(self, spec: GeneratorSpec, cache_dir: Path, *, max_retries: int = 2,
                 on_calls: Callable[[int], None] | None = None):
        self.spec = spec
        self.fingerprint = fingerprint(spec)
        self.cache = CallCache(Path(cache_dir) / f"{self.fingerprint}.jsonl")
        self.max_retries = max_retries
        self.on_calls = on_calls
        self._backend = None
        self._renderer = None
        self.used: set[str] = set()
        self.made = 0
        self.errors = 0
        self.drops = Counter()  # final reason per dropped QA or summary

    def totals(self) -> dict[str, int]:
        rows = [self.cache.rows[k] for k in self.used]
        return {"calls": len(rows), "prompt_tokens": sum(int(r.get("prompt_tokens", 0)) for r in rows),
                "generated_tokens": sum(int(r.get("generated_tokens", 0)) for r in rows)}

    # --- backend --------------------------------------------------------------------------------
    def backend(self):
        if self._backend is None:
            from ctxbench.harness.core import registry
            from ctxbench.harness.core.prompting import PromptRenderer

            factory = registry.get("backend", self.spec.backend, field="generator.backend")
            self._backend = factory(model=self.spec.model, **self.spec.backend_args)
            self._renderer = PromptRenderer(self._backend.tokenizer, "chat")
        return self._backend

    def check_window(self, longest_prompt: str) -> None:
        """Bad input before any call: the generator's context must hold the longest prompt plus its reply."""
        backend = self.backend()
        r = self._renderer.render(longest_prompt, self.spec.answer_prefix)
        need = self._renderer.count(r) + self.spec.max_new_tokens
        if need > backend.context_length:
            raise ConfigError(f"generator.model: context of {backend.context_length} tokens < {need} needed for a chunk, "
                              "the prompt and the reply; lower small_tokens or multihop chunks, or use a longer-context generator")

    def key(self, text: str, prefix: str) -> str:
        blob = json.dumps([self.fingerprint, text, prefix, self.spec.max_new_tokens])
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    # --- calls ----------------------------------------------------------------------------------
    def complete(self, texts: Sequence[str], prefix: str = "") -> list[str]:
        """Replies (prefix + generated text) to user prompts, from the cache or the backend in batches."""
        keys = [self.key(t, prefix) for t in texts]
        self.used.update(keys)
        todo: dict[str, str] = {}
        for k, t in zip(keys, texts):
            if k not in self.cache.rows:
                todo.setdefault(k, t)  # identical prompts: one call
        items = list(todo.items())
        for b in range(0, len(items), self.spec.batch_size):
            batch = items[b: b + self.spec.batch_size]
            backend = self.backend()
            preds = backend.generate([make_request(self._renderer, k, t, prefix, self.spec.max_new_tokens) for k, t in batch])
            # a failed call (backend error) is not cached: it reads as an empty reply now and is asked again next run
            self.cache.add([{"key": k, "reply": prefix + p.text, "prompt_tokens": p.prompt_tokens,
                             "generated_tokens": p.generated_tokens} for (k, _), p in zip(batch, preds) if not p.error])
            self.errors += sum(1 for p in preds if p.error)
            self.made += len(batch)
            if self.on_calls:
                self.on_calls(len(batch))
        return [self.cache.rows[k]["reply"] if k in self.cache.rows else "" for k in keys]

    def qas(self, texts: Sequence[str], kind: str) -> list[QA | None]:
        """QA pairs for prompts; a reply that does not parse is asked again (with a nudge, as decoding is greedy)
        up to max_retries times, then dropped and counted under `kind:reason`."""
        out: list[QA | None] = [None] * len(texts)
        pending = list(range(len(texts)))
        reasons: dict[int, str] = {}
        for attempt in range(self.max_retries + 1):
            if not pending:
                break
            replies = self.complete([prompts.retry(texts[i], attempt) for i in pending], self.spec.answer_prefix)
            still = []
            for i, reply in zip(pending, replies):
                parsed = parse_qa(reply)
                if isinstance(parsed, QA):
                    out[i] = parsed
                else:
                    reasons[i] = parsed
                    still.append(i)
            pending = still
        for i in pending:
            self.drops[f"{kind}:{reasons[i]}"] += 1
        return out

    def summaries(self, texts: Sequence[str], kind: str) -> list[str | None]:
        """Free-text summaries; an empty reply is retried, then dropped and counted."""
        out: list[str | None] = [None] * len(texts)
        pending = list(range(len(texts)))
        for attempt in range(self.max_retries + 1):
            if not pending:
                break
            replies = self.complete([prompts.retry(texts[i], attempt, "text") for i in pending])
            still = []
            for i, reply in zip(pending, replies):
                if reply.strip():
                    out[i] = reply.strip()
                else:
                    still.append(i)
            pending = still
        self.drops[f"{kind}:empty"] += len(pending)
        if not self.drops[f"{kind}:empty"]:
            del self.drops[f"{kind}:empty"]
        return out
