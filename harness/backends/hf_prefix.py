"""Prefix reuse for the hf backend: keep the KV cache of the last prompt prefilled alone, and prefill the next prompt
from the part it shares with it, computing only its suffix.

The schedule declares what each request shares with the one before it, in characters of the prompt
(Request.shared_prefix, harness/run/prefix.py); the backend turns them into tokens (the tokens that end within the
declared characters) and reuses no more of the cache than the token ids agree on, so the prefix it keeps is exactly
the prefix an unshared prefill would compute. The kept cache is cropped by slicing (DynamicCache's layers grow by
concatenation, so the kept tensors are never written to). Greedy answers equal the unshared run's up to float rounding
of a differently shaped matmul (tests/test_hf_prefix_reuse.py).

The backend counts per prompt the tokens reused from the cache (the row's cached_tokens) and those computed.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Callable
from typing import Any

from ctxbench.harness.backends.hf_batched import cache_kwarg, prefill_alone

Layers = list[tuple[Any, Any]]

# A suffix prefilled on a kept cache costs more per token than a whole prompt's causal prefill (the attention mask is
# no longer square). Measured on the README main job (SmolLM2-135M fp32, CPU, idle): reusing the 24-60 tokens of chat
# template and instructions that RULER prompts share made prefill 23% slower (155 s -> 191 s). Reuse pays only when a
# good part of the prompt is kept, so less than this share of the prompt is prefilled whole.
MIN_REUSE_SHARE = 0.25


def encode(tokenizer: Any, prompt: str, chars: int, add_special_tokens: bool) -> tuple[list[int], int]:
    """(the prompt's token ids, how many of them end within its first `chars` characters): one tokenization, with
    offsets where a shared prefix is declared (a slow tokenizer has none: nothing is reused)."""
    if chars > 0:
        try:
            enc = tokenizer(prompt, add_special_tokens=add_special_tokens, return_offsets_mapping=True)
            ends, last = [], 0
            for _, end in enc["offset_mapping"]:
                last = max(last, end)  # special tokens map to (0, 0): monotone ends
                ends.append(last)
            return list(enc["input_ids"]), bisect_right(ends, chars)
        except (NotImplementedError, KeyError, TypeError, ValueError):
            pass
    return tokenizer(prompt, add_special_tokens=add_special_tokens)["input_ids"], 0


def agreed(a: list[int], b: list[int]) -> int:
    """Leading token ids a and b share."""
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return n


class PrefixCache:
    """The KV cache of the last prompt prefilled alone (all but its last token), and its token ids."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.layers: Layers | None = None

    def clear(self) -> None:
        self.ids, self.layers = [], None

    def reusable(self, ids: list[int], declared: int) -> int:
        """Tokens of `ids` to take from the kept cache: at most the declared ones, only where the ids agree, and never
        the last prompt token (its logits start the generation)."""
        if not declared or self.layers is None:
            return 0
        if ids == self.ids:  # a repeat of the same prompt (--repeats): everything but the last token
            declared = len(ids)
        reuse = max(0, min(declared, agreed(self.ids, ids), len(self.ids) - 1, len(ids) - 1))
        return reuse if reuse >= MIN_REUSE_SHARE * len(ids) else 0

    def prefill(self, model: Any, ids: list[int], device: str, declared: int) -> tuple[Layers | None, float, int]:
        """(per-layer (keys, values) of ids[:-1], seconds, tokens reused): the suffix prefilled on the kept prefix."""
        reuse = self.reusable(ids, declared)
        if reuse:
            layers, seconds = prefill_suffix(model, ids, device, [(k[:, :, :reuse], v[:, :, :reuse]) for k, v in self.layers])
        else:
            layers, seconds = prefill_alone(model, ids, device)
        if layers is None:
            self.clear()
            return None, seconds, 0
        self.ids, self.layers = list(ids), layers
        return layers, seconds, reuse

    def batch(self, model: Any, declared: list[int]) -> tuple[Callable[[Any, list[int], str], Any], list[int]]:
        """A prefill for hf_batched.prefill_batch that prefills its prompts in order from this cache, and the list it
        fills with each prompt's reused tokens."""
        reused: list[int] = []
        pending = iter(declared)

        def prefill(model: Any, ids: list[int], device: str):
            layers, seconds, reuse = self.prefill(model, ids, device, next(pending))
            reused.append(reuse)
            return layers, seconds

        return prefill, reused


def prefill_suffix(model: Any, ids: list[int], device: str, prefix: Layers) -> tuple[Layers | None, float]:
    """Keys and values of ids[:-1] from those of its first len(prefix) tokens: only the rest is computed."""
    import torch
    from transformers import DynamicCache

    start = time.perf_counter()
    cache = DynamicCache(prefix, config=model.config)
    done = prefix[0][0].shape[2]
    rest = ids[done:-1]
    if rest:
        kwargs = {cache_kwarg(model): cache, "use_cache": True}
        try:
            model(input_ids=torch.tensor([rest], device=device), logits_to_keep=1, **kwargs)
        except TypeError:  # a model without logits_to_keep
            model(input_ids=torch.tensor([rest], device=device), **kwargs)
    seconds = time.perf_counter() - start
    if any(type(layer).__name__ != "DynamicLayer" for layer in cache.layers):
        return None, seconds
    return [(layer.keys, layer.values) for layer in cache.layers], seconds
