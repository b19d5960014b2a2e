"""Parity with the official LongBench Pro code, caskcsg/longcontext @ 88fbeb85827b78add4a5354b0c1194a57c176c38
(LongBench-Pro/modules/): its scorer (Evaluator.calculate_metric over utils.py's metrics, NDCG through pytrec_eval
(pytrec-eval-terrier 0.5.11), ROUGE-L through rouge 1.0.1 and jieba 0.42.1) on adversarial outputs, and its prompt
builder (InferenceEngine.prepare_prompt, then the model manager's strip) on one fixture item per task.

The expected values are literals printed by the official code run in /tmp on these inputs (never imported here).
The Summary metric's embedding model (Qwen3-Embedding-8B) was replaced there and here by the same stand-in
(letter-count vectors, cosine similarity), so its half and the composition are compared, not the 8B model's numbers.
An identical summary scores 0 officially: the stand-in's cosine lands at 1.0000000x and the official range
assertion fails inside its try block (range_check: clip offers the intent).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.prompting import PromptRenderer
from ctxbench.tasks.longbenchpro.catalog import TASKS
from ctxbench.tasks.longbenchpro.items import read_items
from ctxbench.tasks.longbenchpro.metrics import metric_value

FIXTURE = Path(__file__).parent / "data"
METRIC = {t.code: t.metric for t in TASKS}


class LetterEmbedder:
    """The stand-in for Qwen3-Embedding-8B used on both sides: letter counts, cosine similarity in torch."""

    def encode(self, texts):
        out = np.zeros((len(texts), 27), dtype=np.float32)
        for i, t in enumerate(texts):
            for ch in t:
                out[i, (ord(ch) % 26) if ch.isalpha() else 26] += 1
        return out

    def similarity(self, a, b):
        import torch

        a, b = torch.tensor(a), torch.tensor(b)
        return torch.nn.functional.normalize(a, dim=1) @ torch.nn.functional.normalize(b, dim=1).T


# (task code, answer, prediction, the official score)
OFFICIAL_SCORES = [
    ('T3.2', ['B'], '[Answer] B', 1.0),
    ('T3.2', ['B'], 'b\nC', 1.0),
    ('T3.2', ['B'], 'The answer is B', 0.0),
    ('T3.2', ['B'], '[答案]b', 1.0),
    ('T3.2', ['B'], '[答案] c [Answer]\n b', 1.0),
    ('T3.2', ['B'], '[Answer] a\n[Answer] B', 1.0),
    ('T3.2', ['B'], '   \n ', 0.0),
    ('T3.2', ['New  York'], '[Answer]\nnew york', 1.0),
    ('T3.2', ['北京'], '[答案]\u3000北京\u3000', 1.0),
    ('T3.2', ['B'], '\n\nB', 1.0),
    ('T5.1', ['[1]', '[3]', '[5]'], '[Answer]\n[1]\n[3]\n[5]', 1.0),
    ('T5.1', ['[1]', '[3]', '[5]'], '[1]\n\n[3]', 0.6666666666666666),
    ('T5.1', ['[1]', '[3]'], '[1]\n[1]\n[3]\n[4]', 0.8),
    ('T5.1', ['[1]', '[3]'], '[2]', 0.0),
    ('T5.1', ['[1]', '[1]', '[3]'], '[1]', 0.6666666666666666),
    ('T8.2', ['12', '7'], '[Answer]\n12\n7', 1.0),
    ('T8.2', ['12', '7'], '7\nfoo', 0.5),
    ('T8.2', ['12', '7'], '127', 0.0),
    ('T8.2', ['12', '12'], '12', 1.0),
    ('T1.1', ['[2]', '[5]', '[1]'], '[2]\n[5]\n[1]', 1.0),
    ('T1.1', ['[2]', '[5]', '[1]'], '[1]\n[5]\n[2]', 0.7899980042460358),
    ('T1.1', ['[2]', '[5]', '[1]'], '[5]\n[9]\n[2]\n[1]', 0.7350069851388743),
    ('T1.1', ['[2]', '[5]', '[1]'], '[2]\n[2]\n[5]', 0.894999002123018),
    ('T1.1', ['[2]', '[5]', '[1]'], '\n[2]\n[5]\n[1]', 1.0),
    ('T1.1', ['[2]', '[5]', '[2]'], '[5]\n[2]', 1.0),
    ('T1.1', ['a', 'b', 'c', 'd'], 'x\ny\nd\nc\nb\na', 0.18588918823849002),
    ('T1.1', ['[2]'], '[2]', 1.0),
    ('T2.1', ['a', 'b', 'c'], 'a\nb\nc', 1.0),
    ('T2.1', ['a', 'b', 'c'], 'c\nb\na', 0.0),
    ('T2.1', ['a', 'b', 'c'], 'a\nb\nc\nd', 0.5),
    ('T2.1', ['a', 'b', 'c'], 'a', 0.0),
    ('T2.1', ['a', 'b', 'c'], 'b\na\nc\na', 0.16666666666666666),
    ('T2.1', ['a', 'b', 'c', 'd'], '[Answer] a\nc\nb\nd', 0.8333333333333334),
    ('T4.2', ['The report says revenue grew.'], 'The report says revenue grew.', 0.9999999378953552),
    ('T4.2', ['The report says revenue grew.', 'Revenue fell.'], '[Answer] revenue grew a lot', 0.667639980200348),
    ('T4.2', ['Revenue fell.'], '...', 0.1856953352689743),
    ('T4.2', ['营收增长了百分之十。'], '营收增长了百分之十。', 0.9999999378953552),
    ('T4.2', ['营收增长了。'], '利润下降', 0.0883883461356163),
    ('T4.2', ['The Report   says'], 'the report\nsays', 0.0),
    ('T1.1', ['[2]', '[5]', '[1]'], '[2]\n\n[5]\n[1]', 0.8400079830158563),
    ('T1.1', ['[2]', '[5]', '[1]'], '[9]\n[8]\n[7]', 0.0),
    ('T1.1', ['Doc A', 'doc b'], '[Answer]\nDOC B\ndoc   a', 0.8597186998521972),
    ('T2.1', ['a', 'b'], 'a\n\nb', 0.3333333333333333),
    ('T7.1', ['第3段', '第7段'], '[答案]\n第3段\n第8段', 0.5),
    ('T11.1', ['Yes'], '[Answer]: Yes', 0.0),
]


@pytest.mark.parametrize("code,answer,prediction,expected", OFFICIAL_SCORES)
def test_scores_equal_the_official_scorer(code, answer, prediction, expected):
    chinese = any("\u4e00" <= ch <= "\u9fff" for ch in "".join(answer))
    got = metric_value(METRIC[code], answer, prediction, chinese=chinese, embedder=LetterEmbedder())
    assert got == expected


def test_an_identical_summary_is_zero_as_officially_run_and_one_when_clipped():
    answer, prediction = ["The Report   says"], "the report\nsays"  # one text once folded: the stand-in's cosine > 1
    assert metric_value("Summary", answer, prediction, embedder=LetterEmbedder()) == 0.0
    assert metric_value("Summary", answer, prediction, embedder=LetterEmbedder(), range_check="clip") == 1.0


# sha256[:16] of the official prompt of each task's 16k fixture item (led by whitespace the official strip removes),
# for both questions
OFFICIAL_PROMPTS = {
    'fixture-01-2/nonthinking': 'ca095563bbe5406f',
    'fixture-02-2/nonthinking': '425ed81769ea4551',
    'fixture-03-2/nonthinking': '2ca6595386290a31',
    'fixture-04-2/nonthinking': '0bedefd881077db4',
    'fixture-05-2/nonthinking': '259ff1f60af01c32',
    'fixture-06-2/nonthinking': '3709d858ae0244b8',
    'fixture-07-2/nonthinking': 'a76db7148a65a89e',
    'fixture-08-2/nonthinking': '067b5a89b312e933',
    'fixture-09-2/nonthinking': 'a8ed079c65a5062b',
    'fixture-10-2/nonthinking': '896c50311af07c64',
    'fixture-11-2/nonthinking': '2c8554ad74a41855',
    'fixture-12-2/nonthinking': '2b2bd3da8564dd1e',
    'fixture-13-2/nonthinking': 'c11688d173b3e97f',
    'fixture-14-2/nonthinking': '974a4dc11292aab6',
    'fixture-15-2/nonthinking': '2b27828b01eff9c4',
    'fixture-16-2/nonthinking': '8c48968432a1f91d',
    'fixture-17-2/nonthinking': '2bb6d1b480c8711c',
    'fixture-18-2/nonthinking': 'f39e3fec8aa7c80c',
    'fixture-19-2/nonthinking': 'd5d14a892dd89a6e',
    'fixture-20-2/nonthinking': '33c33c5ef1aeb298',
    'fixture-21-2/nonthinking': '11f70e36fe050044',
    'fixture-22-2/nonthinking': '5eb4ca473bb12c90',
    'fixture-23-2/nonthinking': '7fc4994592e85f1b',
    'fixture-24-2/nonthinking': '33144ef808b7b662',
    'fixture-25-2/nonthinking': '48e39922f0358cac',
    'fixture-01-2/thinking': '3a163e8157b79862',
    'fixture-02-2/thinking': '054e160ac88537d3',
    'fixture-03-2/thinking': 'f4df85298bd8cf33',
    'fixture-04-2/thinking': 'e18363d33dbeb1ba',
    'fixture-05-2/thinking': 'f112ee16fb69c0be',
    'fixture-06-2/thinking': 'd35eb14de9ff0a49',
    'fixture-07-2/thinking': '97c22c5cb6c45619',
    'fixture-08-2/thinking': 'f785e5f18e8575fe',
    'fixture-09-2/thinking': 'b66f798311e46bba',
    'fixture-10-2/thinking': '2cd960921fd3bdb9',
    'fixture-11-2/thinking': '6b9dec03102c66f0',
    'fixture-12-2/thinking': '31925e490566c372',
    'fixture-13-2/thinking': '626b55391a015c4f',
    'fixture-14-2/thinking': 'f95379e639884a3a',
    'fixture-15-2/thinking': '997dc76923332c3b',
    'fixture-16-2/thinking': '0be41df9cd8c7272',
    'fixture-17-2/thinking': '39b03b61c98bd2cf',
    'fixture-18-2/thinking': 'c88f6be4a4747866',
    'fixture-19-2/thinking': '77d0397bd2d20b37',
    'fixture-20-2/thinking': '72ff170c65bf8319',
    'fixture-21-2/thinking': 'cdeb0dda0c882255',
    'fixture-22-2/thinking': 'bbd9c4003e9c193f',
    'fixture-23-2/thinking': '0836c0055fd69024',
    'fixture-24-2/thinking': 'a9460aec868fdd45',
    'fixture-25-2/thinking': '61a4fbdd1e5c957f',
}
OFFICIAL_FIRST = "[1] Paragraph 1 of report 1-0: the tapir census team counted animals in plot 0 and filed note 0.\n[2] Paragraph 2 of report 1-0: the tapir census team counted animals in plot 7 and filed note 1.\n[3] Paragraph 3 of report 1-0: the tapir census team counted animals in plot 1 and filed note 2.\n[4] Paragraph 4 of report 1-0: the tapir census team counted animals in plot 8 and filed note 3.\n[5] Paragraph 5 of report 1-0: the tapir census team counted animals in plot 2 and filed note 4.\n[6] Paragraph 6 of report 1-0: the tapir census team counted animals in plot 9 and filed note 5.\n\n\n\nTask (T1.1 Global Cohesive Retrieval), question 2: answer from the document above.\nGive only the final answer after [Answer], one item per line, without explanation."  # fixture-01-1, nonthinking, in full


def test_prompts_equal_the_official_builder():
    items = {it.id: it for it in read_items(FIXTURE / "longbenchpro" / "longbench_pro.json")}
    assert items["fixture-01-1"].prompt("nonthinking") == OFFICIAL_FIRST
    got = {f"{key}/{q}": hashlib.sha256(items[key].prompt(q).encode()).hexdigest()[:16]
           for key in {k.split("/")[0] for k in OFFICIAL_PROMPTS} for q in ("nonthinking", "thinking")}
    assert got == OFFICIAL_PROMPTS and len({k.split("/")[0] for k in got}) == len(TASKS)


def test_a_sample_sends_the_official_prompt_as_one_user_message(smol_tokenizer, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=FIXTURE)
    task = registry.get("task", TASKS[0].task_name)(question="thinking")
    sample = task.generate(length=16384, index=0, seed=0, ctx=ctx)
    item = next(it for it in read_items(FIXTURE / "longbenchpro" / "longbench_pro.json") if it.id == "fixture-01-2")
    text = item.prompt("thinking")
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == OFFICIAL_PROMPTS["fixture-01-2/thinking"]
    assert sample.prompt == ctx.renderer.render([{"role": "user", "content": text}]).text
    assert sample.meta["id"] == "fixture-01-2" and sample.answers == ("[2]", "[3]", "[1]") and sample.meta["language"] == "Chinese"
