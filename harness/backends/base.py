"""The backend contract, and the truncation policy every backend shares."""

from __future__ import annotations

from typing import Any, Protocol

from harness.errors import PromptTooLongError
from harness.types import Prediction, Request


class Backend(Protocol):
    name: str
    tokenizer: Any
    context_length: int

    def info(self) -> dict[str, Any]: ...

    def generate(self, requests: list[Request]) -> list[Prediction]: ...


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
