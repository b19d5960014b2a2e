"""RULER v2 basic NIAH (mk_niah_basic, mv_niah_basic): prepare_niah.py with a haystack of needle-shaped lines.

One key (an adjective-noun pair from wonderwords' lists) holds num_values 10-digit values; every other line is a
distractor "One of the special magic numbers for <key> is: <value>." With one value each distractor has its own key;
with several, the distractor keys come in groups of num_values lines, shuffled, as the official code builds them. The
needles go in at random line positions (distinct, inserted from the last), and the question asks for the key's values.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from pydantic import Field

from ctxbench.harness.core.context import GenContext
from ctxbench.tasks.haystacks import wonderwords_lists
from ctxbench.tasks.ruler2.base import Ruler2Args, Ruler2Task, unit_rng
from ctxbench.tasks.ruler2.prompts import NIAH_LINE, niah_text


class NiahArgs(Ruler2Args):
    num_values: int = Field(1, ge=1, description="values of the asked key (mv_niah_basic: 4); all are expected")
    num_digits: int = Field(10, ge=1, le=30, description="digits of each value")


@lru_cache(maxsize=1)
def key_parts() -> tuple[list[str], list[str]]:
    """The adjectives and nouns of prepare_niah.py's words (every adjective-noun pair, a uniform choice among them)."""
    lists = wonderwords_lists()
    return sorted(set(lists["adjective"])), sorted(set(lists["noun"]))


def random_key(rng) -> str:
    """A uniform adjective-noun pair: the official random.choice over all pairs, without listing the millions of them."""
    adjectives, nouns = key_parts()
    return f"{rng.choice(adjectives)}-{rng.choice(nouns)}"


def number(rng, digits: int) -> str:
    return str(rng.randint(10 ** (digits - 1), 10**digits - 1))


@dataclass(frozen=True)
class Distractors:
    """prepare_niah.py's needle haystack, drawn once per sample as independent keys and values: n lines take the first
    n values and the first n keys (one value each) or the first ceil(n / num_values) keys, listed num_values times and
    cut to n, then shuffled, which is the official draw for n. Each line's tokens are known from its key's and value's,
    so the fit predicts a size's tokens exactly where the tokenizer is additive at the spaces around them."""

    keys: list[str]
    values: list[str]
    num_values: int
    key_costs: np.ndarray  # cumulative, cum[0] = 0: tokens of "\n" + a line with this key and a reference value
    value_costs: np.ndarray  # cumulative: the same with a reference key and this value
    reference: int  # tokens of "\n" + the line with the reference key and value

    def key_count(self, n: int) -> int:
        return n if self.num_values == 1 else math.ceil(n / self.num_values)

    def lines(self, rng, n: int) -> list[str]:
        k = self.key_count(n)
        keys = self.keys[:n] if self.num_values == 1 else (self.keys[:k] * self.num_values)[:n]
        lines = [NIAH_LINE.format(type_v="numbers", key=key, value=v) for key, v in zip(keys, self.values[:n])]
        if self.num_values > 1:
            rng.shuffle(lines)
        return lines

    def estimate(self, n: int) -> float:
        k = self.key_count(n)
        rounds, rest = divmod(n, k) if k else (0, 0)
        keys = rounds * self.key_costs[k] + self.key_costs[rest]  # keys 0..rest-1 appear once more than the others
        return float(keys + self.value_costs[n] - n * self.reference)


def distractors(ctx: GenContext, rng, units: int, num_values: int, digits: int) -> Distractors:
    values = [number(rng, digits) for _ in range(units)]
    keys = [random_key(rng) for _ in range(units if num_values == 1 else math.ceil(units / num_values))]
    ref_key, ref_value = "reference-key", "1" * digits

    def cum(pieces: list[str]) -> np.ndarray:
        return np.concatenate([[0.0], np.cumsum(ctx.piece_counts(pieces)).astype(float)])

    line = lambda k, v: "\n" + NIAH_LINE.format(type_v="numbers", key=k, value=v)  # noqa: E731
    return Distractors(keys, values, num_values, cum([line(k, ref_value) for k in keys]), cum([line(ref_key, v) for v in values]),
                       int(ctx.piece_counts([line(ref_key, ref_value)])[0]))


def insert_needles(rng, lines: list[str], needles: list[str]) -> list[str]:
    """Needles at distinct random positions, inserted from the last position down (prepare_niah.py)."""
    out = list(lines)
    for at, needle in zip(sorted(rng.sample(range(len(lines)), len(needles)), reverse=True), needles):
        out.insert(at, needle)
    return out


class Ruler2Niah(Ruler2Task):
    Args = NiahArgs
    metric = "ruler2/all"
    summary = "{name}: the {num_values} value(s) of one key among needle-shaped distractor lines (RULER v2)"
    data_source = "none (generated; wonderwords word lists, pinned)"

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext):
        a = self.args
        rng, _ = self.rngs(length, index, seed)  # every sample draws its own needles and haystack: independent, no cluster
        key = random_key(rng)
        values = [number(rng, a.num_digits) for _ in range(a.num_values)]
        needles = [NIAH_LINE.format(type_v="numbers", key=key, value=v) for v in values]
        rng.shuffle(needles)
        layout_seed = rng.getrandbits(64)
        single = a.num_values == 1

        budget = self.budget(length)
        probe = random.Random(0)
        shortest = ctx.piece_counts(["\n" + NIAH_LINE.format(type_v="numbers", key=random_key(probe), value=number(probe, a.num_digits))
                                     for _ in range(64)]).min()
        units = max(len(needles), int(budget / max(shortest * 0.8, 1.0)) + 8)  # more lines than can fit
        pool = distractors(ctx, random.Random(layout_seed), units, a.num_values, a.num_digits)

        def build(n: int):
            r = unit_rng(layout_seed, n)
            lines = insert_needles(r, pool.lines(r, n), needles)
            return self.render(ctx, niah_text(lines, key, single=single)), []

        fitted = self.fit(ctx, length=length, build=build, estimate=pool.estimate, max_units=units, min_units=len(needles))
        return self.make_sample(length=length, index=index, text=fitted.text, tokens=fitted.tokens, answers=values,
                                meta={"haystack_units": fitted.n})
