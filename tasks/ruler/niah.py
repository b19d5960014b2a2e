"""RULER needle-in-a-haystack: the 8 retrieval tasks (paper Table 5), with optional depth control."""

from __future__ import annotations

import random
import uuid
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from ctxbench.harness.core.additivity import refused
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.fitting import fit_units
from ctxbench.tasks.base import Task, TaskArgs, check_depths, rendered_edges
from ctxbench.tasks.haystacks import (
    NOISE,
    EssayLayout,
    essay_files,
    essay_haystack,
    essays_path,
    line_costs,
    wonderwords_lists,
)
from ctxbench.tasks.ruler.needle_pool import NeedleLines

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


def random_value(kind: str, rng, words: dict[str, list[str]]) -> str:
    """A RULER key or value of `kind` (numbers, uuids, words), drawn from `rng`: shared by NIAH and KV retrieval."""
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

    def _draw(self, rng) -> tuple[list[str], list[str], list[str], str]:
        """(keys, needles in text order, answers, query text) of one sample."""
        a = self.args
        words = wonderwords_lists()
        num_keys = max(a.num_keys, a.num_queries)
        keys: list[str] = []
        while len(keys) < num_keys:
            k = random_value(a.key_type, rng, words)
            if k not in keys:
                keys.append(k)
        values = [[random_value(a.value_type, rng, words) for _ in range(a.num_values)] for _ in keys]
        needles = [a.needle.format(type_v=a.value_type, key=k, value=v) for k, vs in zip(keys, values) for v in vs]
        rng.shuffle(needles)
        queried = rng.sample(range(num_keys), a.num_queries)
        queries = [keys[i] for i in queried]
        answers = [v for i in queried for v in values[i]]
        query = ", ".join(queries[:-1]) + ", and " + queries[-1] if len(queries) > 1 else queries[0]
        return keys, needles, answers, query

    def _parts(self, query: str) -> tuple[str, str, str]:
        """(task text before the context, after it, answer prefix)."""
        template, prefix, type_v = self._texts(query)
        head, tail = (part.format(type_v=type_v, query=query) for part in template.split("{context}"))
        return head, tail, prefix

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext):
        a = self.args
        rng, nrng = self.rngs(length, index, seed)  # RULER: needles drawn per sample, independent: no cluster
        keys, needles, answers, query = self._draw(rng)
        head, tail, prefix = self._parts(query)
        budget = length - a.tokens_to_generate
        depths = None if a.depths is None else list(a.depths) * (len(needles) if len(a.depths) == 1 else 1)
        state = self.fit_state(ctx, length)

        if a.haystack == "essay":
            if depths is None:
                depths = [float(d) for d in rng.sample(list(DEFAULT_DEPTHS), len(needles))]
            layout = EssayLayout(self._essay(ctx), needles, depths, ctx)

            def build(n: int):
                context, realised = layout.context(n)
                return ctx.renderer.render(head + context + tail, prefix), realised

            fitted = fit_units(budget=budget, build=build, estimate=layout.estimate, count=ctx.count, count_short=ctx.count_short,
                               state=state, max_units=int(budget * 2), what=self.name)
        else:
            fractions = sorted(rng.random() for _ in needles) if depths is None else [d / 100 for d in depths]
            needle_cost = float(ctx.piece_counts(["\n" + x for x in needles]).sum())
            if a.haystack == "noise":
                alone, in_context = line_costs(ctx, NOISE)
                lines_for = lambda n: [NOISE] * n  # noqa: E731
                est = lambda n: n * in_context + needle_cost  # noqa: E731
                max_units = int(budget / max(min(alone, in_context), 1.0)) + 8
            else:
                pool, costs = self._distractors(ctx, nrng, budget, set(keys))
                pool_cum = np.concatenate([[0], np.cumsum(costs)])
                lines_for = lambda n: pool[:n]  # noqa: E731
                est = lambda n: float(pool_cum[min(n, len(pool))]) + needle_cost  # noqa: E731
                max_units = len(pool)
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

            fitted = fit_units(budget=budget, build=build, estimate=est, count=ctx.count, count_short=ctx.count_short, state=state,
                               max_units=max_units, what=self.name)
        return self.make_sample(length=length, index=index, text=fitted.text, tokens=fitted.tokens, answers=answers,
                                depths=fitted.extra, meta={"haystack_units": fitted.n})

    def _essay(self, ctx: GenContext):
        return essay_haystack(ctx, self.args.essays)

    def _lines(self) -> NeedleLines:
        a = self.args
        return NeedleLines(a.needle, a.value_type, a.key_type, a.value_type)

    def _distractors(self, ctx: GenContext, nrng, budget: int, taken: set[str]):
        """A per-sample pool of distractor needles with distinct keys, and the exact token cost of each line."""
        lines = self._lines()
        alone, in_context = ctx.cached(("needle-line-cost", self.args.needle, self.args.key_type, self.args.value_type),
                                       lambda: self._line_cost(ctx, lines))
        size = int(budget / min(alone, in_context) * 1.1) + 8
        return lines.pool(ctx, nrng, size, taken)

    @staticmethod
    def _line_cost(ctx: GenContext, lines: NeedleLines) -> tuple[float, float]:
        """Mean tokens of one needle line: stand-alone, and in a run of lines (smaller where merges cross lines)."""
        sample, _ = lines.pool(ctx, np.random.default_rng(0), 64, set())
        counts = ctx.piece_counts(["\n" + x for x in sample] + ["\n".join(sample)])
        return float(counts[:-1].mean()), float(counts[-1]) / len(sample)

    # ---- where the fast path may trust piece counts -----------------------------------------
    def boundary_probes(self, ctx: GenContext):
        """Sequences of every boundary this task's prompts contain (core.additivity), from fixed probe draws."""
        a = self.args
        rng, nrng = random.Random(0), np.random.default_rng(0)
        draws = [self._draw(rng) for _ in range(8)]
        needles = [x for _, ns, _, _ in draws for x in ns]
        edges = [rendered_edges(ctx, *self._parts(query)) for *_, query in draws]
        if any(e is None for e in edges):
            return refused("the template does not render the task text verbatim")
        if a.haystack == "essay":
            layout = EssayLayout(self._essay(ctx), needles, [0.0] * len(needles), ctx)
            probes: dict[str, list[list[str]]] = {}
            for head, tail in edges:
                for kind, seqs in layout.probes(nrng, head, tail, []).items():
                    probes.setdefault(kind, []).extend(seqs)
            return probes
        # lines: "\n".join(lines) after a head that ends with "\n" is the head without it + "\n" + line, ...
        if not all(self._parts(q)[0].endswith("\n") for *_, q in draws):
            return refused("the template's text before {context} does not end with a newline")
        if a.haystack == "noise":
            body = [NOISE] * 24
        else:
            body, _ = self._lines().pool(ctx, nrng, 24 * len(edges), set())
        seqs = []
        for j, (head, tail) in enumerate(edges):
            lines = body[24 * j: 24 * (j + 1)] if a.haystack == "needle" else body
            lines = list(lines)
            for k, x in enumerate(needles):
                lines.insert((5 * k + j) % len(lines), x)
            seqs.append([head[:-1]] + ["\n" + x for x in lines] + [tail])
        return {"lines, template edges": seqs}
