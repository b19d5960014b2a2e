"""RULER v2 over HotpotQA documents (qa_basic, qa_easy, qa_medium, qa_hard): prepare_qa.py.

The context lists train paragraphs as "Document N:" with random 7-digit indices, plus the validation question's
supporting paragraphs (the gold) and, once there is any haystack, its distractor paragraphs; all shuffled. The task
gives the text of the first gold paragraph and asks for its index (basic), gives the question and asks for the index
of a relevant document (easy), or asks to answer the question, copying the relevant documents first (medium) or
not (hard). Sample i asks validation question i, in the official order.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ctxbench.harness.core.context import GenContext
from ctxbench.tasks.ruler2.base import Ruler2Args, Ruler2Task, growing_costs, seven_digits, unit_rng
from ctxbench.tasks.ruler2.data import HotpotQuestion, load_hotpot, local_files
from ctxbench.tasks.ruler2.prompts import DOCUMENT, qa_text


class DocumentsArgs(Ruler2Args):
    query: Literal["doc", "question", "single", "2steps"] = Field(
        "doc", description="doc: find the index of a quoted document; question: the index of a document that answers it; "
                           "single: answer the question; 2steps: copy the relevant documents, then answer")
    data_path: str | None = Field(None, description="local copy: a folder with train and validation (.json or .jsonl, the "
                                                    "official HotpotQA format); default: data_dir/ruler2/hotpotqa/, else a one-time download")


def layout(rng, haystack: list[str], q: HotpotQuestion) -> tuple[list[tuple[str, str]], list[str]]:
    """prepare_qa.py's draw: (index, text) of every document in prompt order, and the gold documents' indices."""
    gold = [(seven_digits(rng), t) for t in q.gold]
    distractors = [(seven_digits(rng), t) for t in q.distractors]
    docs = [(seven_digits(rng), t) for t in haystack] + gold + (distractors if haystack else [])
    rng.shuffle(docs)
    return docs, [i for i, _ in gold]


def expected(query: str, gold: list[str], q: HotpotQuestion) -> list[str]:
    """prepare_qa.py's expected_answer: the first gold index (doc), every gold index (question) or the answers."""
    return gold[:1] if query == "doc" else gold if query == "question" else list(q.answers)


class Ruler2Documents(Ruler2Task):
    Args = DocumentsArgs
    category = "question answering"
    metric = "ruler2/part"
    summary = "{name}: HotpotQA paragraphs under random indices; {query} (RULER v2)"
    data_source = "HotpotQA train + dev distractor (official JSON, CC BY-SA 4.0; downloaded once), or data_path / data_dir/ruler2/hotpotqa/"
    requires_data = True

    def prepare(self, ctx: GenContext) -> None:
        load_hotpot(ctx, self.args.data_path)

    def data_files(self, ctx: GenContext):
        return local_files(self.args.data_path, ctx.data_dir, "hotpotqa")

    def data_needs(self) -> str:
        return "ruler2/hotpotqa/ (train, validation: HotpotQA distractor JSON); downloaded once if no --data-dir"

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext):
        a = self.args
        data = load_hotpot(ctx, a.data_path)
        q = data.questions[index % len(data.questions)]
        _, nrng = self.rngs(length, index, seed)  # its own haystack and indices per sample: independent, no cluster
        pool = nrng.permutation(len(data.haystack))
        layout_seed = int(nrng.integers(2**63))

        def paragraph(i: int) -> str:
            return data.haystack[int(pool[i % len(pool)])]  # repeated past the set's size, as the official does

        def build(n: int):
            docs, gold = layout(unit_rng(layout_seed, n), [paragraph(i) for i in range(n)], q)
            text = qa_text(a.query, docs, question=q.question, gold_text=q.gold[0])
            return self.render(ctx, text), expected(a.query, gold, q)

        cum = growing_costs(ctx, lambda i: "\n\n" + DOCUMENT.format(i="1234567", text=paragraph(i)), self.budget(length))
        # the distractor paragraphs join as soon as there is one haystack paragraph
        cum[1:] += float(ctx.piece_counts(["\n\n" + DOCUMENT.format(i="1234567", text=t) for t in q.distractors]).sum())
        fitted = self.fit(ctx, length=length, build=build, estimate=lambda n: float(cum[n]), max_units=len(cum) - 1, min_units=0)
        return self.make_sample(length=length, index=index, text=fitted.text, tokens=fitted.tokens, answers=fitted.extra,
                                meta={"haystack_units": fitted.n, "question": index % len(data.questions)})
