"""What every task shares: the generation context, seeding, and the registry hook."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from harness.fitting import FitState
from harness.prompting import PromptRenderer, Rendered
from harness.types import Sample


class TaskArgs(BaseModel):
    """Base of every task's arguments: unknown keys are errors, never silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass
class GenContext:
    """Everything a generator needs besides its own arguments; caches live here, not in globals."""

    tokenizer: Any
    renderer: PromptRenderer
    data_dir: Path | None = None
    fit_states: dict[tuple, FitState] = field(default_factory=dict)
    memo: dict[tuple, Any] = field(default_factory=dict)
    full_tokenizations: int = 0
    verify: str = "full"  # or "first": trust exact piece counts after the first sample (see FitState)

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
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is not None and hasattr(backend, "encode_batch_fast"):
            # the Rust tokenizer directly: same ids, about half the time (no Python-side conversion)
            enc = backend.encode_batch_fast(pieces, add_special_tokens=False)
            return np.fromiter((len(e.ids) for e in enc), dtype=np.int64, count=len(enc))
        ids = self.tokenizer(pieces, add_special_tokens=False)["input_ids"]
        return np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))

    def cached(self, key: tuple, make):
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]


def check_points(value, *, top: float, name: str, unit: str):
    """Validate a grid axis given as a count N (N evenly spaced points) or a list of values in [0, top]."""
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"{name}: give a positive count or a list of {unit}")
        return value
    if not value or any(not 0 <= v <= top for v in value):
        raise ValueError(f"{name}: each value must be {unit} between 0 and {top:g}")
    return value


def points(value, *, top: float) -> list[float]:
    """The grid points of an axis validated by check_points (a single point sits in the middle)."""
    if isinstance(value, int):
        return [float(x) for x in np.round(np.linspace(0, top, value), 4)] if value > 1 else [top / 2]
    return [float(v) for v in value]


def check_depths(depths: list[float] | None, n: int, per: str) -> None:
    """Optional needle depths: one for all, or one per needle; percentages."""
    if depths is None:
        return
    if len(depths) not in (1, n):
        raise ValueError(f"depths: give 1 or {n} values (one per {per}), got {len(depths)}")
    check_points(depths, top=100, name="depths", unit="a percentage")


def sample_seed(*parts: Any) -> int:
    """A seed that depends only on its parts, so generation order never changes a sample."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big")


class Task:
    """A task = arguments + generator + metric. Subclasses set Args and implement build_sample."""

    Args: ClassVar[type[TaskArgs]]
    category: ClassVar[str] = ""
    metric: ClassVar[str] = "string_match_all"

    def __init__(self, name: str, args: TaskArgs):
        self.name = name
        self.args = args

    @property
    def max_new_tokens(self) -> int:
        return self.args.tokens_to_generate  # type: ignore[attr-defined]

    def args_json(self) -> dict[str, Any]:
        return self.args.model_dump(mode="json")

    def rngs(self, length: int, index: int, seed: int) -> tuple[random.Random, np.random.Generator]:
        s = sample_seed(self.name, self.args_json(), length, index, seed)
        return random.Random(s), np.random.default_rng(s)

    def fit_state(self, ctx: GenContext, length: int) -> FitState:
        return ctx.fit_states.setdefault((self.name, json.dumps(self.args_json(), sort_keys=True), length), FitState(verify=ctx.verify))

    def make_sample(self, *, length: int, index: int, text: Rendered, tokens: int, answers, depths=(), meta=None) -> Sample:
        return Sample(
            task=self.name,
            length=length,
            index=index,
            prompt=text.text,
            answers=tuple(answers),
            prompt_tokens=tokens,
            max_new_tokens=self.max_new_tokens,
            depths=tuple(round(float(d), 2) for d in depths),
            metric=self.metric,
            add_special_tokens=text.add_special_tokens,
            user_text=text.user,
            answer_prefix=text.prefix,
            meta=meta or {},
        )

    def samples_per_length(self, ctx: GenContext | None = None) -> int | None:
        """How many samples this task has per length; None = as many as the suite asks for."""
        return None

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        raise NotImplementedError

    def score(self, prediction: str, sample: Sample) -> float:
        """Per-sample score in [0, 1]. Override for metrics that need more than the references."""
        from harness import registry

        return registry.get("metric", sample.metric)(prediction, sample.answers)
