"""LongBench v2 (`longbench2`, THUDM/LongBench-v2): 503 four-way multiple-choice questions over long contexts.

The official zero-shot prompt (prompts/0shot.txt), 128 generated tokens and answer extraction
("The correct answer is (X)", then without parentheses, after removing '*'). Difficulty
(easy/hard) and the length bucket (short/medium/long) go to meta, so reports can break the
accuracy down the way the official result.py does. Truncation is ours (see tasks/realdata.py):
the official code cuts the whole prompt before the chat template.

With `binned: true` no item is cut: each is scored whole at the length bin of its real size under the scored
model's tokenizer (tasks/length_bins.py), so a suite's lengths (128K and past it) select items instead of cutting
every item to every length.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import Field

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import OfflineError
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Sample
from ctxbench.tasks.length_bins import bin_item, items_in_bin
from ctxbench.tasks.realdata import RealArgs, RealDataTask, fit_context, hub_dataset, hub_file, read_records

HUB = "THUDM/LongBench-v2"
PROMPT = (
    "Please read the following text and answer the question below.\n\n<text>\n$DOC$\n</text>\n\n"
    "What is the correct answer to this question: $Q$\nChoices:\n(A) $C_A$\n(B) $C_B$\n(C) $C_C$\n(D) $C_D$\n\n"
    'Format your response as follows: "The correct answer is (insert answer here)".'
)


def extract_answer(response: str) -> str | None:
    """The official extraction: drop '*', then 'The correct answer is (X)', then 'The correct answer is X'."""
    response = response.replace("*", "")
    match = re.search(r"The correct answer is \(([A-D])\)", response) or re.search(r"The correct answer is ([A-D])", response)
    return match.group(1) if match else None


@register("metric", "longbench2/choice")
def choice(prediction: str, references) -> float:
    """1 if the extracted letter (from the stripped response) is the reference letter."""
    return float(extract_answer(prediction.strip()) == references[0])


class LongBench2Args(RealArgs):
    binned: bool = Field(False, description="score each item whole at the length bin of its real token length, (L/2, L], "
                                            "instead of cutting every item to every length")


class LongBench2(RealDataTask):
    Args = LongBench2Args
    category = "multiple choice"
    summary = "LongBench v2: multiple-choice questions over 8K-2M-word contexts"
    data_source = "THUDM/LongBench-v2 (hub), or data_file"
    shared_context = "document"
    metric = "longbench2/choice"
    official_max_new_tokens = 128

    def local_candidates(self) -> list[str]:
        return ["longbench2/data.json", "longbench2/data.jsonl"]

    def load(self, data_dir: Path | None) -> list[dict[str, Any]]:
        hint = "pass data_file: path/to/data.json (from the LongBench-v2 hub repo) or put it at data_dir/longbench2/data.json"
        path = self.local_path(data_dir)
        if path is not None:
            return read_records(path)
        try:
            return hub_dataset(HUB, split="train", what=self.name, hint=hint)
        except OfflineError:
            return read_records(hub_file(HUB, "data.json", what=self.name, hint=hint))

    def samples_at(self, length: int, ctx: GenContext) -> int | None:
        """Binned: how many items lie in length's bin (the plan's count); else None (every item at every length)."""
        if not self.args.binned:
            return None
        return len(items_in_bin(ctx, self._bin_key(ctx), length, self._chars(ctx), lambda i: self._size(i, ctx)))

    def _bin_key(self, ctx: GenContext) -> tuple:
        return (self.name, str(self.args_json()), str(ctx.data_dir))

    def _chars(self, ctx: GenContext) -> list[int]:
        return [len(r["context"]) for r in self.records(ctx)]

    def _size(self, i: int, ctx: GenContext) -> int:
        head, tail = self._edges(self.records(ctx)[i])
        return ctx.count(ctx.renderer.render(head + self.records(ctx)[i]["context"].strip() + tail)) + self.max_new_tokens

    @staticmethod
    def _edges(rec: dict[str, Any]) -> tuple[str, str]:
        filled = PROMPT
        for slot, key in (("$Q$", "question"), ("$C_A$", "choice_A"), ("$C_B$", "choice_B"), ("$C_C$", "choice_C"), ("$C_D$", "choice_D")):
            filled = filled.replace(slot, rec[key].strip())
        head, tail = filled.split("$DOC$", 1)  # the template's slot comes first
        return head, tail

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        row = index  # binned: the bin's index-th item, which fits its bin whole (never cut)
        if self.args.binned:
            row = bin_item(ctx, self._bin_key(ctx), length, index, self._chars(ctx), lambda i: self._size(i, ctx), self.name)
        rec = self.record(row, ctx)
        head, tail = self._edges(rec)
        fit = fit_context(ctx, lambda c: ctx.renderer.render(head + c + tail), rec["context"].strip(), length=length,
                          max_new_tokens=self.max_new_tokens, what=f"{self.name} example {row}")
        meta = {
            "id": rec.get("_id"), "domain": rec.get("domain"), "sub_domain": rec.get("sub_domain"), "difficulty": rec.get("difficulty"),
            "length_bucket": rec.get("length"), "truncated_tokens": fit.truncated_tokens, "context_tokens": fit.context_tokens,
            "cluster": self.document_cluster(rec["context"]), **({"row": row} if self.args.binned else {}),
        }
        return self.make_sample(length=length, index=index, text=fit.rendered, tokens=fit.tokens, answers=[rec["answer"]], meta=meta)


@register("task", "longbench2", args=LongBench2Args)
def longbench2(**args):
    return LongBench2("longbench2", LongBench2Args(**args))
