"""RULER variable tracking (multi-hop tracing): follow chains of assignments hidden in filler text.

A chain is `VAR X1 = 12345`, `VAR X2 = VAR X1`, ... inserted in order at random positions among
noise lines (or at sentence boundaries of the essays). The model must list every variable whose
value is the queried one. One solved example (3-letter names, about 500 tokens) precedes the task,
with names and value drawn fresh for every sample, as the current reference does.
"""

from __future__ import annotations

import random
import string
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from ctxbench.harness.core.additivity import refused
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.fitting import fit_units
from ctxbench.tasks.base import Task, TaskArgs, check_depths, rendered_edges
from ctxbench.tasks.haystacks import NOISE, EssayLayout, essay_files, essay_haystack, essays_path, line_costs

TEMPLATE = (
    "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\n"
    "Question: Find all variables that are assigned the value {query} in the text above."
)
ANSWER_PREFIX = (
    " Answer: According to the chain(s) of variable assignment in the text above, {num_v} variables are assigned "
    "the value {query}, they are: "
)
DEFAULT_DEPTHS = np.round(np.linspace(0, 100, num=40, endpoint=True)).astype(int)  # the reference's 40 depths


class VtArgs(TaskArgs):
    haystack: Literal["noise", "essay"] = Field("noise", description="noise: repeated filler lines; essay: Paul Graham essays")
    num_chains: int = Field(1, ge=1, description="chains of assignments; only the first chain's value is queried, the others are distractors")
    num_hops: int = Field(4, ge=1, description="assignments after the first in each chain (num_hops + 1 variables to return)")
    add_fewshot: bool = Field(True, description="precede the task with one solved example whose names and value are randomised per sample")
    fewshot_tokens: int = Field(500, ge=50, description="token size of the example's task text (the reference's 500)")
    depths: list[float] | None = Field(None, description="depth (percent of context) of each chain statement, 1 value or num_chains*(num_hops+1); random as in the reference when unset")
    essays: str | None = Field(None, description="haystack=essay only: directory of .txt files or a text/JSON file; default: data_dir/pg_essays or a one-time download")
    tokens_to_generate: int = Field(30, ge=1, description="tokens reserved for the answer")
    template: str = Field(TEMPLATE, description="task text with {context} and {query}")
    answer_prefix: str = Field(ANSWER_PREFIX, description="start of the assistant turn, with {num_v} and {query}")

    @model_validator(mode="after")
    def _check(self):
        check_depths(self.depths, self.num_chains * (self.num_hops + 1), "chain statement")
        if self.essays is not None and self.haystack != "essay":
            raise ValueError(f"essays: only read with haystack: essay (this task's haystack is {self.haystack})")
        return self


def _chains(rng: random.Random, num_chains: int, num_hops: int, k: int) -> tuple[list[list[str]], list[list[str]], list[str]]:
    """Distinct k-letter names, a distinct 5-digit value per chain, and the statements of each chain."""
    names: list[str] = []
    seen = {"VAR"}
    while len(names) < num_chains * (num_hops + 1):
        name = "".join(rng.choices(string.ascii_uppercase, k=k))
        if name not in seen:
            seen.add(name)
            names.append(name)
    values: list[str] = []
    while len(values) < num_chains:
        v = str(rng.randint(10000, 99998))
        if v not in values:
            values.append(v)
    groups = [names[c * (num_hops + 1):(c + 1) * (num_hops + 1)] for c in range(num_chains)]
    # the hop statements keep the reference's trailing space
    chains = [[f"VAR {g[0]} = {values[c]}"] + [f"VAR {g[j + 1]} = VAR {g[j]} " for j in range(num_hops)] for c, g in enumerate(groups)]
    return groups, chains, values


class VariableTracking(Task):
    Args = VtArgs
    category = "multi-hop tracing"
    summary = "variable tracking: {num_chains} chain(s) of {num_hops} hops hidden in {haystack}; return every variable bound to the value"

    def data_files(self, ctx: GenContext):
        return essay_files(essays_path(self.args.essays, ctx.data_dir)) if self.args.haystack == "essay" else []

    def prepare(self, ctx: GenContext) -> None:
        if self.args.haystack == "essay":
            essay_haystack(ctx, self.args.essays)

    def data_needs(self) -> str:
        return "pg_essays/ (Paul Graham essays; downloaded once if no --data-dir)" if self.args.haystack == "essay" else "none (generated)"
    metric = "string_match_all"

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext):
        a = self.args
        rng, _ = self.rngs(length, index, seed)
        groups, chains, values = _chains(rng, a.num_chains, a.num_hops, 5)
        answers = groups[0]
        head, tail = (p.format(query=values[0]) for p in a.template.split("{context}"))
        prefix = a.answer_prefix.format(num_v=a.num_hops + 1, query=values[0])
        example = self._example(ctx, rng) if a.add_fewshot else ""
        layout_seed = rng.getrandbits(64)  # positions are redrawn from this for every candidate size
        n_statements = sum(len(c) for c in chains)
        depths = None if a.depths is None else list(a.depths) * (n_statements if len(a.depths) == 1 else 1)
        layout = self._layout(ctx, chains, depths, layout_seed)

        def build(n: int):
            context, realised = layout.context(n)
            return ctx.renderer.render(example + head + context + tail, prefix), realised

        budget = length - a.tokens_to_generate
        fitted = fit_units(budget=budget, build=build, estimate=layout.estimate, count=ctx.count, count_short=ctx.count_short,
                           state=self.fit_state(ctx, length), max_units=layout.max_units(budget), min_units=layout.min_units, what=self.name)
        return self.make_sample(length=length, index=index, text=fitted.text, tokens=fitted.tokens, answers=answers,
                                depths=fitted.extra, meta={"haystack_units": fitted.n})

    # ---- the haystack layouts -------------------------------------------------------------
    def _layout(self, ctx: GenContext, chains: list[list[str]], depths: list[float] | None, layout_seed: int):
        if self.args.haystack == "essay":
            return _EssayChains(self._essay(ctx), ctx, chains, depths, layout_seed)
        return _NoiseLayout(line_costs(ctx, NOISE), ctx, chains, depths, layout_seed)

    def boundary_probes(self, ctx: GenContext):
        """Sequences of every boundary this task's prompts contain (core.additivity), from fixed probe draws."""
        a = self.args
        rng, nrng = random.Random(0), np.random.default_rng(0)
        draws = []
        for _ in range(8):
            groups, chains, values = _chains(rng, a.num_chains, a.num_hops, 5)
            example = self._example(ctx, rng) if a.add_fewshot else ""
            head, tail = (p.format(query=values[0]) for p in a.template.split("{context}"))
            edges = rendered_edges(ctx, example + head, tail, a.answer_prefix.format(num_v=a.num_hops + 1, query=values[0]))
            if edges is None:
                return refused("the template does not render the task text verbatim")
            draws.append((chains, head, edges))
        statements = [s for chains, _, _ in draws for c in chains for s in c]
        if a.haystack == "essay":
            layout = EssayLayout(self._essay(ctx), [s.strip() + "." for s in statements], [0.0] * len(statements), ctx)
            probes: dict[str, list[list[str]]] = {}
            for _, _, (left, right) in draws:
                for kind, seqs in layout.probes(nrng, left, right, []).items():
                    probes.setdefault(kind, []).extend(seqs)
            return probes
        if not all(head.endswith("\n") for _, head, _ in draws):
            return refused("the template's text before {context} does not end with a newline")
        seqs = []
        for j, (chains, _, (left, right)) in enumerate(draws):
            lines = [NOISE] * 16
            for k, st in enumerate(statements):
                lines.insert((3 * k + j) % len(lines), st)
            seqs.append([left[:-1]] + ["\n" + x for x in lines] + [right])
        return {"lines, template edges": seqs}

    def _essay(self, ctx: GenContext):
        return essay_haystack(ctx, self.args.essays)

    # ---- the in-context example -----------------------------------------------------------
    def _example(self, ctx: GenContext, rng: random.Random) -> str:
        """A solved short task (3-letter names, at most fewshot_tokens tokens without the answer), then a blank line."""
        a = self.args
        hops = min(10, a.num_hops)
        groups, chains, values = _chains(rng, a.num_chains, hops, 3)
        n = self._example_units(ctx)
        layout = self._layout(ctx, chains, None, rng.getrandbits(64))
        context, _ = layout.context(n)
        text = a.template.format(context=context, query=values[0]) + a.answer_prefix.format(num_v=hops + 1, query=values[0])
        return text + " " + " ".join(groups[0]) + "\n\n"

    def _example_units(self, ctx: GenContext) -> int:
        """Haystack units of the example: the most whose task text fits fewshot_tokens (measured once, on a fixed probe)."""
        a = self.args

        def make() -> int:
            probe = random.Random(0)  # never the sample's rng: this runs once per tokenizer
            hops = min(10, a.num_hops)
            _, chains, values = _chains(probe, a.num_chains, hops, 3)
            layout = self._layout(ctx, chains, None, 0)

            def tokens(n: int) -> int:
                text = a.template.format(context=layout.context(n)[0], query=values[0]) + a.answer_prefix.format(num_v=hops + 1, query=values[0])
                return len(ctx.tokenizer(text, add_special_tokens=False)["input_ids"])

            lo = layout.min_units
            offset = tokens(lo) - layout.estimate(lo)
            n = lo
            while n < layout.max_units(a.fewshot_tokens) and offset + layout.estimate(n + 1) <= a.fewshot_tokens:
                n += 1
            while n > lo and tokens(n) > a.fewshot_tokens:
                n -= 1
            return n

        key = ("vt-example-units", a.haystack, a.essays, a.num_chains, min(10, a.num_hops), a.fewshot_tokens, a.template, a.answer_prefix)
        return ctx.cached(key, make)


class _NoiseLayout:
    """n noise lines joined by newlines, with each chain's statements at increasing random lines."""

    def __init__(self, line_costs: tuple[float, float], ctx: GenContext, chains: list[list[str]], depths: list[float] | None, seed: int):
        alone, self.line_cost = line_costs  # per line: stand-alone, and in context (the estimate uses the latter)
        self.unit_floor = max(min(alone, self.line_cost), 1.0)
        self.chains, self.depths, self.seed = chains, depths, seed
        self.flat = [s for c in chains for s in c]
        self.costs = ctx.piece_counts(["\n" + s for s in self.flat]).astype(float)
        self.fixed = float(self.costs.sum())
        self.min_units = max(len(c) for c in chains)  # the reference samples distinct lines for the first chain

    def estimate(self, n: int) -> float:
        return n * self.line_cost + self.fixed

    def max_units(self, budget: int) -> int:
        return max(self.min_units, int(budget / self.unit_floor) + 8)

    def _indices(self, n: int) -> list[int]:
        """Final line index of each statement (flat order)."""
        if self.depths is None:
            r = random.Random(self.seed)
            placed: list[int] = []
            size = n
            for chain in self.chains:
                new = [p + j for j, p in enumerate(sorted(r.sample(range(size), len(chain))))]
                # inserting chain statements in order shifts earlier statements at or after each spot
                for at in new:
                    placed = [q + 1 if q >= at else q for q in placed]
                placed += new
                size += len(chain)
            return placed
        # depth control: statement i goes after round(depth * n) noise lines; ties keep chain order
        spots = []
        for c, chain in enumerate(self.chains):
            base = sum(len(x) for x in self.chains[:c])
            ds = sorted(self.depths[base:base + len(chain)])
            spots += [(min(n, int(round(d / 100 * n))), base + j) for j, d in enumerate(ds)]
        out = [0] * len(self.flat)
        for rank, (at, i) in enumerate(sorted(spots)):
            out[i] = at + rank
        return out

    def context(self, n: int) -> tuple[str, list[float]]:
        idx = self._indices(n)
        lines = [NOISE] * (n + len(self.flat))
        for i, at in enumerate(idx):
            lines[at] = self.flat[i]
        order = np.argsort(idx)
        total = self.estimate(n)
        realised = [0.0] * len(idx)
        before_stmt = 0.0
        for rank, i in enumerate(order):
            at = idx[i]
            realised[i] = 100 * ((at - rank) * self.line_cost + before_stmt) / total
            before_stmt += self.costs[i]
        return "\n".join(lines), realised


class _EssayChains:
    """The first n essay words with the statements (ending in '.') at the sentence boundaries nearest their depths.

    depths are per statement in chain order (sorted within each chain, so a chain reads in order). Unset,
    as in the reference: distinct depths from the 40 reference depths, sorted, given to the statements of
    a random interleaving of the chains that keeps each chain's order.
    """

    def __init__(self, hay, ctx: GenContext, chains: list[list[str]], depths: list[float] | None, seed: int):
        starts = np.cumsum([0] + [len(c) for c in chains])
        total = int(starts[-1])
        if depths is None:
            r = random.Random(seed)
            drawn = r.sample(list(DEFAULT_DEPTHS), total) if total <= len(DEFAULT_DEPTHS) else [r.uniform(0, 100) for _ in range(total)]
            owners = [c for c, chain in enumerate(chains) for _ in chain]
            r.shuffle(owners)
            nxt = [0] * len(chains)
            depths = [0.0] * total
            for c, d in zip(owners, sorted(float(x) for x in drawn)):
                depths[int(starts[c]) + nxt[c]] = d
                nxt[c] += 1
        else:
            depths = [d for c in range(len(chains)) for d in sorted(depths[starts[c]:starts[c + 1]])]
        statements = [s.strip() + "." for c in chains for s in c]
        self.slot = sorted(range(total), key=lambda i: (depths[i], i))  # chain-order index of each statement, in text order
        self.layout = EssayLayout(hay, [statements[i] for i in self.slot], [depths[i] for i in self.slot], ctx)
        self.estimate = self.layout.estimate
        self.min_units = 0

    def max_units(self, budget: int) -> int:
        return int(budget * 2) + 8

    def context(self, n: int) -> tuple[str, list[float]]:
        text, realised = self.layout.context(n)
        out = [0.0] * len(realised)
        for i, r in enumerate(realised):
            out[self.slot[i]] = r
        return text, out
