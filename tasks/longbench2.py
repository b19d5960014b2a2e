"""LongBench v2 (`longbench2`, THUDM/LongBench-v2): 503 four-way multiple-choice questions over long contexts.

The official zero-shot prompt (prompts/0shot.txt), 128 generated tokens and answer extraction
("The correct answer is (X)", then without parentheses, after removing '*'). Difficulty
(easy/hard) and the length bucket (short/medium/long) go to meta, so reports can break the
accuracy down the way the official result.py does. Truncation is ours (see tasks/realdata.py):
the official code cuts the whole prompt before the chat template.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import OfflineError
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Sample
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


class LongBench2(RealDataTask):
    Args = RealArgs
    category = "multiple choice"
    summary = "LongBench v2: multiple-choice questions over 8K-2M-word contexts"
    data_source = "THUDM/LongBench-v2 (hub), or data_file"
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

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        rec = self.record(index, ctx)
        filled = PROMPT
        for slot, key in (("$Q$", "question"), ("$C_A$", "choice_A"), ("$C_B$", "choice_B"), ("$C_C$", "choice_C"), ("$C_D$", "choice_D")):
            filled = filled.replace(slot, rec[key].strip())
        head, tail = filled.split("$DOC$", 1)  # the template's slot comes first
        fit = fit_context(ctx, lambda c: ctx.renderer.render(head + c + tail), rec["context"].strip(), length=length,
                          max_new_tokens=self.max_new_tokens, what=f"{self.name} example {index}")
        meta = {
            "id": rec.get("_id"), "domain": rec.get("domain"), "sub_domain": rec.get("sub_domain"), "difficulty": rec.get("difficulty"),
            "length_bucket": rec.get("length"), "truncated_tokens": fit.truncated_tokens, "context_tokens": fit.context_tokens,
            "cluster": self.document_cluster(rec["context"]),
        }
        return self.make_sample(length=length, index=index, text=fit.rendered, tokens=fit.tokens, answers=[rec["answer"]], meta=meta)


@register("task", "longbench2")
def longbench2(**args):
    return LongBench2("longbench2", RealArgs(**args))
