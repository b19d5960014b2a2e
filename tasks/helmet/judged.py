"""HELMET's own judged summarisation items (`helmet/infbench_sum`; princeton-nlp/HELMET at 4526dfb, data.py
load_infbench and configs/summ.yaml): InfiniteBench's longbook_sum_eng books as HELMET builds them, to be scored by
its LLM judge (`judge/summary` with `task: helmet/infbench_sum`, tasks/judge/summary.py).

As HELMET: the test items are the first `limit` (100) of the books shuffled as `datasets.Dataset.shuffle(seed=42)`
shuffles them; each prompt has 2 demonstrations, drawn from the other books by the same shuffle of the rest
("[story text]\\nSummary: <expert summary>"); HELMET's instruction; 1,200 new tokens; the chat template (summ.yaml:
use_chat_template true), or with `plain: true` its plain prompt ending in "Summary:". The book is cut at its end
with HELMET's " ... [the rest of the text is omitted]" when it does not fit; ctxbench cuts it to the sample's length
(HELMET: to 129,672 Llama-2 tokens). HELMET's sanity filter (books of at least 65,536 Llama-2 tokens, which every
book passes) is not applied. Data: InfiniteBench's longbook_sum_eng.jsonl (data_file, data_dir/infinitebench/, or
the hub), as `infinitebench/longbook_sum_eng` reads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Sample
from ctxbench.tasks.helmet.task import hf_shuffled
from ctxbench.tasks.realdata import RealArgs, RealDataTask, fit_context, head_cut, hub_file, read_records, renderer_for

HUB = "xinrongzhang2022/InfiniteBench"
SUM_INSTRUCTION = ("You are given a book and you are tasked to summarize it. Write a summary of about 1000 to 1200 words. "
                   "Only write about the plot and characters of the story. Do not discuss the themes or background of the "
                   "book. Do not provide any analysis or commentary.\n\n")
OMITTED = " ... [the rest of the text is omitted]"  # data.py truncate_llama2's postfix


class HelmetSumArgs(RealArgs):
    limit: int | None = Field(100, ge=1, description="test items: the first N of HELMET's shuffle (max_test_samples: 100)")
    shots: int = Field(2, ge=0, description="demonstrations per prompt (HELMET: 2)")
    seed: int = Field(42, description="HELMET's --seed: the item shuffle and the demonstrations (not the suite's seed)")
    plain: bool = Field(False, description="HELMET's prompt without a chat template, ending in 'Summary:' (summ.yaml uses "
                                           "the chat template: false)")


def helmet_order(n: int, seed: int, limit: int | None) -> list[int]:
    """The rows HELMET tests, in its order: data.shuffle(seed).select(range(min(n, limit)))."""
    order = hf_shuffled(n, seed)
    return order[: min(n, limit)] if limit else order


def demonstrations(rows: list[dict[str, Any]], item: dict[str, Any], shots: int, seed: int) -> str:
    """HELMET's demos of an item: the other rows (file order) shuffled with `seed`, the first `shots`."""
    if shots == 0:
        return ""
    others = [r for r in rows if r.get("id") != item.get("id")]
    picked = [others[i] for i in hf_shuffled(len(others), seed)[:shots]]
    demo = "\n\n".join(f"[story text]\nSummary: {str(r['answer'][0]).strip()}" for r in picked)
    return f"For example:\n\n{demo}\n\nNow, read the following story:\n\n"


def omitted_cut(tokenizer, ids, keep: int) -> str:
    """HELMET's truncation: the beginning of the book, then its note that the rest is omitted."""
    return head_cut(tokenizer, ids, keep) + OMITTED if keep < len(ids) else head_cut(tokenizer, ids, keep)


class HelmetInfbenchSum(RealDataTask):
    Args = HelmetSumArgs
    category = "novel"  # as infinitebench/longbook_sum_eng
    metric = "infinitebench/longbook_sum_eng"  # ROUGE-Lsum without a judge; judge/summary scores it as HELMET does
    official_max_new_tokens = 1200
    summary = "{name}: HELMET's InfiniteBench book summaries (its items, demos and prompt), for judge/summary"
    data_source = "xinrongzhang2022/InfiniteBench longbook_sum_eng (hub), or data_file"
    shared_context = "book"

    def local_candidates(self) -> list[str]:
        return ["infinitebench/longbook_sum_eng.jsonl"]

    def load(self, data_dir: Path | None) -> list[dict[str, Any]]:
        hint = "pass data_file: path/to/longbook_sum_eng.jsonl or put it under data_dir/infinitebench/"
        path = self.local_path(data_dir)
        rows = read_records(path or hub_file(HUB, "longbook_sum_eng.jsonl", what=self.name, hint=hint))
        self._all = rows  # the demonstrations are drawn from every book, in file order
        return [rows[i] for i in helmet_order(len(rows), self.args.seed, None)]  # records() keeps the first `limit`

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        rec = self.record(index, ctx)
        head = SUM_INSTRUCTION + demonstrations(self._all, rec, self.args.shots, self.args.seed)
        tail = "\n\nNow summarize the book." + ("\n\nSummary:" if self.args.plain else "")
        renderer = renderer_for(ctx, self.args.plain)
        fit = fit_context(ctx, lambda c: renderer.render(head + c + tail), rec["context"], length=length,
                          max_new_tokens=self.max_new_tokens, what=f"{self.name} item {rec.get('id', index)}", cut=omitted_cut)
        meta = {"id": rec.get("id", index), "truncated_tokens": fit.truncated_tokens, "context_tokens": fit.context_tokens,
                "cluster": self.document_cluster(rec["context"])}
        answers = rec["answer"] if isinstance(rec["answer"], list) else [rec["answer"]]
        return self.make_sample(length=length, index=index, text=fit.rendered, tokens=fit.tokens,
                                answers=[str(a) for a in answers], meta=meta)

    def score(self, prediction: str, sample: Sample) -> float:
        from ctxbench.tasks.infinitebench.metrics import get_score_one

        return get_score_one(prediction, list(sample.answers), "longbook_sum_eng")


@register("task", "helmet/infbench_sum", args=HelmetSumArgs)
def helmet_infbench_sum(**args):
    return HelmetInfbenchSum("helmet/infbench_sum", HelmetSumArgs(**args))
