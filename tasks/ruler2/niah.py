"""RULER v2 basic NIAH (mk_niah_basic, mv_niah_basic): prepare_niah.py with a haystack of needle-shaped lines.

One key (an adjective-noun pair from wonderwords' lists) holds num_values 10-digit values; every other line is a
distractor "One of the special magic numbers for <key> is: <value>." With one value each distractor has its own key;
with several, the distractor keys come in groups of num_values lines, shuffled, as the official code builds them. The
needles go in at random line positions (distinct, inserted from the last), and the question asks for the key's values.
"""

from __future__ import annotations

import math
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


def distractor_lines(rng, n: int, num_values: int, digits: int) -> list[str]:
    """prepare_niah.py's needle haystack of n lines (keys in groups of num_values when num_values > 1)."""
    if num_values == 1:
        return [NIAH_LINE.format(type_v="numbers", key=random_key(rng), value=number(rng, digits)) for _ in range(n)]
    values = [number(rng, digits) for _ in range(n)]
    keys = ([random_key(rng) for _ in range(math.ceil(n / num_values))] * num_values)[:n]
    lines = [NIAH_LINE.format(type_v="numbers", key=k, value=v) for k, v in zip(keys, values)]
    rng.shuffle(lines)
    return lines


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

        def build(n: int):
            r = unit_rng(layout_seed, n)
            lines = insert_needles(r, distractor_lines(r, n, a.num_values, a.num_digits), needles)
            return self.render(ctx, niah_text(lines, key, single=single)), []

        budget = self.budget(length)
        probe = distractor_lines(unit_rng(layout_seed, -1), 64, a.num_values, a.num_digits)
        per_line = float(ctx.piece_counts(["\n" + x for x in probe]).mean())
        units = int(budget / max(per_line * 0.5, 1.0)) + 8
        cum = np.arange(units + 1, dtype=float) * per_line
        fitted = self.fit(ctx, length=length, build=build, cum=cum, min_units=len(needles))
        return self.make_sample(length=length, index=index, text=fitted.text, tokens=fitted.tokens, answers=values,
                                meta={"haystack_units": fitted.n})
