"""RULER frequent words extraction (aggregation): find the most frequent coded words of a Zipf-like text.

A vocabulary of random lowercase words is ranked at random; the word of rank k appears
int(N * k**-alpha / zeta(alpha)) times, the rank-1 word is replaced by '...' (noise), and the answer
is the words of ranks 2 to num_answers + 1. N grows with the length.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from ctxbench.harness.core.additivity import refused
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.fitting import fit_units
from ctxbench.tasks.base import Task, TaskArgs, rendered_edges

TEMPLATE = (
    "Read the following coded text and track the frequency of each coded word. Find the three most frequently appeared "
    "coded words. {context}\nQuestion: Do not provide any explanation. Please ignore the dots '....'. "
    "What are the three most frequently appeared words in the above coded text?"
)
ANSWER_PREFIX = " Answer: According to the coded text above, the three most frequently appeared words are:"


class FweArgs(TaskArgs):
    alpha: float = Field(2.0, gt=1.0, description="Zeta distribution exponent; lower is harder (flatter frequencies)")
    coded_wordlen: int = Field(6, ge=2, description="letters per coded word")
    vocab_size: int = Field(-1, description="coded words to draw from; -1: (length - tokens_to_generate) // 50 as in the reference")
    num_answers: int = Field(3, ge=1, description="words to return (ranks 2 .. num_answers + 1); the template says three")
    tokens_to_generate: int = Field(50, ge=1, description="tokens reserved for the answer")
    template: str = Field(TEMPLATE, description="task text with {context}")
    answer_prefix: str = Field(ANSWER_PREFIX, description="start of the assistant turn")


class FrequentWords(Task):
    Args = FweArgs
    category = "aggregation"
    summary = "frequent words extraction: the {num_answers} most frequent coded words of a Zeta(alpha={alpha}) stream"
    metric = "string_match_all"

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext):
        a = self.args
        rng, nrng = self.rngs(length, index, seed)
        budget = length - a.tokens_to_generate
        ranks = a.num_answers + 2  # the noise word, the answers, and one more so the last answer is strictly more frequent
        vocab_size = max(ranks, budget // 50 if a.vocab_size == -1 else a.vocab_size)
        if vocab_size > 26 ** a.coded_wordlen // 2:
            raise ConfigError(f"vocab_size: {vocab_size} distinct coded words of {a.coded_wordlen} letters are too many; raise coded_wordlen")
        vocab = self._vocab(nrng, vocab_size, a.coded_wordlen)
        words = np.array(["...", *vocab[1:]], dtype=object)  # the top-ranked word is noise
        answers = [str(w) for w in words[1:a.num_answers + 1]]
        costs = ctx.piece_counts([" " + w for w in words]).astype(np.int64)
        events, min_units = ctx.cached(("fwe-events", a.alpha, vocab_size, a.num_answers, budget),
                                       lambda: self._events(a.alpha, vocab_size, a.num_answers, budget))
        ecum = np.concatenate([[0], np.cumsum(costs[events])])

        def estimate(n: int) -> float:
            return float(ecum[n])

        shuffle_seed = rng.getrandbits(64)  # the word order is redrawn from this for every candidate size

        def build(n: int):
            counts = np.bincount(events[:n], minlength=vocab_size)
            text = words[np.repeat(np.arange(vocab_size), counts)]
            text = text[np.random.default_rng(shuffle_seed).permutation(len(text))]
            return ctx.renderer.render(a.template.replace("{context}", " ".join(text)), a.answer_prefix), None

        max_units = len(events)
        fitted = fit_units(budget=budget, build=build, estimate=estimate, count=ctx.count, count_short=ctx.count_short,
                           state=self.fit_state(ctx, length), max_units=max_units, min_units=min_units, what=self.name)
        return self.make_sample(length=length, index=index, text=fitted.text, tokens=fitted.tokens, answers=answers,
                                meta={"haystack_units": fitted.n, "vocab_size": vocab_size})

    def boundary_probes(self, ctx: GenContext):
        """Sequences of every boundary in this task's prompts (core.additivity), from fixed probe draws: the template
        (whose text before {context} ends with a space) | " word" | ... | " ..." | ... | the template's tail."""
        a = self.args
        head, tail = a.template.split("{context}")
        if not head.endswith(" "):
            return refused("the template's text before {context} does not end with a space")
        edges = rendered_edges(ctx, head, tail, a.answer_prefix)
        if edges is None:
            return refused("the template does not render the task text verbatim")
        nrng = np.random.default_rng(0)
        seqs = []
        for j in range(32):
            words = self._vocab(nrng, 32, a.coded_wordlen)
            words[int(nrng.integers(32))] = "..."
            seqs.append(([edges[0][:-1]] if j < 8 else []) + [" " + w for w in words] + ([edges[1]] if j % 2 else []))
        return {"coded words, template edges": seqs}

    @staticmethod
    def _events(alpha: float, vocab_size: int, num_answers: int, budget: int) -> tuple[np.ndarray, int]:
        """The word added by each unit, and the fewest units that make the answer well defined.

        Rank k appears int(N * share_k) times; as N grows continuously, each unit is the next point
        where one of these counts goes up (ties: lower rank first). Unit n is thus the text for some N,
        one word at a time, so the length can be matched to within a word.
        """
        from scipy.special import zeta

        share = np.arange(1, vocab_size + 1, dtype=np.float64) ** -alpha / zeta(alpha)
        # at this N the text has more than budget words, so more than budget tokens
        n_max = (budget + vocab_size + 1) / share.sum() + 1
        per_rank = np.floor(n_max * share).astype(np.int64)
        ranks = np.repeat(np.arange(vocab_size), per_rank)
        starts = np.repeat(np.cumsum(per_rank) - per_rank, per_rank)
        times = (np.arange(len(ranks)) - starts + 1) / share[ranks]  # the N at which rank k reaches count c
        order = np.lexsort((ranks, times))
        events, times = ranks[order], times[order]
        # the last answer (rank num_answers + 1) must be strictly more frequent than the next rank
        t_min = 1.0 / (share[num_answers] - share[num_answers + 1])
        n = int(np.searchsorted(times, t_min, side="right"))
        while n < len(events):
            c = np.bincount(events[:n], minlength=num_answers + 2)
            if c[num_answers] > c[num_answers + 1]:
                break
            n += 1
        return events, n

    @staticmethod
    def _vocab(nrng: np.random.Generator, size: int, wordlen: int) -> list[str]:
        """size distinct random lowercase words, in random rank order."""
        out: list[str] = []
        seen: set[str] = set()
        while len(out) < size:
            letters = nrng.integers(0, 26, size=(size - len(out) + 8, wordlen), dtype=np.uint8) + ord("a")
            for w in letters.view(f"S{wordlen}").ravel():
                s = w.decode()
                if s not in seen:
                    seen.add(s)
                    out.append(s)
                    if len(out) == size:
                        break
        return out
