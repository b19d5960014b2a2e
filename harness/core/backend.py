"""The backend contract, and the truncation policy every backend shares.

A backend declares what it can do in `capabilities`; callers check the declaration, never probe methods:
- "generate": `generate(requests) -> predictions` (every backend);
- "loglikelihood": `loglikelihood(pairs)` and `loglikelihood_rolling(texts)`, as lm-eval's LM needs;
- "chat": it sends the user text as a chat message (Request.user_text, answer_prefix) rather than the raw prompt;
- "prompt_logprobs": `token_logprobs(requests: list[LogprobRequest]) -> list[TokenLogprobs]`: the log-probability
  of every scored token of a window given the tokens before it (perplexity, tasks/ppl/task.py).
"""

from __future__ import annotations

from typing import Any, Protocol

from ctxbench.harness.core.errors import ConfigError, PromptTooLongError
from ctxbench.harness.core.types import LogprobRequest, Prediction, Request

GENERATE, LOGLIKELIHOOD, CHAT, PROMPT_LOGPROBS = "generate", "loglikelihood", "chat", "prompt_logprobs"


class Backend(Protocol):
    name: str
    tokenizer: Any
    context_length: int
    batch_size: int  # requests per generate() call the runner sends (the backend may split them further)
    capabilities: frozenset[str]

    def info(self) -> dict[str, Any]: ...

    def generate(self, requests: list[Request]) -> list[Prediction]: ...


def require(backend: Any, capability: str, *, why: str) -> None:
    """One line naming the backend and what it lacks, before any work."""
    if capability not in getattr(backend, "capabilities", frozenset({GENERATE})):
        raise ConfigError(f"backend {getattr(backend, 'name', '?')!r}: no {capability.replace('_', ' ')} support, which {why} needs")


def apply_truncation(ids: list[int], *, max_new_tokens: int, context_length: int, policy: str, sample_id: str) -> tuple[list[int], int]:
    """Fit prompt ids into the context. Never silent: refuse, or cut the middle and report how much."""
    limit = context_length - max_new_tokens
    if len(ids) <= limit:
        return ids, 0
    if policy != "middle":
        raise PromptTooLongError(
            f"{sample_id}: prompt has {len(ids)} tokens + {max_new_tokens} to generate > context {context_length}; "
            "use shorter lengths or --truncation middle"
        )
    head = limit // 2
    return ids[:head] + ids[len(ids) - (limit - head):], len(ids) - limit


def parse_backend_args(model: Any, args: dict[str, Any], *, backend: str) -> Any:
    """`args` validated against a backend's pydantic model: an unknown or ill-typed key is one line naming the key
    and listing the valid ones. Returns the model instance."""
    from pydantic import ValidationError

    if "api_key" in args:
        raise ConfigError("backend_args.api_key: never pass a key as an argument (it would be recorded); "
                          "export it in an environment variable and pass api_key_env=NAME")
    valid = ", ".join(sorted(model.model_fields))
    try:
        return model(**args)
    except ValidationError as e:
        first = e.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or "?"
        if first["type"] == "extra_forbidden":
            raise ConfigError(f"backend_args.{key}: unknown key for backend {backend}; valid keys: {valid}") from None
        got = first.get("input")
        shown = repr(got) if len(repr(got)) <= 60 else repr(got)[:57] + "..."
        raise ConfigError(f"backend_args.{key}: {first['msg'].removeprefix('Value error, ')} (got {shown}); "
                          f"valid keys of backend {backend}: {valid}") from None


def check_window(r: LogprobRequest, context_length: int) -> None:
    """A log-probability window must fit the model whole (it is never cut) and score at least one token."""
    n = len(r.token_ids)
    if n > context_length:
        raise PromptTooLongError(f"{r.sample_id}: a window of {n} tokens exceeds the model's context of {context_length}; "
                                 "use shorter lengths")
    if not 1 <= r.score_from < n:
        raise ValueError(f"{r.sample_id}: score_from {r.score_from} must lie in [1, {n})")
