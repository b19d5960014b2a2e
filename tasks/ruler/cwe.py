"""RULER common words extraction (aggregation): name the most frequent words of a long numbered list.

The list `1. w 2. w ...` is a shuffle of num_cw common words repeated freq_cw times and n uncommon
words repeated freq_ucw times; n grows with the length. A solved shorter list precedes the task.
Below `short_below` tokens the reference shrinks the example (20 words, 3/1) and the frequencies
(6/1); so do we.
"""

from __future__ import annotations

import random
from functools import lru_cache

import numpy as np
from pydantic import Field, model_validator

from ctxbench.harness.core.additivity import refused
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.fitting import fit_units
from ctxbench.tasks.base import Task, TaskArgs, rendered_edges
from ctxbench.tasks.haystacks import sequence_cum, wonderwords_lists

TEMPLATE = (
    "Below is a numbered list of words. In these words, some appear more often than others. "
    "Memorize the ones that appear most often.\n{context}\nQuestion: What are the {num_cw} most common words in the above list?"
)
ANSWER_PREFIX = " Answer: The top {num_cw} words that appear most often in the list are:"


class CweArgs(TaskArgs):
    freq_cw: int = Field(30, ge=1, description="repetitions of each common word")
    freq_ucw: int = Field(3, ge=1, description="repetitions of each uncommon word (their number grows with the length)")
    num_cw: int = Field(10, ge=1, description="common words to return")
    num_fewshot: int = Field(1, ge=0, description="solved example lists before the task")
    fewshot_words: int = Field(40, ge=1, description="distinct words in each example list (num_cw of them common)")
    fewshot_freq_cw: int = Field(10, ge=1, description="repetitions of each common word in an example")
    fewshot_freq_ucw: int = Field(3, ge=1, description="repetitions of each uncommon word in an example")
    short_below: int = Field(4096, ge=0, description="below this target length use the reference's short settings (the short_* args)")
    short_freq_cw: int = Field(6, ge=1, description="freq_cw below short_below")
    short_freq_ucw: int = Field(1, ge=1, description="freq_ucw below short_below")
    short_fewshot_words: int = Field(20, ge=1, description="fewshot_words below short_below")
    short_fewshot_freq_cw: int = Field(3, ge=1, description="fewshot_freq_cw below short_below")
    short_fewshot_freq_ucw: int = Field(1, ge=1, description="fewshot_freq_ucw below short_below")
    tokens_to_generate: int = Field(120, ge=1, description="tokens reserved for the answer")
    template: str = Field(TEMPLATE, description="task text with {context} and {num_cw}")
    answer_prefix: str = Field(ANSWER_PREFIX, description="start of the assistant turn, with {num_cw}")

    @model_validator(mode="after")
    def _check(self):
        for name in ("freq", "short_freq"):
            if getattr(self, f"{name}_cw") <= getattr(self, f"{name}_ucw"):
                raise ValueError(f"{name}_cw must be larger than {name}_ucw, or the common words are not the most common")
        for words, cw, ucw in (("fewshot_words", "fewshot_freq_cw", "fewshot_freq_ucw"), ("short_fewshot_words", "short_fewshot_freq_cw", "short_fewshot_freq_ucw")):
            if getattr(self, words) < self.num_cw:
                raise ValueError(f"{words} must be at least num_cw")
            if getattr(self, cw) <= getattr(self, ucw):
                raise ValueError(f"{cw} must be larger than {ucw}")
        return self


@lru_cache(maxsize=1)
def base_words() -> tuple[str, ...]:
    """wonderwords nouns + adjectives + verbs, deduplicated, in a fixed shuffled order."""
    lists = wonderwords_lists()
    words = sorted(set(lists["noun"] + lists["adjective"] + lists["verb"]))
    random.Random(42).shuffle(words)
    return tuple(words)


_EXTRA: list[str] = []
_EXTRA_STATE: dict = {}


def extra_word(i: int) -> str:
    """Word i of an endless deterministic list of new words ("word-word" pairs), for lists longer than the word list.

    Grown strictly in order from one generator, so word i is the same however and whenever the list grows.
    """
    if len(_EXTRA) <= i:
        if not _EXTRA_STATE:
            _EXTRA_STATE.update(rng=random.Random(0), seen=set(base_words()))
        base, r, seen = base_words(), _EXTRA_STATE["rng"], _EXTRA_STATE["seen"]
        while len(_EXTRA) <= i:
            w = f"{r.choice(base)}-{r.choice(base)}"
            if w not in seen:
                seen.add(w)
                _EXTRA.append(w)
    return _EXTRA[i]


def numbered(words) -> str:
    return " ".join([f"{i}. {w}" for i, w in enumerate(words, 1)])  # a list: join sizes it once


class CommonWords(Task):
    Args = CweArgs
    category = "aggregation"
    summary = "common words extraction: the {num_cw} words repeated {freq_cw}x among words repeated {freq_ucw}x"
    data_source = "none (wonderwords word lists, pinned)"
    metric = "string_match_all"

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext):
        a = self.args
        rng, nrng = self.rngs(length, index, seed)
        short = length < a.short_below
        fcw, fucw = (a.short_freq_cw, a.short_freq_ucw) if short else (a.freq_cw, a.freq_ucw)
        ex_words, ex_fcw, ex_fucw = self._example_args(short)
        base = base_words()
        if max(a.num_cw, ex_words) > len(base):
            raise ConfigError(f"num_cw, fewshot_words: at most {len(base)} (the size of the word list)")

        example = self._example(rng, ex_words, ex_fcw, ex_fucw)

        order = nrng.permutation(len(base))
        common = [base[i] for i in order[:a.num_cw]]
        rest = order[a.num_cw:]
        shuffle_seed = rng.getrandbits(64)  # the list order is redrawn from this for every candidate size
        head, tail = (p.format(num_cw=a.num_cw) for p in a.template.split("{context}"))
        prefix = a.answer_prefix.format(num_cw=a.num_cw)
        fixed_items = a.num_cw * fcw
        budget = length - a.tokens_to_generate

        # list numbering " 1.", " 2.", ...: exact costs, cached per tokenizer. Every item costs at least
        # its number and one token (times the in-list scale), which bounds the number of items that can fit.
        def num_cum(t: int) -> np.ndarray:
            return sequence_cum(ctx, ("cwe-numbers",), lambda i: f" {i + 1}.", t)

        scale = self._in_list_scale(ctx)  # < 1 where merges across items make a list cheaper than its items alone
        t_max = 1024
        while True:
            ncum = num_cum(t_max)
            over = np.nonzero((ncum[:t_max + 1] + np.arange(t_max + 1)) * scale > budget)[0]
            if len(over):
                t_max = int(over[0])
                break
            t_max *= 2
        max_units = max(0, (t_max - fixed_items) // fucw + 1)
        ncum = num_cum(fixed_items + max_units * fucw)
        n_base = min(max_units, len(rest))
        uncommon = [base[i] for i in rest[:n_base]] + [extra_word(i) for i in range(max_units - n_base)]
        word_costs = self._word_costs(ctx, rest[:n_base], max_units - n_base)
        ucum = np.concatenate([[0], np.cumsum(word_costs)])
        common_cost = float(ctx.piece_counts([" " + w for w in common]).sum())

        def estimate(n: int) -> float:
            return fcw * common_cost + fucw * float(ucum[n]) + float(ncum[fixed_items + n * fucw])

        def build(n: int):
            items = np.array(common * fcw + uncommon[:n] * fucw, dtype=object)
            items = items[np.random.default_rng(shuffle_seed).permutation(len(items))]
            return ctx.renderer.render(example + head + numbered(items) + tail, prefix), None

        fitted = fit_units(budget=budget, build=build, estimate=estimate, count=ctx.count, count_short=ctx.count_short,
                           state=self.fit_state(ctx, length), max_units=max_units, min_units=0, what=self.name)
        return self.make_sample(length=length, index=index, text=fitted.text, tokens=fitted.tokens, answers=common,
                                meta={"haystack_units": fitted.n, "freq_cw": fcw, "freq_ucw": fucw})

    def _example_args(self, short: bool) -> tuple[int, int, int]:
        a = self.args
        return ((a.short_fewshot_words, a.short_fewshot_freq_cw, a.short_fewshot_freq_ucw) if short
                else (a.fewshot_words, a.fewshot_freq_cw, a.fewshot_freq_ucw))

    def _example(self, rng, ex_words: int, ex_fcw: int, ex_fucw: int) -> str:
        """num_fewshot solved lists, each followed by its answer, then a newline."""
        a = self.args
        examples = []
        for _ in range(a.num_fewshot):
            words = rng.sample(base_words(), ex_words)
            common, uncommon = words[:a.num_cw], words[a.num_cw:]
            items = common * ex_fcw + uncommon * ex_fucw
            rng.shuffle(items)
            examples.append(a.template.format(num_cw=a.num_cw, context=numbered(items)) + a.answer_prefix.format(num_cw=a.num_cw) + " " + numbered(common))
        return "\n".join(examples) + "\n" if examples else ""

    @staticmethod
    def _in_list_scale(ctx: GenContext) -> float:
        """Tokens of a numbered list over the sum of its items' stand-alone costs, at most 1 (measured once)."""
        def make() -> float:
            words = [base_words()[i] for i in range(0, 4096, 8)]
            items = [(f" {i}.", " " + w) for i, w in enumerate(words, 1001)]
            counts = ctx.piece_counts([x for pair in items for x in pair] + ["".join(x for pair in items for x in pair)])
            return min(1.0, float(counts[-1]) / float(counts[:-1].sum()))

        return ctx.cached(("cwe-in-list-scale",), make)

    def boundary_probes(self, ctx: GenContext):
        """Sequences of every boundary in this task's prompts (core.additivity), from fixed probe draws: the template
        (with its solved example) | "1." | " word" | " 2." | ... | the template's tail, and runs deep in long lists."""
        a = self.args
        rng, nrng = random.Random(0), np.random.default_rng(0)
        base = base_words()
        head, tail = (p.format(num_cw=a.num_cw) for p in a.template.split("{context}"))
        seqs = []
        for j in range(32):
            edges = rendered_edges(ctx, self._example(rng, *self._example_args(j % 2 == 0)) + head, tail, a.answer_prefix.format(num_cw=a.num_cw))
            if edges is None:
                return refused("the template does not render the task text verbatim")
            words = [base[int(i)] for i in nrng.integers(0, len(base), 24)] + [extra_word(int(i)) for i in nrng.integers(0, 4096, 8)]
            start = 1 if j < 8 else int(nrng.integers(2, 40_000))
            items = [x for k, w in enumerate(words) for x in ((f"{start + k}." if start + k == 1 else f" {start + k}."), " " + w)]
            seqs.append(([edges[0]] if start == 1 else []) + items + [edges[1]])
        return {"numbered list, template edges": seqs}

    @staticmethod
    def _word_costs(ctx: GenContext, base_idx: np.ndarray, n_extra: int) -> np.ndarray:
        """Token costs of " word" for the chosen base words and the first n_extra extra words (cached per tokenizer)."""
        base = base_words()
        base_costs = ctx.cached(("cwe-base-costs",), lambda: ctx.piece_counts([" " + w for w in base]))
        costs = base_costs[base_idx]
        if n_extra:
            extra = sequence_cum(ctx, ("cwe-extra-words",), lambda i: " " + extra_word(i), n_extra)
            costs = np.concatenate([costs, np.diff(extra[:n_extra + 1])])
        return costs
