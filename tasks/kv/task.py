"""JSON key-value retrieval (Liu et al. 2023, "Lost in the Middle"; used by SPLICE, Figure 3).

A JSON object of random UUID keys -> UUID values; the gold key sits at a controlled position and the
question asks for its value. Either a fixed number of pairs (75, 140, 300 in the papers) or as many
as fit the target length. A sample's index picks the gold position: positions[index % len(positions)].
"""

from __future__ import annotations

import json
import random

import numpy as np
from pydantic import Field, field_validator

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.fitting import fit_units
from ctxbench.harness.core.registry import register
from ctxbench.tasks.base import Task, TaskArgs, check_points, points
from ctxbench.tasks.ruler.niah import random_value

TEMPLATE = 'Extract the value corresponding to the specified key in the JSON object below.\n\nJSON data:\n{context}\n\nKey: "{key}"\nCorresponding value:'


class KVArgs(TaskArgs):
    num_pairs: int | None = Field(None, ge=2, description="pairs in the object (75, 140, 300 in the papers); unset = fill the length")
    positions: list[float] | int = Field(5, description="gold positions as fractions 0..1 of the object, or N evenly spaced")
    samples_per_position: int = Field(1, ge=1)
    tokens_to_generate: int = Field(48, ge=1, description="a UUID is ~25 tokens")
    template: str = TEMPLATE
    answer_prefix: str = ""

    @field_validator("positions")
    @classmethod
    def _positions(cls, v):
        return check_points(v, top=1, name="positions", unit="a fraction (0 = first pair, 1 = last)")

    def position_list(self) -> list[float]:
        return points(self.positions, top=1)


def random_uuid(rng) -> str:
    return random_value("uuids", rng, {})


def _piece(key: str, value: str) -> str:
    """One record as the tokenizer sees it in context: cut after the newline, a pre-token boundary."""
    return " " + json.dumps(key) + ": " + json.dumps(value) + ",\n"


def format_records(records: list[tuple[str, str]]) -> str:
    """The lost-in-the-middle JSON layout: one pair per line, inside braces."""
    return "{" + ",\n ".join(json.dumps(k) + ": " + json.dumps(v) for k, v in records) + "}"


class KVRetrieval(Task):
    Args = KVArgs
    category = "retrieval"
    summary = "JSON key-value retrieval by gold position (lost in the middle)"
    metric = "string_match_all"

    def samples_per_length(self, ctx: GenContext | None = None) -> int:
        return len(self.args.position_list()) * self.args.samples_per_position

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext):
        a = self.args
        grid = a.position_list()
        frac = grid[index % len(grid)]
        rng, _ = self.rngs(length, index, seed)  # every index draws its own pairs: independent samples, no cluster
        budget = length - a.tokens_to_generate
        probe = random.Random(0)  # a fixed probe, so the sample's own rng is untouched
        per_pair = ctx.cached(("kv-pair-cost",), lambda: float(np.mean(ctx.piece_counts(
            [_piece(random_uuid(probe), random_uuid(probe)) for _ in range(64)]))))
        cap = a.num_pairs or int(budget / per_pair * 1.2) + 8
        pairs = [(random_uuid(rng), random_uuid(rng)) for _ in range(cap)]
        costs = ctx.piece_counts([_piece(k, v) for k, v in pairs])
        cum = np.concatenate([[0], np.cumsum(costs)])
        gold_key, gold_value = pairs[0]

        def build(n: int):
            n = max(n, 1)
            pos = min(n - 1, int(round(frac * (n - 1))))
            records = pairs[1:n]
            records.insert(pos, (gold_key, gold_value))
            text = a.template.format(context=format_records(records), key=gold_key)
            return ctx.renderer.render(text, a.answer_prefix), pos

        if a.num_pairs:
            rendered, pos = build(a.num_pairs)
            tokens = ctx.count(rendered)
            if tokens > budget:
                raise ConfigError(f"{self.name}: {a.num_pairs} pairs need {tokens + a.tokens_to_generate} tokens > length {length}; raise the length")
            n = a.num_pairs
        else:
            fitted = fit_units(budget=budget, build=build, estimate=lambda n: float(cum[min(max(n, 1), cap)]), count=ctx.count,
                               count_short=ctx.count_short, state=self.fit_state(ctx, length), max_units=cap, min_units=2, what=self.name)
            rendered, tokens, n, pos = fitted.text, fitted.tokens, fitted.n, fitted.extra
        depth = 100 * pos / max(n - 1, 1)
        return self.make_sample(length=length, index=index, text=rendered, tokens=tokens, answers=[gold_value], depths=[depth],
                                meta={"position": pos, "num_pairs": n, "depth": round(100 * frac, 2)})


@register("task", "kv/retrieval", args=KVArgs, effective_length="ruler")
def kv_retrieval(**args):
    return KVRetrieval("kv/retrieval", KVArgs(**args))
