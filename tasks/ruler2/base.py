"""What the RULER v2 generators share: one user message, no answer prefix, and exact fitting over haystack units.

NeMo-Skills finds one haystack size per task and length by a binary search on the first sample, then shrinks it for
any sample that overflows. Here every sample gets the largest haystack that fits it (core.fitting.fit_units over the
sample's own rendered prompt, chat template included). As the official code ran, the prompt fills the length and
the answer is generated past it (the model's context must hold length + tokens_to_generate); `prompt_fills_length:
false` keeps prompt + tokens_to_generate within the length, as everywhere else in ctxbench (and as the official help
text says).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from pydantic import Field

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.fitting import Fitted, fit_units
from ctxbench.tasks.base import Task, TaskArgs, sample_seed


class Ruler2Args(TaskArgs):
    tokens_to_generate: int = Field(128, ge=1, description="the answer budget: generated past the length by default, "
                                                           "inside it with prompt_fills_length false")
    prompt_fills_length: bool = Field(True, description="fill the whole length with the prompt and generate past it, as the "
                                                        "official code ran; false keeps prompt + answer within the length, as "
                                                        "its help text says")


def seven_digits(rng) -> str:
    """prepare_mmlu/prepare_qa's generate_random_number(): a random 7-digit index."""
    return str(rng.randint(10**6, 10**7 - 1))


def unit_rng(seed: int, n: int):
    """The RNG of one candidate haystack size: a layout depends on the sample and n only, never on the fit's path."""
    import random

    return random.Random(sample_seed("ruler2-layout", seed, n))


class Ruler2Task(Task):
    """A RULER v2 task: its text is the user message (NeMo-Skills' generic/default prompt), scored by an official metric."""

    category = "retrieval"

    def render(self, ctx: GenContext, text: str):
        return ctx.renderer.render(text, "")

    @property
    def past_length(self) -> int:
        return self.args.tokens_to_generate if self.args.prompt_fills_length else 0

    def budget(self, length: int) -> int:
        """Prompt tokens a sample may take."""
        return length if self.args.prompt_fills_length else length - self.args.tokens_to_generate

    def fit(self, ctx: GenContext, *, length: int, build: Callable[[int], tuple], estimate: Callable[[int], float],
            max_units: int, min_units: int) -> Fitted:
        """The largest n <= max_units whose prompt fits; estimate(n) predicts the tokens n haystack units add."""
        return fit_units(budget=self.budget(length), build=build, estimate=estimate, count=ctx.count, count_short=ctx.count_short,
                         state=self.fit_state(ctx, length), max_units=max_units, min_units=min_units, what=self.name)


def growing_costs(ctx: GenContext, piece: Callable[[int], str], budget: int, limit: int | None = None) -> np.ndarray:
    """Cumulative token costs (cum[0] = 0) of pieces 0, 1, ... until they pass the budget (or limit pieces)."""
    costs: list[np.ndarray] = []
    total, n, chunk = 0, 0, 64
    while total <= budget * 1.1 + 64 and (limit is None or n < limit):
        stop = n + chunk if limit is None else min(n + chunk, limit)
        part = ctx.piece_counts([piece(i) for i in range(n, stop)])
        costs.append(part)
        total += int(part.sum())
        n, chunk = stop, min(chunk * 2, 8192)
    return np.concatenate([[0.0], np.cumsum(np.concatenate(costs)).astype(float)]) if costs else np.zeros(1)
