"""The one generator client of data synthesis: a ctxbench backend plus a prompt renderer behind one call cache.

Every model-written piece of training data (hierarchical-QA summaries and QAs, LOGO's self-generated replies)
goes through `GeneratorClient`, the one cached client of harness/backends/client.py (the LLM judge uses it too).
Its replies are cached in an append-only JSON-lines file (appended under the file's lock, so every synthesis on a
machine may share it), keyed by (fingerprint, task text, answer prefix): a rerun after a kill asks only for what
was never answered, and a fully cached rerun loads no model. One fingerprint rule decides when cached replies are
stale: whatever can change a reply invalidates (the weights, or the served model's name; the backend; backend
arguments that shape the output; the reply budget; the prompt template), whatever cannot does not (batch size,
threads, device, concurrency, timeouts, API keys, memory settings). Backends decode greedily.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ctxbench.harness.backends.client import CachedClient, KeyedCache
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.identity import EXECUTION, content_hash, identity_args
from ctxbench.harness.core.types import Request

# Before each backend declared its execution-only arguments (harness/core/identity.py), the fingerprint left out
# this fixed list, which kept concurrency, tensor_parallel_size, ... in (and named keys no backend takes): replies
# cached under such a fingerprint are the same replies (legacy_fingerprint finds them).
LEGACY_VOLATILE_BACKEND_ARGS = frozenset({"batch_size", "threads", "device", "max_concurrency", "timeout", "api_key",
                                          "gpu_memory_utilization"})


class GeneratorConfig(BaseModel):
    """The model that writes synthetic data (the `generator:` block of hqa and logo data configs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    model: str = Field(description="alias, HF dir, hub id or served model name, e.g. smollm2-135m or Qwen/Qwen2-72B-Instruct")
    backend: str = Field("hf", description="ctxbench backend: hf (CPU/GPU), vllm (at scale) or openai (a served endpoint)")
    backend_args: dict[str, Any] = Field(default_factory=dict, description="backend arguments, e.g. {dtype: float32, "
                                         "threads: 1} or {tensor_parallel_size: 4}")
    max_new_tokens: int = Field(512, ge=1, description="reply length cap per call (logo's default: 64)")
    template: str = Field("chat", description="prompt template: chat, auto, or a plain template name (logo's default: auto)")
    answer_prefix: str = Field("", description="hqa: start of every QA reply, prefilled in the assistant turn (e.g. "
                               "'{\"question\": \"' steers a small model into JSON); the paper uses none")
    batch_size: int | None = Field(None, ge=1, description="prompts per backend call (then cached together); default: "
                                   "hqa 32, logo the backend's own batch size", json_schema_extra=EXECUTION)


def method_defaults(raw: Any, **defaults: Any) -> Any:
    """A data method's own defaults for the generator keys its users leave out (a before-validator helper)."""
    return {**defaults, **raw} if isinstance(raw, dict) else raw


def generator_defaults(field: str, **defaults: Any) -> Any:
    """A before-validator for a config's generator field, e.g. `_defaults = generator_defaults("generator", x=1)`."""
    from pydantic import field_validator

    return field_validator(field, mode="before")(classmethod(lambda cls, v: method_defaults(v, **defaults)))


def fingerprint(config: GeneratorConfig) -> str:
    """The one identity rule (harness/core/identity.py): what can change a reply is in it; what cannot (the backend's
    execution-only arguments, e.g. concurrency or tensor_parallel_size, and the config's batch_size) is not."""
    return _fingerprint(config, identity_args(config.backend, config.backend_args))


def legacy_fingerprint(config: GeneratorConfig) -> str | None:
    """The fingerprint an older ctxbench gave this config (LEGACY_VOLATILE_BACKEND_ARGS left out), where it differs
    from today's: its cached replies answer the same calls."""
    old = _fingerprint(config, {k: v for k, v in config.backend_args.items() if k not in LEGACY_VOLATILE_BACKEND_ARGS})
    return old if old != fingerprint(config) else None


def _fingerprint(config: GeneratorConfig, args: dict[str, Any]) -> str:
    from ctxbench.harness.core.models import weights_fingerprint

    try:
        weights = weights_fingerprint(config.model)
    except ConfigError:  # a served model name that is not a local path or alias
        weights = f"name:{config.model}"
    return content_hash({"backend": config.backend, "weights": weights, "args": args, "template": config.template,
                         "max_new_tokens": config.max_new_tokens, "decoding": "greedy"}, default=str)


def call_key(fingerprint: str, text: str, prefix: str = "") -> str:
    """One generator call's cache key: the fingerprint, the task text and the answer prefix."""
    return content_hash([fingerprint, text, prefix], 32)


def make_request(renderer, sample_id: str, text: str, answer_prefix: str, max_new_tokens: int) -> Request:
    """The one place a synthesis prompt becomes a backend Request (rendered with the generator's template)."""
    r = renderer.render(text, answer_prefix)
    return Request(sample_id, r.text, max_new_tokens, r.add_special_tokens, renderer.count(r), r.user, r.prefix)


class GeneratorClient(CachedClient):
    """The one cached client (harness/backends/client.py) as synthesis uses it: prompts rendered with the generator's
    template, calls keyed by (fingerprint, task text, answer prefix) and answered in batches. `used` holds every
    distinct call asked for (cached or made), so totals do not depend on interruptions; `counts` are this process's
    outcomes."""

    def __init__(self, config: GeneratorConfig, *, cache_dir: Path | None = None, cache_file: Path | None = None,
                 tokenizer=None, on_calls: Callable[[int], None] | None = None):
        self.config = config
        self.fingerprint = fingerprint(config)
        path = cache_file or Path(cache_dir) / f"{self.fingerprint}.jsonl"  # one file per fingerprint
        super().__init__(config.backend, config.model, config.backend_args, KeyedCache(path, require=("key", "text")),
                         field="generator.backend")
        self.on_calls = on_calls
        self._tokenizer = tokenizer  # renders prompts; default: the backend's own tokenizer
        self._renderer = None
        self.used: set[str] = set()
        self.counts: dict[str, Any] = {"cached": 0, "generated": 0, "failed": 0, "truncated": 0}

    @property
    def renderer(self):
        if self._renderer is None:
            from ctxbench.harness.core.prompting import PromptRenderer

            tok = self._tokenizer if self._tokenizer is not None else self.backend().tokenizer
            self._renderer = PromptRenderer(tok, self.config.template)
        return self._renderer

    def key(self, text: str, prefix: str = "") -> str:
        return call_key(self.fingerprint, text, prefix)

    def reply(self, key: str) -> dict[str, Any] | None:
        return self.cache.rows.get(key)

    def totals(self) -> dict[str, int]:
        rows = [self.cache.rows[k] for k in self.used if k in self.cache.rows]
        return {"calls": len(rows), "prompt_tokens": sum(int(r.get("prompt_tokens", 0)) for r in rows),
                "generated_tokens": sum(int(r.get("generated_tokens", 0)) for r in rows)}

    def ensure(self, calls: dict[str, tuple[str, str]], progress: Callable[[int, int], None] | None = None) -> None:
        """Answer every call (key -> (task text, answer prefix)) not cached yet, one batch at a time, each batch cached
        at once. A backend error is not cached: it is counted (the first message kept) and asked again next run."""
        self.used.update(calls)
        todo = self._reuse_legacy(calls, [k for k in calls if k not in self.cache])
        self.counts["cached"] += len(calls) - len(todo)
        backend = self.backend() if todo else None  # first: a bad backend argument fails before any progress is shown
        if progress:
            progress(len(calls) - len(todo), len(calls))
        step = self.config.batch_size or int(getattr(backend, "batch_size", 8) or 8)
        for i in range(0, len(todo), step):
            keys = todo[i:i + step]
            self._answer(backend, keys, calls)
            if self.on_calls:
                self.on_calls(len(keys))
            if progress:
                progress(len(calls) - len(todo) + i + len(keys), len(calls))

    def _reuse_legacy(self, calls: dict[str, tuple[str, str]], todo: list[str]) -> list[str]:
        """Replies an older ctxbench cached for this config under its older fingerprint (it kept concurrency,
        tensor_parallel_size, ... in): copied under today's keys instead of paid for again. Returns what is still missing."""
        if not todo:
            return todo
        if not hasattr(self, "_legacy"):
            self._legacy = legacy_fingerprint(self.config)  # once per client: it reads the weights' fingerprint
        old = self._legacy
        if not old:
            return todo
        per_fingerprint = self.cache.path.name == f"{self.fingerprint}.jsonl"
        legacy = KeyedCache(self.cache.path.with_name(f"{old}.jsonl"), require=("key", "text")) if per_fingerprint else self.cache
        found = [{**row, "key": k} for k in todo if (row := legacy.get(call_key(old, *calls[k]))) is not None]
        self.cache.add(found)
        return [k for k in todo if k not in self.cache]

    def _answer(self, backend, keys: list[str], calls: dict[str, tuple[str, str]]) -> None:
        budget = self.config.max_new_tokens
        preds = backend.generate([make_request(self.renderer, k, *calls[k], budget) for k in keys])
        rows = []
        for k, p in zip(keys, preds):
            if p.error:
                self.counts["failed"] += 1
                self.counts.setdefault("first_error", p.error)
                continue
            rows.append({"key": k, "text": p.text, "prompt_tokens": p.prompt_tokens, "generated_tokens": p.generated_tokens,
                         "finished": p.generated_tokens < budget, "truncated_tokens": p.truncated_tokens})
            self.counts["truncated"] += int(bool(p.truncated_tokens))
        self.cache.add(rows)
        self.counts["generated"] += len(rows)

    def complete(self, texts: Sequence[str], prefix: str = "") -> list[str]:
        """Replies (prefix + generated text) to task texts; identical texts are asked once; a failed call reads ''."""
        keys = [self.key(t, prefix) for t in texts]
        self.ensure(dict(zip(keys, ((t, prefix) for t in texts))))
        return [prefix + self.cache.rows[k]["text"] if k in self.cache.rows else "" for k in keys]
