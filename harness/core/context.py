"""The generation context: what a task's generator needs besides its own arguments.

It lives in the core because the run loop builds it and tasks consume it; caches live here, not in globals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ctxbench.harness.core.fitting import FitState, check_mode
from ctxbench.harness.core.prompting import PromptRenderer, Rendered, token_counts

PIECE_BATCH = 8192  # pieces per tokenizer call in piece_counts: bounds the memory one call holds


@dataclass
class GenContext:
    """Everything a generator needs besides its own arguments; caches live here, not in globals."""

    tokenizer: Any
    renderer: PromptRenderer
    data_dir: Path | None = None
    fit_states: dict[tuple, FitState] = field(default_factory=dict)
    memo: dict[tuple, Any] = field(default_factory=dict)
    full_tokenizations: int = 0
    verify: str = "fast"  # or "full": tokenize every prompt in full (see core.fitting for what each guarantees)

    def __post_init__(self):
        self.verify = check_mode(self.verify)

    def count(self, rendered: Rendered) -> int:
        self.full_tokenizations += 1
        return self.renderer.count(rendered)

    def count_short(self, rendered: Rendered) -> int:
        """Tokens of a short prompt (the fixed part of a sample, without its haystack)."""
        return self.renderer.count(rendered)

    def piece_counts(self, pieces: list[str]) -> np.ndarray:
        """Token counts of many short pieces in one batched call (no special tokens)."""
        if not pieces:
            return np.zeros(0, dtype=np.int64)
        if len(pieces) > PIECE_BATCH:
            # bounded batches: one call over 10^5+ pieces (the additivity check's every essay boundary) holds an
            # Encoding per piece at once, hundreds of MB that the process keeps as its peak RSS
            return np.concatenate([self.piece_counts(pieces[i:i + PIECE_BATCH]) for i in range(0, len(pieces), PIECE_BATCH)])
        return np.array(token_counts(self.tokenizer, pieces, add_special_tokens=False), dtype=np.int64)

    def cached(self, key: tuple, make):
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]
