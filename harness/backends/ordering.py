"""Request order for prefix caches: put prompts that share a prefix next to each other.

Serving engines with prefix caching (vLLM's automatic prefix caching, SGLang's radix cache) skip the
prefill of any block of tokens already in the cache. A long-context suite is full of shared prefixes:
the cells of a depth grid share the haystack up to the first needle, several questions about one
document share the document, and prompts of one task share the instructions. The cache is finite, so
what counts is that a prompt's prefix was seen *recently*: sorting the token id lists
lexicographically places every prompt next to the one it shares most with (a depth-first walk of the
prefix trie), which maximises the summed prefix shared between neighbours.

`shared_prefix_fraction` measures an order: the fraction of prompt tokens that are found in a cache
that holds the last `window` prompts, counted in whole cache blocks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Tokens = Sequence[int]


def prefix_order(seqs: Sequence[Tokens] | Sequence[str]) -> list[int]:
    """A permutation of range(len(seqs)) that puts prompts sharing a prefix next to each other.

    Lexicographic order of the token ids (or of the text). Stable: equal prompts keep their order.
    """
    keyed = [list(s) if not isinstance(s, (list, str)) else s for s in seqs]
    return sorted(range(len(seqs)), key=keyed.__getitem__)


def common_prefix(a: Tokens | np.ndarray, b: Tokens | np.ndarray) -> int:
    """Number of leading tokens a and b share."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    x = np.asarray(a[:n])
    y = np.asarray(b[:n])
    diff = np.flatnonzero(x != y)
    return int(diff[0]) if diff.size else n


def shared_prefix_fraction(seqs: Sequence[Tokens], order: Sequence[int] | None = None, *, window: int = 1,
                           block_size: int = 16) -> float:
    """Fraction of all prompt tokens a prefix cache can reuse when prompts are sent in `order`.

    Model: the cache holds the last `window` prompts (window=1: only the previous one), and reuse is
    counted in whole blocks of `block_size` tokens, as vLLM's paged KV cache hashes full blocks. The
    first prompt is always a miss. 1.0 would mean no prefill at all.
    """
    order = list(range(len(seqs))) if order is None else list(order)
    if sorted(order) != list(range(len(seqs))):
        raise ValueError("order must be a permutation of range(len(seqs))")
    arrays = [np.asarray(s, dtype=np.int64) for s in seqs]
    total = sum(len(a) for a in arrays)
    if total == 0:
        return 0.0
    reused = 0
    for k, i in enumerate(order):
        best = 0
        for j in order[max(0, k - window):k]:
            best = max(best, common_prefix(arrays[i], arrays[j]))
        # a prompt cannot reuse its own last token: the engine must compute logits for it
        best = min(best, len(arrays[i]) - 1)
        reused += (best // block_size) * block_size
    return reused / total


def split_balanced(order: Sequence[int], weights: Sequence[int], parts: int) -> list[list[int]]:
    """Cut an order into `parts` contiguous runs of about equal total weight (for data-parallel engines).

    Contiguous runs keep prefix groups together, so each engine still reuses its own cache.
    """
    order = list(order)
    if parts <= 1 or not order:
        return [order] + [[] for _ in range(max(parts, 1) - 1)]
    total = float(sum(weights[i] for i in order)) or 1.0
    out: list[list[int]] = [[] for _ in range(parts)]
    acc = 0.0
    for i in order:
        part = min(parts - 1, int(acc * parts / total))
        out[part].append(i)
        acc += weights[i]
    return out
