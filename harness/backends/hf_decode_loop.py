"""Greedy decode of a batch that drops each row as it finishes (CPU batched decode, issue 35 item 4).

`generate()` steps a batch until its longest answer ends: one 128-token answer keeps seven finished rows stepping,
each step at up to 2.6x the cost of a step for one row on a 2-core CPU. This loop takes the same inputs as the
batched path hands generate() (left-padded ids and mask, and the merged cache of all but the last prompt tokens,
hf_batched.prefill_batch), takes the argmax of each step's last logits as generate()'s greedy search does, and
removes a row from the ids, the mask and every cache layer once it emits a stop token or reaches its own answer
budget; the pad columns no live row needs any more are cut from the left. Positions come from the mask as
generate() derives them, so each row sees the keys and positions it had alone: answers equal one-at-a-time decoding
up to float rounding, i.e. except on logit ties (tests/test_decode_loop.py).

Only plain greedy search takes this path (`plain_greedy`): sampling, thinking budgets and a generation config with
logits processors of its own (repetition penalty, forced or suppressed tokens, a minimum length) keep generate().
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ctxbench.harness.backends.hf_batched import cache_kwarg

NEUTRAL = {  # generation-config fields that add a logits processor to greedy search unless left at these values
    "repetition_penalty": (None, 1.0), "no_repeat_ngram_size": (None, 0), "encoder_no_repeat_ngram_size": (None, 0),
    "min_length": (None, 0), "min_new_tokens": (None, 0), "bad_words_ids": (None,), "suppress_tokens": (None,),
    "begin_suppress_tokens": (None,), "forced_bos_token_id": (None,), "forced_eos_token_id": (None,),
    "sequence_bias": (None,), "exponential_decay_length_penalty": (None,), "renormalize_logits": (None, False),
}


def plain_greedy(model: Any, settings: dict[str, Any]) -> bool:
    """Whether generate() would run plain greedy search with these settings (hf_decoding.sampling's)."""
    if settings.get("do_sample"):
        return False
    config = getattr(model, "generation_config", None)
    return all(getattr(config, name, None) in neutral for name, neutral in NEUTRAL.items())


@dataclass(frozen=True)
class Decoded:
    """Each row's generated ids (its stop token included, as generate() returns it), when the loop started, when
    the first step's logits arrived (the end of the prefill), when the last row finished, and each row's share of
    the later steps it took part in (a finished row no longer pays for the others)."""

    tokens: list[list[int]]
    start: float
    first: float
    end: float
    decode_seconds: list[float]


def _forward(model: Any, args: dict[str, Any]) -> Any:
    try:
        return model(**args, logits_to_keep=1)
    except TypeError:  # a model without logits_to_keep
        return model(**args)


def _keep_rows(cache: Any, keep: list[int], mask: Any) -> Any:
    """Drop the finished rows from every cache layer, then the pad columns no remaining row needs; the new mask."""
    import torch

    index = torch.tensor(keep, device=mask.device)
    cache.batch_select_indices(index)
    mask = mask.index_select(0, index)
    unused = int((mask.shape[1] - mask.sum(-1)).min())  # left pads shared by every remaining row
    layers = getattr(cache, "layers", None) or []
    if unused > 0 and layers and all(type(layer).__name__ == "DynamicLayer" for layer in layers):
        for layer in layers:
            layer.keys, layer.values = layer.keys[..., unused:, :], layer.values[..., unused:, :]
        mask = mask[:, unused:]
    return mask


def decode_rows(model: Any, inputs: dict[str, Any], limits: list[int], stop_ids: set[int]) -> Decoded:
    """Greedy decode of `inputs` (generate()'s: input_ids, attention_mask, and optionally the cache of all but the
    last columns), row i for at most limits[i] tokens, each row leaving the batch as it finishes."""
    import torch

    key = cache_kwarg(model)
    mask, cache = inputs["attention_mask"], inputs.get(key)
    cached = cache.get_seq_length() if cache is not None else 0
    step = inputs["input_ids"][:, cached:]
    positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 1)[:, cached:]
    rows, tokens = list(range(len(limits))), [[] for _ in limits]
    spent = [0.0] * len(limits)
    start, first = time.perf_counter(), None
    with torch.inference_mode():
        while rows:
            began = time.perf_counter()
            args = {"input_ids": step, "attention_mask": mask, "position_ids": positions, "use_cache": True}
            out = _forward(model, {**args, **({key: cache} if cache is not None else {})})
            cache = getattr(out, "past_key_values", None) if getattr(out, "cache", None) is None else out.cache
            chosen = out.logits[:, -1, :].float().argmax(-1)
            now = time.perf_counter()
            share, first = (0.0 if first is None else (now - began) / len(rows)), first or now
            keep = []
            for b, token in enumerate(chosen.tolist()):
                i = rows[b]
                tokens[i].append(token)
                spent[i] += share
                if token not in stop_ids and len(tokens[i]) < limits[i]:
                    keep.append(b)
            if not keep:
                break
            if len(keep) < len(rows):
                mask, chosen, rows = _keep_rows(cache, keep, mask), chosen[keep], [rows[b] for b in keep]
            mask = torch.cat([mask, mask.new_ones((len(rows), 1))], dim=-1)
            step, positions = chosen[:, None], mask.long().sum(-1, keepdim=True) - 1
    return Decoded(tokens, start, first or start, time.perf_counter(), spent)
