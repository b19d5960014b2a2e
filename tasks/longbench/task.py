"""LongBench v1 (`longbench/<dataset>`) and LongBench-E (`longbench/<dataset>_e`), THUDM/LongBench.

Prompts (config/dataset2prompt.json), generation lengths (dataset2maxlen.json), metrics and the
first-line cut are the official ones. Two things differ on purpose: the chat template is skipped
for the six datasets the official pred.py skips it for by rendering them with the plain template
(recorded in meta["template"]), and truncation cuts only the context and is measured on the final
rendered prompt, so prompt + generation always fits the sample's length (the official code cuts
before templating and can overflow). samsum's extra newline stop is not sent to the backend; the
first-line cut makes the score the same.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import OfflineError
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Sample
from ctxbench.tasks.longbench.metrics import best
from ctxbench.tasks.realdata import (
    RealArgs,
    RealDataTask,
    first_line,
    fit_context,
    hub_dataset,
    hub_file,
    read_records,
    renderer_for,
    split_template,
)

HUB = "THUDM/LongBench"

PROMPTS = {
    "narrativeqa": "You are given a story, which can be either a novel or a movie script, and a question. Answer the question asconcisely as you can, using a single phrase if possible. Do not provide any explanation.\n\nStory: {context}\n\nNow, answer the question based on the story asconcisely as you can, using a single phrase if possible. Do not provide any explanation.\n\nQuestion: {input}\n\nAnswer:",
    "qasper": "You are given a scientific article and a question. Answer the question as concisely as you can, using a single phrase or sentence if possible. If the question cannot be answered based on the information in the article, write \"unanswerable\". If the question is a yes/no question, answer \"yes\", \"no\", or \"unanswerable\". Do not provide any explanation.\n\nArticle: {context}\n\n Answer the question based on the above article as concisely as you can, using a single phrase or sentence if possible. If the question cannot be answered based on the information in the article, write \"unanswerable\". If the question is a yes/no question, answer \"yes\", \"no\", or \"unanswerable\". Do not provide any explanation.\n\nQuestion: {input}\n\nAnswer:",
    "multifieldqa_en": "Read the following text and answer briefly.\n\n{context}\n\nNow, answer the following question based on the above text, only give me the answer and do not output any other words.\n\nQuestion: {input}\nAnswer:",
    "multifieldqa_zh": "阅读以下文字并用中文简短回答：\n\n{context}\n\n现在请基于上面的文章回答下面的问题，只告诉我答案，不要输出任何其他字词。\n\n问题：{input}\n回答：",
    "hotpotqa": "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n\nThe following are given passages.\n{context}\n\nAnswer the question based on the given passages. Only give me the answer and do not output any other words.\n\nQuestion: {input}\nAnswer:",
    "2wikimqa": "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n\nThe following are given passages.\n{context}\n\nAnswer the question based on the given passages. Only give me the answer and do not output any other words.\n\nQuestion: {input}\nAnswer:",
    "musique": "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n\nThe following are given passages.\n{context}\n\nAnswer the question based on the given passages. Only give me the answer and do not output any other words.\n\nQuestion: {input}\nAnswer:",
    "dureader": "请基于给定的文章回答下述问题。\n\n文章：{context}\n\n请基于上述文章回答下面的问题。\n\n问题：{input}\n回答：",
    "gov_report": "You are given a report by a government agency. Write a one-page summary of the report.\n\nReport:\n{context}\n\nNow, write a one-page summary of the report.\n\nSummary:",
    "qmsum": "You are given a meeting transcript and a query containing a question or instruction. Answer the query in one or more sentences.\n\nTranscript:\n{context}\n\nNow, answer the query based on the above meeting transcript in one or more sentences.\n\nQuery: {input}\nAnswer:",
    "multi_news": "You are given several news passages. Write a one-page summary of all news. \n\nNews:\n{context}\n\nNow, write a one-page summary of all the news.\n\nSummary:",
    "vcsum": "下面有一段会议记录，请你阅读后，写一段总结，总结会议的内容。\n会议记录：\n{context}\n\n会议总结：",
    "trec": "Please determine the type of the question below. Here are some examples of questions.\n\n{context}\n{input}",
    "triviaqa": "Answer the question based on the given passage. Only give me the answer and do not output any other words. The following are some examples.\n\n{context}\n\n{input}",
    "samsum": "Summarize the dialogue into a few short sentences. The following are some examples.\n\n{context}\n\n{input}",
    "lsht": "请判断给定新闻的类别，下面是一些例子。\n\n{context}\n{input}",
    "passage_count": "There are some paragraphs below sourced from Wikipedia. Some of them may be duplicates. Please carefully read these paragraphs and determine how many unique paragraphs there are after removing duplicates. In other words, how many non-repeating paragraphs are there in total?\n\n{context}\n\nPlease enter the final count of unique paragraphs after removing duplicates. The output format should only contain the number, such as 1, 2, 3, and so on.\n\nThe final answer is: ",
    "passage_retrieval_en": "Here are 30 paragraphs from Wikipedia, along with an abstract. Please determine which paragraph the abstract is from.\n\n{context}\n\nThe following is an abstract.\n\n{input}\n\nPlease enter the number of the paragraph that the abstract is from. The answer format must be like \"Paragraph 1\", \"Paragraph 2\", etc.\n\nThe answer is: ",
    "passage_retrieval_zh": "以下是若干段落文字，以及其中一个段落的摘要。请确定给定的摘要出自哪一段。\n\n{context}\n\n下面是一个摘要\n\n{input}\n\n请输入摘要所属段落的编号。答案格式必须是\"段落1\"，\"段落2\"等格式\n\n答案是：",
    "lcc": "Please complete the code given below. \n{context}Next line of code:\n",
    "repobench-p": "Please complete the code given below. \n{context}{input}Next line of code:\n",
}

# dataset -> (metric, max new tokens, category)
SPEC: dict[str, tuple[str, int, str]] = {
    "narrativeqa": ("qa_f1", 128, "single-doc QA"),
    "qasper": ("qa_f1", 128, "single-doc QA"),
    "multifieldqa_en": ("qa_f1", 64, "single-doc QA"),
    "multifieldqa_zh": ("qa_f1_zh", 64, "single-doc QA"),
    "hotpotqa": ("qa_f1", 32, "multi-doc QA"),
    "2wikimqa": ("qa_f1", 32, "multi-doc QA"),
    "musique": ("qa_f1", 32, "multi-doc QA"),
    "dureader": ("rouge_zh", 128, "multi-doc QA"),
    "gov_report": ("rouge", 512, "summarization"),
    "qmsum": ("rouge", 512, "summarization"),
    "multi_news": ("rouge", 512, "summarization"),
    "vcsum": ("rouge_zh", 512, "summarization"),
    "trec": ("classification", 64, "few-shot"),
    "triviaqa": ("qa_f1", 32, "few-shot"),
    "samsum": ("rouge", 128, "few-shot"),
    "lsht": ("classification", 64, "few-shot"),
    "passage_count": ("count", 32, "synthetic"),
    "passage_retrieval_en": ("retrieval", 32, "synthetic"),
    "passage_retrieval_zh": ("retrieval_zh", 32, "synthetic"),
    "lcc": ("code_sim", 64, "code"),
    "repobench-p": ("code_sim", 64, "code"),
}
NO_CHAT_TEMPLATE = frozenset({"trec", "triviaqa", "samsum", "lsht", "lcc", "repobench-p"})
FIRST_LINE = frozenset({"trec", "triviaqa", "samsum", "lsht"})
LONGBENCH_E = ("qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "gov_report", "multi_news", "trec", "triviaqa", "samsum",
               "passage_count", "passage_retrieval_en", "lcc", "repobench-p")
ENGLISH = tuple(d for d in SPEC if d not in {"multifieldqa_zh", "dureader", "vcsum", "lsht", "passage_retrieval_zh"})


def bucket(record_length: int) -> str:
    """LongBench-E's length bucket of a record (its `length` field: words, or characters for Chinese)."""
    return "0-4k" if record_length < 4000 else "4-8k" if record_length < 8000 else "8k+"


class LongBench(RealDataTask):
    summary = "LongBench {name}: the official examples and metric, fitted to the length by middle truncation"
    data_source = "THUDM/LongBench (hub), or data_file"
    shared_context = "document"
    Args = RealArgs

    def __init__(self, dataset: str, e: bool, args: RealArgs):
        self.dataset, self.e = dataset, e
        super().__init__(f"longbench/{dataset}{'_e' if e else ''}", args)
        metric, self.official_max_new_tokens, self.category = SPEC[dataset]
        self.metric = f"longbench/{metric}"

    @property
    def config(self) -> str:
        """The hub config / file name: the dataset, with _e for LongBench-E."""
        return f"{self.dataset}_e" if self.e else self.dataset

    def local_candidates(self) -> list[str]:
        return [f"longbench/{self.config}.jsonl", f"longbench/data/{self.config}.jsonl"]

    def load(self, data_dir: Path | None) -> list[dict[str, Any]]:
        hint = f"pass data_file: path/to/{self.config}.jsonl (from LongBench's data.zip) or put it under data_dir/longbench/"
        path = self.local_path(data_dir)
        if path is not None:
            return read_records(path)
        try:
            return hub_dataset(HUB, name=self.config, split="test", what=self.name, hint=hint)
        except OfflineError:
            # the hub dataset is script-based; newer `datasets` cannot run scripts, so read the official data.zip instead
            with zipfile.ZipFile(hub_file(HUB, "data.zip", what=self.name, hint=hint)) as z:
                text = z.read(f"data/{self.config}.jsonl").decode("utf-8")
            return [json.loads(line) for line in io.StringIO(text) if line.strip()]

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        rec = self.record(index, ctx)
        head, tail = split_template(PROMPTS[self.dataset], input=rec["input"])
        renderer = renderer_for(ctx, self.dataset in NO_CHAT_TEMPLATE)
        fit = fit_context(ctx, lambda c: renderer.render(head + c + tail), rec["context"], length=length,
                          max_new_tokens=self.max_new_tokens, what=f"{self.name} example {index}")
        meta = {
            "id": rec.get("_id"), "dataset": self.dataset, "language": rec.get("language"), "all_classes": rec.get("all_classes"),
            "record_length": rec.get("length"), "template": renderer.template,
            "truncated_tokens": fit.truncated_tokens, "context_tokens": fit.context_tokens,
            "cluster": self.document_cluster(rec["context"]),
        }
        if self.e:
            meta["bucket"] = bucket(int(rec["length"]))
        answers = [str(a) for a in rec["answers"]]
        return self.make_sample(length=length, index=index, text=fit.rendered, tokens=fit.tokens, answers=answers, meta=meta)

    def score(self, prediction: str, sample: Sample) -> float:
        if self.dataset in FIRST_LINE:
            prediction = first_line(prediction)
        return best(self.metric.split("/", 1)[1], prediction, sample.answers, sample.meta.get("all_classes") or ())


def _register(dataset: str, e: bool) -> None:
    def factory(**args):
        return LongBench(dataset, e, RealArgs(**args))

    register("task", f"longbench/{dataset}{'_e' if e else ''}", args=RealArgs)(factory)


for _d in SPEC:
    _register(_d, False)
for _d in LONGBENCH_E:
    _register(_d, True)
