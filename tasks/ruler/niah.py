"""RULER needle-in-a-haystack: the 8 retrieval tasks (paper Table 5), with optional depth control."""

from __future__ import annotations

import random
import uuid
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.fitting import fit_units
from ctxbench.tasks.base import Task, TaskArgs, check_depths
from ctxbench.tasks.haystacks import (
    NOISE,
    essay_files,
    essay_haystack,
    essays_path,
    nearest_boundary,
    wonderwords_lists,
)

TEMPLATE = (
    "Some special magic {type_v} are hidden within the following text. Make sure to memorize it. "
    "I will quiz you about the {type_v} afterwards.\n{context}\n"
    "What are all the special magic {type_v} for {query} mentioned in the provided text?"
)
ANSWER_PREFIX = " The special magic {type_v} for {query} mentioned in the provided text are"
NEEDLE = "One of the special magic {type_v} for {key} is: {value}."
DEFAULT_DEPTHS = np.round(np.linspace(0, 100, num=40, endpoint=True)).astype(int)  # the reference's 40 depths


class NiahArgs(TaskArgs):
    haystack: Literal["essay", "noise", "needle"] = Field("essay", description="essay: Paul Graham essays; noise: repeated filler; needle: all distractor needles")
    key_type: Literal["words", "numbers", "uuids"] = Field("words", description="type of the needle keys")
    value_type: Literal["words", "numbers", "uuids"] = Field("numbers", description="type of the needle values")
    num_keys: int = Field(1, ge=1, description="needles with distinct keys (distractors when > num_queries)")
    num_values: int = Field(1, ge=1, description="values per key; all must be returned")
    num_queries: int = Field(1, ge=1, description="keys asked about; num_keys is raised to at least this")
    depths: list[float] | None = Field(None, description="depth (percent of context) of each needle; random as in the reference when unset")
    essays: str | None = Field(None, description="directory of .txt files or a text/JSON file; default: data_dir/pg_essays or a one-time download")
    tokens_to_generate: int = Field(128, ge=1)
    template: str = TEMPLATE
    answer_prefix: str = ANSWER_PREFIX
    needle: str = Field(NEEDLE, description="needle sentence with {type_v}, {key} and {value} placeholders")

    @model_validator(mode="after")
    def _check(self):
        check_depths(self.depths, max(self.num_keys, self.num_queries) * self.num_values, "needle")
        if self.essays is not None and self.haystack != "essay":
            raise ValueError(f"essays: only read with haystack: essay (this task's haystack is {self.haystack})")
        return self


def _random_value(kind: str, rng, words: dict[str, list[str]]) -> str:
    if kind == "numbers":
        return str(rng.randint(10**6, 10**7 - 1))
    if kind == "uuids":
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    return f"{rng.choice(words['adjective'])}-{rng.choice(words['noun'])}"


class Niah(Task):
    Args = NiahArgs
    category = "retrieval"
    summary = "needle in a haystack: {haystack} haystack, {key_type} keys -> {value_type}; {num_keys} keys, {num_values} values, {num_queries} queries"

    def data_files(self, ctx: GenContext):
        return essay_files(essays_path(self.args.essays, ctx.data_dir)) if self.args.haystack == "essay" else []

    def prepare(self, ctx: GenContext) -> None:
        if self.args.haystack == "essay":
            essay_haystack(ctx, self.args.essays)

    def data_needs(self) -> str:
        return "pg_essays/ (Paul Graham essays; downloaded once if no --data-dir)" if self.args.haystack == "essay" else "none (generated)"
    metric = "string_match_all"

    def _texts(self, query: str) -> tuple[str, str, str]:
        a = self.args
        template, prefix, type_v = a.template, a.answer_prefix, a.value_type
        if a.num_values * a.num_queries == 1:  # the reference singularises the whole template
            def one(t: str) -> str:
                return t.replace("Some", "A").replace("are all", "is").replace("are", "is").replace("answers", "answer")

            template, prefix, type_v = one(template), one(prefix), type_v[:-1]
        return template, prefix.format(type_v=type_v, query=query), type_v

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext):
        a = self.args
        rng, nrng = self.rngs(length, index, seed)
        words = wonderwords_lists()
        num_keys = max(a.num_keys, a.num_queries)
        keys: list[str] = []
        while len(keys) < num_keys:
            k = _random_value(a.key_type, rng, words)
            if k not in keys:
                keys.append(k)
        values = [[_random_value(a.value_type, rng, words) for _ in range(a.num_values)] for _ in keys]
        needles = [a.needle.format(type_v=a.value_type, key=k, value=v) for k, vs in zip(keys, values) for v in vs]
        rng.shuffle(needles)
        queried = rng.sample(range(num_keys), a.num_queries)
        queries = [keys[i] for i in queried]
        answers = [v for i in queried for v in values[i]]
        query = ", ".join(queries[:-1]) + ", and " + queries[-1] if len(queries) > 1 else queries[0]
        template, prefix, type_v = self._texts(query)
        head, tail = (part.format(type_v=type_v, query=query) for part in template.split("{context}"))

        budget = length - a.tokens_to_generate
        needle_costs = ctx.piece_counts([" " + x for x in needles]).astype(float)
        needle_cost = float(needle_costs.sum())
        if a.depths is not None:
            depths = list(a.depths) * (len(needles) if len(a.depths) == 1 else 1)
        else:
            depths = None

        if a.haystack == "essay":
            hay = essay_haystack(ctx, a.essays)
            if depths is None:
                depths = [float(d) for d in rng.sample(list(DEFAULT_DEPTHS), len(needles))]

            def build(n: int):
                bounds = hay.boundaries(n)
                positions = hay.tokens(bounds)
                total = float(hay.tokens(n))
                cuts = sorted((nearest_boundary(bounds, positions, d / 100 * total), i) for i, d in enumerate(depths))
                pieces, last, realised, inserted = [], 0, [], 0.0
                chunk = hay.take(n)
                for cut, i in cuts:
                    pieces.append(" ".join(chunk[last:cut]))
                    before = float(hay.tokens(cut)) + inserted
                    realised.append(100 * before / (total + needle_cost) if total else 0.0)
                    pieces.append(needles[i])
                    inserted += needle_costs[i]
                    last = cut
                pieces.append(" ".join(chunk[last:]))
                context = " ".join(p for p in pieces if p)
                return ctx.renderer.render(head + context + tail, prefix), realised

            est = lambda n: float(hay.tokens(n)) + needle_cost  # noqa: E731
            fitted = fit_units(budget=budget, build=build, estimate=est, count=ctx.count, count_short=ctx.count_short, state=self.fit_state(ctx, length),
                               max_units=int(budget * 2), what=self.name)
        else:
            fractions = sorted(rng.random() for _ in needles) if depths is None else [d / 100 for d in depths]
            if a.haystack == "noise":
                line_cost = float(ctx.cached(("noise-cost",), lambda: ctx.piece_counts(["\n" + NOISE])[0]))
                lines_for = lambda n: [NOISE] * n  # noqa: E731
            else:
                pool, pool_cum = self._distractors(ctx, rng, words, budget, set(keys))
                lines_for = lambda n: pool[:n]  # noqa: E731
            order = np.argsort(fractions, kind="stable")

            def build(n: int):
                lines = list(lines_for(n))
                realised = [0.0] * len(needles)
                total = n + len(needles)
                for rank, i in enumerate(order):  # ascending: needle of rank r lands at pos + r
                    at = min(n, int(round(fractions[i] * n))) + rank
                    lines.insert(at, needles[i])
                    realised[i] = 100 * at / total
                return ctx.renderer.render(head + "\n".join(lines) + tail, prefix), realised

            if a.haystack == "noise":
                est = lambda n: n * line_cost + needle_cost  # noqa: E731
                max_units = int(budget / max(line_cost, 1.0)) + 8
            else:
                est = lambda n: float(pool_cum[min(n, len(pool))]) + needle_cost  # noqa: E731
                max_units = len(pool)
            fitted = fit_units(budget=budget, build=build, estimate=est, count=ctx.count, count_short=ctx.count_short, state=self.fit_state(ctx, length),
                               max_units=max_units, what=self.name)
        return self.make_sample(length=length, index=index, text=fitted.text, tokens=fitted.tokens, answers=answers,
                                depths=fitted.extra, meta={"haystack_units": fitted.n})

    def _distractors(self, ctx: GenContext, rng, words, budget: int, taken: set[str]):
        """A per-sample pool of distractor needles with distinct keys, and the exact token cost of each line."""
        a = self.args
        fixed = random.Random(0)  # not the sample's rng: the probe runs once, and must not shift later draws
        probe = ctx.cached(("needle-line", a.key_type, a.value_type), lambda: float(np.mean(ctx.piece_counts(
            ["\n" + NEEDLE.format(type_v=a.value_type, key=_random_value(a.key_type, fixed, words), value=_random_value(a.value_type, fixed, words)) for _ in range(64)]))))
        size = int(budget / probe * 1.1) + 8
        pool, seen = [], set(taken)
        while len(pool) < size:
            k = _random_value(a.key_type, rng, words)
            if k in seen:
                continue
            seen.add(k)
            pool.append(NEEDLE.format(type_v=a.value_type, key=k, value=_random_value(a.value_type, rng, words)))
        costs = ctx.piece_counts(["\n" + line for line in pool])
        return pool, np.concatenate([[0], np.cumsum(costs)])
