"""HELMET's own judged summarisation items (helmet/infbench_sum) at parity with HELMET's data.py load_infbench as it
runs (princeton-nlp/HELMET at commit 4526dfbdc512bd9ff721da336bff4e3e75ecfd27). The literals come from running the
official load_infbench("infbench_sum_eng_129672", shots=2, max_test_samples=4, seed=42) in /tmp on the same 6-book
fixture (datasets 5.2.0; load_dataset pointed at the fixture, the Llama-2 tokenizer at a stand-in, which changes
nothing for books this short): the items tested, in order, and the whole plain prompt of the first. No network."""

from __future__ import annotations

import json

import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.prompting import PromptRenderer
from ctxbench.tasks.helmet.judged import OMITTED

OFFICIAL_ORDER = [3, 2, 5, 4]
OFFICIAL_DEMOS = {3: [5, 2], 2: [5, 3], 5: [4, 2], 4: [5, 2]}
OFFICIAL_FIRST_PLAIN = (
    "You are given a book and you are tasked to summarize it. Write a summary of about 1000 to 1200 words. Only write "
    "about the plot and characters of the story. Do not discuss the themes or background of the book. Do not provide "
    "any analysis or commentary.\n\nFor example:\n\n[story text]\nSummary: Expert summary 5.\n\n[story text]\nSummary: "
    "Expert summary 2.\n\nNow, read the following story:\n\nBook 3 text. Book 3 text. Book 3 text. Book 3 text. "
    "Book 3 text. \n\nNow summarize the book.\n\nSummary:")


@pytest.fixture()
def books(tmp_path):
    path = tmp_path / "longbook_sum_eng.jsonl"
    path.write_text("\n".join(json.dumps({"id": i, "context": f"Book {i} text. " * 5, "input": "",
                                          "answer": [f" Expert summary {i}. "], "options": []}) for i in range(6)))
    return path


def test_items_demos_and_prompt_as_helmet_builds_them(smol_tokenizer, books):
    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer, "plain"), data_dir=None)
    task = registry.get("task", "helmet/infbench_sum")(data_file=str(books), limit=4, plain=True)
    made = [task.generate(length=2048, index=i, seed=0, ctx=ctx) for i in range(task.samples_per_length(ctx))]
    assert [s.meta["id"] for s in made] == OFFICIAL_ORDER and task.max_new_tokens == 1200
    assert made[0].prompt == OFFICIAL_FIRST_PLAIN
    for s in made:
        demos = [int(line.split()[-1].rstrip(".")) for line in s.prompt.split("\n") if line.startswith("Summary: Expert")]
        assert demos == OFFICIAL_DEMOS[s.meta["id"]] and s.answers == (f" Expert summary {s.meta['id']}. ",)


def test_a_book_too_long_is_cut_at_its_end_with_helmets_note(smol_tokenizer, tmp_path):
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join(json.dumps({"id": i, "context": f"Chapter {i}. " + "The raft drifted on. " * 400,
                                          "input": "", "answer": ["A raft."], "options": []}) for i in range(3)))
    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer, "plain"), data_dir=None)
    task = registry.get("task", "helmet/infbench_sum")(data_file=str(path), max_new_tokens=100)
    s = task.generate(length=1024, index=0, seed=0, ctx=ctx)
    assert s.prompt_tokens + 100 <= 1024 and s.meta["truncated_tokens"] > 0
    assert f"Chapter {s.meta['id']}. The raft" in s.prompt and (OMITTED + "\n\nNow summarize the book.") in s.prompt


def test_judge_summary_scores_helmets_own_items(ctxbench, tmp_path, books):
    """judge/summary over helmet/infbench_sum: HELMET's items, key points by item id, three judge calls each."""
    from tests.test_judge import JUDGE, FakeJudge

    judge = FakeJudge()
    judge.reply = lambda prompt: ('{"fluency": 1}' if "evaluate the fluency" in prompt else
                                  '{"recall": 2}' if "Key points:" in prompt else '{"precision": 1, "sentence_count": 2}')
    points = tmp_path / "keypoints.jsonl"
    points.write_text("\n".join(json.dumps({"id": i, "keypoints": ["a", "b", "c"]}) for i in range(6)))
    (tmp_path / "s.yaml").write_text(
        f"name: summ\nlengths: [2048]\nsamples: 2\ntasks:\n  - task: judge/summary\n    args:\n      task: helmet/infbench_sum\n"
        f"      task_args: {{data_file: {books}, limit: 2, max_new_tokens: 64}}\n      keypoints_file: {points}\n"
        f"      model: {JUDGE}-own\n      base_url: {judge.url}\n      api_key_env: ''\n")
    try:
        code, _, err = ctxbench("score", "--suite", str(tmp_path / "s.yaml"), "--backend", "echo", "--store",
                                str(tmp_path / "runs"), "--judge-budget", "6")
    finally:
        judge.close()
    assert code == 0, err[-2000:]
    rows = [json.loads(x) for x in next((tmp_path / "runs").rglob("samples.jsonl")).read_text().splitlines()]
    assert sorted(r["meta"]["id"] for r in rows) == [2, 3] and all(r["score"] == pytest.approx(4 / 7) for r in rows)
    assert rows[0]["task"] == "judge/summary/helmet/infbench_sum"
