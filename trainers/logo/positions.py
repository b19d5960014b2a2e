"""Synthetic position ids (Eq. 4, App. D): a k-token sample trained as if it spanned a K-token window.

Layout of every response of one sample: template head (s tokens) | N chunk runs | tail (question and answer
prefix) | answer. The head keeps positions 0..s-1. The K - k spare positions are shared out as one slot of
slack per chunk, Δ = ⌊(K - k) / N⌋ each (the last slot also takes the remainder, so every position below K
can be drawn); chunk c lives in slot c, which starts c·Δ after its real offset and holds its L_c tokens
plus Δ_c spare positions. Eq. 4 writes the chunk index as `i mod |C_i|`; it means ⌊i / |C_i|⌋ (as printed
the bias is not monotone in i).
- continuous (App. D, Fig. 10a): the whole chunk shifts by one bias b_c = c·Δ + u_c, u_c ~ U{0..Δ_c}:
  positions stay +1 inside the chunk;
- sparse (Fig. 10b): the chunk's tokens take L_c sorted distinct positions drawn uniformly from its slot.
The tail and the answer follow the last chunk's last position contiguously, so the answers of all M + 1
responses start at the same position, and the longest one ends below K. Modes mix 9:1 (continuous:sparse).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

Mode = Literal["continuous", "sparse"]


@dataclass(frozen=True)
class Layout:
    """Token counts of the parts of one sample's responses."""

    head: int
    chunks: tuple[int, ...]
    tail: int
    answers: tuple[int, ...]

    @property
    def prefix(self) -> int:
        """Tokens before the answer (shared by every response)."""
        return self.head + sum(self.chunks) + self.tail

    @property
    def real_length(self) -> int:
        """k: the longest response's real length."""
        return self.prefix + max(self.answers, default=0)


def slack(layout: Layout, window: int) -> int:
    """Δ = ⌊(K - k) / N⌋: spare positions per chunk slot (< 1 means the window leaves no room to spread)."""
    return (window - layout.real_length) // max(1, len(layout.chunks))


def choose_mode(rng: np.random.Generator, sparse_fraction: float) -> Mode:
    return "sparse" if rng.random() < sparse_fraction else "continuous"


def prefix_positions(layout: Layout, window: int, mode: Mode, rng: np.random.Generator) -> np.ndarray:
    """Position ids of the shared prefix (head, chunks, tail); the answer continues from the last one + 1."""
    n = len(layout.chunks)
    delta = slack(layout, window)
    if delta < 1:
        raise ValueError(f"window {window} leaves Δ={delta} < 1 for a sample of {layout.real_length} real tokens "
                         f"in {n} chunks")
    spare = [delta] * n
    spare[-1] += (window - layout.real_length) - delta * n  # the remainder: every position < K stays reachable
    parts = [np.arange(layout.head, dtype=np.int64)]
    offset = layout.head
    for c, (length, extra) in enumerate(zip(layout.chunks, spare)):
        start = offset + c * delta  # slot c: [start, start + length + extra)
        if mode == "continuous":
            parts.append(start + int(rng.integers(0, extra + 1)) + np.arange(length, dtype=np.int64))
        else:
            parts.append(start + np.sort(rng.choice(length + extra, size=length, replace=False)).astype(np.int64))
        offset += length
    last = int(parts[-1][-1]) if len(parts[-1]) else layout.head - 1
    parts.append(last + 1 + np.arange(layout.tail, dtype=np.int64))
    return np.concatenate(parts)


def response_positions(prefix: np.ndarray, answer_tokens: int) -> np.ndarray:
    """The prefix's positions, then the answer's, contiguous after the prefix's last."""
    start = int(prefix[-1]) + 1 if len(prefix) else 0
    return np.concatenate([prefix, start + np.arange(answer_tokens, dtype=np.int64)])
