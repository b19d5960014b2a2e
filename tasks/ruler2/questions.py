"""RULER v2 over MMLU questions (mk_niah easy/medium/hard, mv_niah easy/medium/hard): prepare_mmlu.py.

The context lists auxiliary_train questions, each under a random 7-digit "Question N" index; one test question is
inserted at a random position. With num_order > 0 every index is shared by up to num_order questions (the official
draws ceil((n+1)/num_order) indices, repeats the list num_order times, shuffles it), and a question is named by its
ordinal among those sharing its index ("the 2nd (1 indexed) Question N"). The task asks to copy the question
(retrieve), to copy every question under the index (niah), or to answer it with a letter (solve); few-shot examples
are questions of the context with their solutions.
"""

from __future__ import annotations

import math
import random
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from ctxbench.harness.core.context import GenContext
from ctxbench.tasks.base import sample_seed
from ctxbench.tasks.ruler2.base import Ruler2Args, Ruler2Task, growing_costs, seven_digits, unit_rng
from ctxbench.tasks.ruler2.data import MMLU_REVISION, Question, load_mmlu, local_files
from ctxbench.tasks.ruler2.prompts import MMLU_PROBLEM, QUESTION, Listed, mmlu_text, ordinal


class QuestionsArgs(Ruler2Args):
    task_type: Literal["retrieve", "niah", "solve"] = Field("retrieve", description="copy the asked question, copy every "
                                                                                  "question under its index, or answer it")
    algo_type: Literal["single", "2steps"] = Field("single", description="2steps: copy first (all questions under the index, "
                                                                         "or the asked one), then the final answer")
    num_order: int = Field(0, ge=0, description="questions per index (0: each its own index); the asked one is named by ordinal")
    fewshot: int = Field(0, ge=0, description="solved examples (questions of the context) before the task")
    data_path: str | None = Field(None, description="local copy: a folder with test and auxiliary_train (.parquet or .jsonl, "
                                                    "the hub's columns); default: data_dir/ruler2/mmlu/, else the hub")
    intended_box: bool = Field(False, description="solve: ask for the answer inside \\boxed{}, what the official template "
                                                  "meant; false: \\boxed\\{\\}, what its escaped format string prints")
    revision: str = Field(MMLU_REVISION, description="commit of the cais/mmlu hub dataset to download")

    @model_validator(mode="after")
    def _check(self):
        if (self.task_type, self.algo_type) not in MMLU_PROBLEM:
            raise ValueError(f"algo_type: {self.task_type} has no {self.algo_type} prompt; use single")
        return self


def layout(rng: random.Random, context: list[Question], target: Question, num_order: int, fewshot: int):
    """prepare_mmlu.py's draw for n = len(context) questions: (listed questions in order, the target, the examples)."""
    n = len(context)
    if num_order > 0:
        numbers = [seven_digits(rng) for _ in range(math.ceil((n + 1) / num_order))] * num_order
    else:
        numbers = [seven_digits(rng) for _ in range(n + 1)]
    rng.shuffle(numbers)
    listed = [(numbers[i], q) for i, q in enumerate(context)]
    rng.shuffle(listed)
    examples = rng.sample(range(n), fewshot)  # positions in `listed` before the target goes in
    listed.insert(rng.randint(0, n), (numbers[n], target))
    counts: dict[str, int] = {}
    out = []
    for i, q in listed:
        counts[i] = counts.get(i, 0) + 1
        out.append(Listed(i, q.text, f"{ordinal(counts[i])} (1 indexed) " if num_order > 0 else "", q.solution))
    where = next(k for k, (_, q) in enumerate(listed) if q is target)
    shots = [out[k if k < where else k + 1] for k in examples]
    return out, out[where], shots


def expected(task_type: str, listed: list[Listed], target: Listed, answer: str) -> list[str]:
    """prepare_mmlu.py's expected_answer: the question, every question under its index, or the letter."""
    if task_type == "retrieve":
        return [target.text]
    if task_type == "niah":
        return [q.text for q in listed if q.index == target.index]
    return [answer]


class Ruler2Questions(Ruler2Task):
    Args = QuestionsArgs
    summary = "{name}: MMLU questions under random indices; {task_type} ({algo_type}) the asked one (RULER v2)"
    data_source = "cais/mmlu (hub, MIT, pinned revision; downloaded at run time), or data_path / data_dir/ruler2/mmlu/"
    requires_data = True

    def __init__(self, name: str, args: QuestionsArgs):
        super().__init__(name, args)
        # prepare.py's eval type per task: multichoice for solve, the 2steps match for a copy-all-then-one retrieve
        self.metric = "ruler2/mcq" if args.task_type == "solve" else "ruler2/2steps" if args.algo_type == "2steps" else "ruler2/all"

    def prepare(self, ctx: GenContext) -> None:
        load_mmlu(ctx, self.args.data_path, self.args.revision, self.name)

    def data_files(self, ctx: GenContext):
        return local_files(self.args.data_path, ctx.data_dir, "mmlu")

    def data_needs(self) -> str:
        return "ruler2/mmlu/ (test, auxiliary_train of cais/mmlu); downloaded from the hub once if no --data-dir"

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext):
        a = self.args
        data = load_mmlu(ctx, a.data_path, a.revision, self.name)
        order = ctx.cached(("ruler2-mmlu-order", len(data.test), seed),
                           lambda: np.random.default_rng(sample_seed("ruler2-mmlu", seed)).permutation(len(data.test)))
        target_q = data.test[int(order[index % len(order)])]
        _, nrng = self.rngs(length, index, seed)  # its own haystack and indices per sample: independent, no cluster
        pool = nrng.permutation(len(data.auxiliary))
        layout_seed = int(nrng.integers(2**63))

        def question(i: int) -> Question:
            return data.auxiliary[int(pool[i % len(pool)])]  # repeated past the set's size, as the official does

        def build(n: int):
            listed, target, shots = layout(unit_rng(layout_seed, n), [question(i) for i in range(n)], target_q, a.num_order, a.fewshot)
            text = mmlu_text(a.task_type, a.algo_type, listed, target, shots, intended_box=a.intended_box)
            return self.render(ctx, text), expected(a.task_type, listed, target, target_q.answer)

        cum = growing_costs(ctx, lambda i: "\n\n" + QUESTION.format(i="1234567", question=question(i).text),
                            self.budget(length))
        fitted = self.fit(ctx, length=length, build=build, estimate=lambda n: float(cum[n]), max_units=len(cum) - 1, min_units=a.fewshot)
        return self.make_sample(length=length, index=index, text=fitted.text, tokens=fitted.tokens, answers=fitted.extra,
                                meta={"haystack_units": fitted.n, "mmlu_answer": target_q.answer})
