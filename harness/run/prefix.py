"""Shared-context scheduling: the schedule orders a chunk's samples so that those sharing a context are back to back,
and declares on each the characters of its prompt it shares with the one before it.

Many suites repeat one long context: the cells of a depth grid share the haystack up to the shallower needle, the
questions about one document share the document, and every prompt of a task shares its template. Sorting the prompts
lexicographically puts each next to the one it shares most with (a depth-first walk of the prefix trie), which
maximises the summed prefix shared between neighbours. The shared length is computed here, once per sample, from the
text (no tokenizer: a chunk of 128K prompts costs a few memory compares per sample); a backend turns the characters
into its own units (the hf backend into tokens of its KV cache, the openai backend into cache breakpoints) and never
searches for shared prefixes itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ctxbench.harness.core.types import Sample

FIRST_BLOCK = 256  # characters compared at once, doubling: long shared prefixes cost few slice compares
LAST_BLOCK = 1 << 16


def common_chars(a: str, b: str) -> int:
    """How many leading characters a and b share: whole blocks compared in C, then a binary search in the first
    block that differs."""
    n, at, block = min(len(a), len(b)), 0, FIRST_BLOCK
    while at < n:
        end = min(n, at + block)
        if a[at:end] != b[at:end]:
            lo, hi = at, end - 1  # the first difference is in [at, end): the prefix is at least lo
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if a[at:mid] == b[at:mid]:
                    lo = mid
                else:
                    hi = mid - 1
            return lo
        at, block = end, min(block * 2, LAST_BLOCK)
    return n


def share_prefixes(samples: Sequence[Sample]) -> list[Sample]:
    """The samples in prompt order, each declaring (`shared_prefix`) the characters it shares with the one before it.

    Stable: equal prompts keep their order. The first sample declares 0."""
    ordered = sorted(samples, key=lambda s: s.prompt)
    out: list[Sample] = []
    for before, s in zip([None, *ordered], ordered):
        shared = common_chars(before.prompt, s.prompt) if before is not None else 0
        out.append(s if s.shared_prefix == shared else dataclasses.replace(s, shared_prefix=shared))
    return out


def share_asks(asks: Sequence[tuple[Any, Sample, int]]) -> list[tuple[Any, Sample, int]]:
    """(task, sample, repeat) asks in prompt order with each sample's shared prefix declared (share_prefixes); the
    repeats of one sample stay together."""
    groups: dict[str, list[tuple[Any, Sample, int]]] = {}
    for ask in asks:
        groups.setdefault(ask[1].id, []).append(ask)
    shared = share_prefixes([group[0][1] for group in groups.values()])
    return [(task, s, r) for s in shared for task, _, r in groups[s.id]]
