"""InfiniteBench's three synthetic tasks, generated at any length (`infinitebench/<task>_synth`).

Built the way data/construct_synthetic_dataset.py builds them, then fitted to the sample's length
with exact piece counts (harness.fitting): passkey and number_string hide one sentence in lines of
the noise "The grass is green. ... There and back again." (passkey: 5 random digits; number_string:
10 digits, 5 of them repeats); kv_retrieval is one line of JSON with UUID pairs and asks for one
key's value. A sample's index picks the needle position: positions[index % len(positions)].
Prompts, generation lengths and scoring are those of the official tasks (tasks/infinitebench/task.py).
"""

from __future__ import annotations

import json
import random

import numpy as np
from pydantic import Field, field_validator

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.fitting import Fitted, fit_units
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Sample
from ctxbench.tasks.base import Task, TaskArgs
from ctxbench.tasks.infinitebench.metrics import get_score_one
from ctxbench.tasks.infinitebench.task import SPEC, TEMPLATES
from ctxbench.tasks.kv.task import random_uuid
from ctxbench.tasks.realdata import split_template

NOISE_LINE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.\n"
NEEDLES = {
    "passkey": ("The pass key is {key}. Remember it. {key} is the pass key.\n", "What is the pass key?"),
    "number_string": ("The sequence of digits is {key}. Remember it. {key} is the sequence of digits.\n",
                      "What is the sequence of digits?"),
}
KV_QUESTION = '\nKey: "{key}"\nThe value associated with the specified key is: '


class SynthArgs(TaskArgs):
    positions: list[float] | int = Field(11, description="needle positions as fractions 0..1 of the context, or N evenly spaced")
    samples_per_position: int = Field(5, ge=1, description="samples at each position (the official passkey set has 5)")
    num_pairs: int | None = Field(None, ge=2, description="kv_retrieval only: pairs in the JSON object; unset = fill the length")
    max_new_tokens: int | None = Field(None, ge=1, description="tokens reserved for the answer; default: the official value for the task")

    @field_validator("positions")
    @classmethod
    def _positions(cls, v):
        if isinstance(v, int):
            if v < 1:
                raise ValueError("positions: a positive count, or fractions between 0 and 1")
            return v
        if not v or any(not 0 <= p <= 1 for p in v):
            raise ValueError("positions: each position is a fraction between 0 (start) and 1 (end)")
        return v

    def position_list(self) -> list[float]:
        if isinstance(self.positions, int):
            return [float(x) for x in np.linspace(0, 1, self.positions)] if self.positions > 1 else [0.5]
        return [float(p) for p in self.positions]


def make_key(task: str, rng: random.Random) -> str:
    digits = [str(rng.randint(0, 9)) for _ in range(5)]
    if task == "number_string":  # five times, repeat a digit in place: the official 10-digit construction
        for k in range(5):
            pos = rng.randint(0, 5 + k - 1)
            digits.insert(pos, digits[pos])
    return "".join(digits)


def _kv_piece(key: str, value: str) -> str:
    """One pair as the tokenizer sees it inside '{"k": "v", "k": "v"}': the space before, the comma after."""
    return f' "{key}": "{value}",'


class InfiniteSynth(Task):
    Args = SynthArgs
    category = "retrieval"
    summary = "InfiniteBench's {name} task generated at any length"

    def __init__(self, task: str, args: SynthArgs):
        super().__init__(f"infinitebench/{task}_synth", args)
        if args.num_pairs is not None and task != "kv_retrieval":
            raise ConfigError(f"infinitebench/{task}_synth.args.num_pairs: only kv_retrieval has pairs; remove it")
        self.task = task
        self.metric = f"infinitebench/{task}"

    @property
    def max_new_tokens(self) -> int:
        return self.args.max_new_tokens or SPEC[self.task][0]

    def samples_per_length(self, ctx: GenContext | None = None) -> int:
        return len(self.args.position_list()) * self.args.samples_per_position

    def score(self, prediction: str, sample: Sample) -> float:
        return get_score_one(prediction, list(sample.answers), self.task)

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        grid = self.args.position_list()
        frac = grid[index % len(grid)]
        rng, _ = self.rngs(length, index, seed)  # its own key (and kv pairs) per index: independent, no cluster
        budget = length - self.max_new_tokens
        if self.task == "kv_retrieval":
            fitted, n, pos, answer = self._kv(ctx, rng, frac, budget, length)
            depth = 100 * pos / max(n - 1, 1)
        else:
            needle, question = NEEDLES[self.task]
            answer = make_key(self.task, rng)
            head, tail = split_template(TEMPLATES[self.task], input=question)
            needle = needle.format(key=answer)
            line_cost = float(ctx.cached(("ib-noise-cost",), lambda: ctx.piece_counts([NOISE_LINE])[0]))
            needle_cost = float(ctx.piece_counts([needle])[0])

            def build(n: int):
                at = int(round(frac * n))
                context = NOISE_LINE * at + needle + NOISE_LINE * (n - at)
                return ctx.renderer.render(head + context + tail), at

            fitted = fit_units(budget=budget, build=build, estimate=lambda n: n * line_cost + needle_cost, count=ctx.count,
                               count_short=ctx.count_short, state=self.fit_state(ctx, length),
                               max_units=int(budget / max(line_cost, 1.0)) + 8, what=self.name)
            n, pos = fitted.n, fitted.extra
            depth = 100 * pos / max(n, 1)
        return self.make_sample(length=length, index=index, text=fitted.text, tokens=fitted.tokens, answers=[answer], depths=[depth],
                                meta={"position": pos, "units": n, "depth": round(100 * frac, 2)})

    def _kv(self, ctx: GenContext, rng: random.Random, frac: float, budget: int, length: int):
        probe = random.Random(0)  # fixed, so the sample's own rng is untouched
        per_pair = ctx.cached(("ib-kv-pair-cost",), lambda: float(np.mean(ctx.piece_counts(
            [_kv_piece(random_uuid(probe), random_uuid(probe)) for _ in range(64)]))))
        cap = self.args.num_pairs or int(budget / per_pair * 1.2) + 8
        pairs = [(random_uuid(rng), random_uuid(rng)) for _ in range(cap)]
        cum = np.concatenate([[0], np.cumsum(ctx.piece_counts([_kv_piece(k, v) for k, v in pairs]))])
        gold_key, gold_value = pairs[0]
        head, tail = split_template(TEMPLATES["kv_retrieval"], input=KV_QUESTION.format(key=gold_key))

        def build(n: int):
            n = max(n, 1)
            pos = min(n - 1, int(round(frac * (n - 1))))
            records = pairs[1:n]
            records.insert(pos, (gold_key, gold_value))
            context = "JSON data:\n{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in records) + "}"
            return ctx.renderer.render(head + context + tail), pos

        if self.args.num_pairs:
            rendered, pos = build(cap)
            tokens = ctx.count(rendered)
            if tokens > budget:
                need = tokens + self.max_new_tokens
                raise ConfigError(f"{self.name}: {cap} pairs need {need} tokens > length {length}; raise the length")
            return Fitted(cap, rendered, tokens, pos), cap, pos, gold_value
        fitted = fit_units(budget=budget, build=build, estimate=lambda n: float(cum[min(max(n, 1), cap)]), count=ctx.count,
                           count_short=ctx.count_short, state=self.fit_state(ctx, length), max_units=cap, min_units=2, what=self.name)
        return fitted, fitted.n, fitted.extra, gold_value


def _register(task: str) -> None:
    def factory(**args):
        return InfiniteSynth(task, SynthArgs(**args))

    register("task", f"infinitebench/{task}_synth", args=SynthArgs)(factory)


for _t in ("passkey", "number_string", "kv_retrieval"):
    _register(_t)
