"""Batched decode on CPU: prefill each prompt alone, then decode the prompts together.

On a CPU a decode step reads every weight once whatever the batch, so a step for 8 sequences costs about what a step
for one does (SmolLM2-135M fp32, 1K prompts, 2 cores: 15 tok/s at batch 1, 83 tok/s at batch 8). A padded prefill
costs more than it saves (a one-token left pad slows a 4K prefill ~1.5x), so each prompt but its last token is
prefilled alone, unpadded; the per-prompt KV caches are then left-padded into one batch cache, and the decode loop
(hf_decode_loop.py, which drops each row as it finishes; generate() for sampling and thinking) takes the batch from
there: the last prompt tokens as its first (batched) step, an attention mask that hides the pads, and
position ids from the mask's cumulative sum, so each row sees exactly the keys and positions it had alone. Greedy
answers equal one-at-a-time decoding up to float rounding (a different matmul shape), i.e. except on logit ties
(tests/test_batched_decode.py).

Only caches of plain full-attention layers are merged; a model with sliding-window or other cache layers, or a
prompt of one token, decodes one at a time as before.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

KV_TOKEN_BUDGET = 32768  # padded prompt tokens one decode batch holds: at long lengths attention, not weights, dominates


def decode_groups(lengths: list[int], batch_size: int, budget: int = KV_TOKEN_BUDGET) -> list[list[int]]:
    """Consecutive runs of indices decoded together: at most batch_size, and at most `budget` padded tokens
    (the longest prompt of the run times its size), so long prompts decode in small groups or alone."""
    groups: list[list[int]] = []
    for i, n in enumerate(lengths):
        run = groups[-1] if groups else None
        if run and len(run) < batch_size and max(n, *(lengths[j] for j in run)) * (len(run) + 1) <= budget:
            run.append(i)
        else:
            groups.append([i])
    return groups


def cache_kwarg(model: Any) -> str:
    """The name forward() and generate() take a KV cache under: `cache` since transformers 5.2x, else past_key_values."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


@dataclass(frozen=True)
class Prefilled:
    """A batch ready for generate(): left-padded ids and mask, the merged cache of all but the last prompt tokens,
    and each prompt's own prefill time."""

    input_ids: Any
    attention_mask: Any
    cache: Any
    prefill_seconds: tuple[float, ...]


def prefill_alone(model: Any, ids: list[int], device: str) -> tuple[list[tuple[Any, Any]] | None, float]:
    """(per-layer (keys, values) of ids[:-1], seconds), or None where a cache layer is not a plain full-attention one."""
    import torch

    start = time.perf_counter()
    prompt = torch.tensor([ids[:-1]], device=device)
    try:
        out = model(input_ids=prompt, use_cache=True, logits_to_keep=1)  # the logits are not needed: the least of them
    except TypeError:  # a model without logits_to_keep
        out = model(input_ids=prompt, use_cache=True)
    cache = getattr(out, "cache", None)
    cache = getattr(out, "past_key_values", None) if cache is None else cache
    seconds = time.perf_counter() - start
    layers = getattr(cache, "layers", None)
    if not layers or any(type(layer).__name__ != "DynamicLayer" for layer in layers):
        return None, seconds
    return [(layer.keys, layer.values) for layer in layers], seconds


def merge_left_padded(caches: list[list[tuple[Any, Any]]], lengths: list[int]) -> list[tuple[Any, Any]]:
    """One batch cache per layer: each row's keys and values right-aligned to the longest (zeros before, masked)."""
    import torch

    width = max(lengths)
    merged = []
    for layer in zip(*caches):
        keys = [torch.nn.functional.pad(k, (0, 0, width - n, 0)) for (k, _), n in zip(layer, lengths)]
        values = [torch.nn.functional.pad(v, (0, 0, width - n, 0)) for (_, v), n in zip(layer, lengths)]
        merged.append((torch.cat(keys), torch.cat(values)))
    return merged


def prefill_batch(model: Any, ids_list: list[list[int]], pad_id: int, device: str,
                  prefill: Callable[[Any, list[int], str], Any] = prefill_alone) -> Prefilled | None:
    """Prefill each prompt alone (all but its last token) and merge the caches; None where they cannot be merged
    (a one-token prompt, or a model whose cache is not plain DynamicLayers): the caller decodes one at a time.
    `prefill` prefills one prompt (hf_prefix.py's starts from the previous prompt's shared prefix)."""
    import torch
    from transformers import DynamicCache

    if min(len(ids) for ids in ids_list) < 2:
        return None
    caches, seconds = [], []
    with torch.inference_mode():
        for ids in ids_list:
            layers, took = prefill(model, ids, device)
            if layers is None:
                return None
            caches.append(layers)
            seconds.append(took)
        cached = [len(ids) - 1 for ids in ids_list]
        cache = DynamicCache(merge_left_padded(caches, cached), config=model.config)
    del caches
    width = max(len(ids) for ids in ids_list)
    input_ids = torch.tensor([[pad_id] * (width - len(ids)) + ids for ids in ids_list], device=device)
    mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in ids_list], device=device)
    return Prefilled(input_ids, mask, cache, tuple(seconds))
