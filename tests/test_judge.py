"""The opt-in LLM judge (judge/qa): HELMET's answer cut and verdict parsing, the cost guard (--judge-budget), and a
run against a local fake OpenAI-compatible judge that counts its calls: cached and resumable, a failure is an error
row retried on rerun, never a 0. No network."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.run.judge_budget import JudgeBudget, JudgeCost, check_budget, parse_budget
from ctxbench.tasks.judge.task import parsed_answer
from tests.json_server import json_server

JUDGE = f"judge-4o-{uuid.uuid4().hex[:8]}"  # the verdict cache is per judge model: a fresh name starts it empty


class FakeJudge:
    """An OpenAI-compatible chat server on 127.0.0.1 that answers every judge prompt with `verdict` and counts calls."""

    def __init__(self):
        self.calls = 0
        self.seeds = []  # the sampling seed of every call, in order
        self.bodies = []
        self.verdict = 'Reasoning: fine. {"fluency": 1, "correctness": 3}'
        self.reply = None  # prompt -> the judge's output, where it depends on the prompt
        self.usage = {"prompt_tokens": 700, "completion_tokens": 20}  # as the judge's server reports each call
        self.server, self.url = json_server(lambda: {"data": [{"id": JUDGE}]}, self._answer)

    def _answer(self, body: dict) -> dict:
        self.calls += 1
        self.seeds.append(body.get("seed"))
        self.bodies.append(body)
        prompt = body["messages"][-1]["content"]
        text = self.reply(prompt) if self.reply else self.verdict
        return {"model": JUDGE, "choices": [{"message": {"content": text}}],
                "usage": self.usage}

    def close(self):
        self.server.shutdown()


@pytest.fixture()
def fake_judge():
    judge = FakeJudge()
    yield judge
    judge.close()


def narrativeqa(path, n=3):
    """A hand-made LongBench file in the official format (the judged task's data)."""
    path.write_text("\n".join(json.dumps({"_id": f"q{i}", "input": f"Where do the tapirs go ({i})?", "answers": ["the river"],
                                          "context": "The tapirs walked to the river at dawn. " * 20, "length": 200,
                                          "language": "en", "all_classes": None, "dataset": "narrativeqa"}) for i in range(n)))


def suite_yaml(tmp_path, url, samples=3):
    """A suite judging hand-made NarrativeQA items with a judge model of a fresh name (an empty verdict cache)."""
    data = tmp_path / "nqa.jsonl"
    narrativeqa(data)
    text = (f"name: judged\nlengths: [1024]\nsamples: {samples}\ntasks:\n  - task: judge/qa\n    args:\n"
            f"      task: longbench/narrativeqa\n      task_args: {{data_file: {data}}}\n      model: {JUDGE}-{uuid.uuid4().hex[:8]}\n"
            f"      base_url: {url}\n      api_key_env: ''\n")
    (tmp_path / "judged.yaml").write_text(text)
    return str(tmp_path / "judged.yaml")


# HELMET's parse_output on hand-made cases: the text after "Answer:" (any case), else the whole; newlines to spaces
@pytest.mark.parametrize("output,parsed", [
    ("Answer: the river", "the river"),
    ("They walk.\nAnswer: the river\nbecause", "the river because"),  # newlines became spaces before the search
    ("answer: answer: the river", "the river"),  # a repeated prefix is removed once more
    ("the river", "the river"),
    ("  \n", ""),
])
def test_answer_cut_as_helmet(output, parsed):
    assert parsed_answer(output) == parsed


def test_budget_parsing_and_check():
    assert parse_budget("500") == JudgeBudget(calls=500) and parse_budget("tokens=2M") == JudgeBudget(tokens=2 << 20)
    assert parse_budget("calls=5,tokens=10k") == JudgeBudget(calls=5, tokens=10240) and parse_budget(None) is None
    for bad in ("lots", "calls=-1", "money=5", "calls=1,calls=2", ""):
        with pytest.raises(ConfigError, match="--judge-budget"):
            parse_budget(bad)
    check_budget(JudgeCost(0, 0), None)  # no judge, no budget needed
    with pytest.raises(ConfigError, match="pass --judge-budget 3"):
        check_budget(JudgeCost(3, 900), None)
    with pytest.raises(ConfigError, match="tokens 900 > 800"):
        check_budget(JudgeCost(3, 900), JudgeBudget(calls=5, tokens=800))


def test_judged_run_is_guarded_cached_and_resumable(ctxbench, tmp_path, fake_judge):
    suite, store = suite_yaml(tmp_path, fake_judge.url), tmp_path / "runs"
    score = ("score", "--suite", suite, "--backend", "echo", "--store", str(store))
    code, _, err = ctxbench(*score)
    assert code == 2 and "pass --judge-budget 3" in err and not store.exists() and fake_judge.calls == 0
    code, _, err = ctxbench(*score, "--judge-budget", "2")
    assert code == 2 and "calls 3 > 2" in err and not store.exists()
    keyed = Path(suite).with_name("keyed.yaml")
    keyed.write_text(Path(suite).read_text().replace("api_key_env: ''", "api_key_env: CTXBENCH_TEST_NO_SUCH_KEY"))
    code, _, err = ctxbench("score", "--suite", str(keyed), "--backend", "echo", "--store", str(store), "--judge-budget", "3")
    assert code == 2 and "api_key_env: environment variable CTXBENCH_TEST_NO_SUCH_KEY is not set" in err and not store.exists()

    fake_judge.verdict = "I cannot decide."  # no readable verdict: error rows, never zeros
    code, _, err = ctxbench(*score, "--judge-budget", "3")
    assert "judge: 3 paid calls planned" in err and fake_judge.calls == 3
    rows = [json.loads(x) for x in next(store.rglob("samples.jsonl")).read_text().splitlines()]
    assert all(r["score"] is None and r["error"].startswith("judge: refused verdict (helmet-qa call 0: qa verdict: no "
                                                            "readable JSON object") for r in rows)

    fake_judge.verdict = 'The answer matches. {"fluency": 1, "correctness": 2}'
    code, _, err = ctxbench(*score, "--judge-budget", "3")  # the rerun retries the failed samples
    assert code == 0, err
    assert fake_judge.calls == 6 and fake_judge.seeds == [42] * 3 + [43] * 3  # a retry after a refusal: its own seed
    latest = {json.loads(x)["id"]: json.loads(x) for x in next(store.rglob("samples.jsonl")).read_text().splitlines()}
    assert all(r["score"] == pytest.approx(2 / 3) for r in latest.values())
    judge = next(iter(latest.values()))["judge"]
    assert judge["model"].startswith(JUDGE) and judge["version"] == judge["model"] and judge["verdicts"] == [{"fluency": 1, "correctness": 2}]

    code, _, err = ctxbench(*score)  # finished: nothing pending, no budget needed, no call
    assert code == 0 and fake_judge.calls == 6 and "all 3 samples are scored already" in err
    code, _, err = ctxbench(*score, "--fresh", "--judge-budget", "3")  # re-scored from scratch: every verdict cached
    assert code == 0 and fake_judge.calls == 6
    assert all(json.loads(x)["judge"]["cached"] == 1 for x in next(store.rglob("samples.jsonl")).read_text().splitlines())


def test_summary_judge_scores_fluency_times_f1(ctxbench, tmp_path, fake_judge):
    from ctxbench.tasks.judge.prompts import FLUENCY_BOOK, PRECISION_BOOK, RECALL_BOOK

    data = tmp_path / "longbook_sum_eng.jsonl"
    data.write_text("\n".join(json.dumps({"id": i, "context": f"Book {i}. " + "The raft drifted down the river. " * 30, "input": "",
                                          "answer": [f"Family {i} travels down the river."], "options": []}) for i in range(2)))
    points = tmp_path / "keypoints.jsonl"
    points.write_text("\n".join(json.dumps({"id": i, "keypoints": [f"Family {i} travels.", "On a raft.", "Down a river."]})
                                for i in range(2)))
    seen = []

    def reply(prompt):
        which = next(p for p in (FLUENCY_BOOK, RECALL_BOOK, PRECISION_BOOK) if prompt.startswith(p[:150]))
        seen.append(which)
        return {FLUENCY_BOOK: '{"fluency": 1}', RECALL_BOOK: '{"recall": 2}'}.get(which, '{"precision": 1, "sentence_count": 2}')

    fake_judge.reply = reply
    (tmp_path / "s.yaml").write_text(
        f"name: summ\nlengths: [1024]\nsamples: 2\ntasks:\n  - task: judge/summary\n    args:\n"
        f"      task_args: {{data_file: {data}, max_new_tokens: 200}}\n      keypoints_file: {points}\n      model: {JUDGE}-summ\n"
        f"      base_url: {fake_judge.url}\n      api_key_env: ''\n")
    code, _, err = ctxbench("score", "--suite", str(tmp_path / "s.yaml"), "--backend", "echo", "--store",
                            str(tmp_path / "runs"), "--judge-budget", "6")
    assert code == 0, err
    # the echo model writes the same text for both books: its fluency prompt is paid for once, then read from the cache
    assert fake_judge.calls == 5 and sorted(seen) == sorted([FLUENCY_BOOK, RECALL_BOOK, RECALL_BOOK, PRECISION_BOOK, PRECISION_BOOK])
    rows = [json.loads(x) for x in next((tmp_path / "runs").rglob("samples.jsonl")).read_text().splitlines()]
    # recall 2 of 3 key points, precision 1 of 2 sentences: F1 = 2 * (2/3 * 1/2) / (2/3 + 1/2) = 4/7, times fluency 1
    assert [r["score"] for r in rows] == [pytest.approx(4 / 7)] * 2 and rows[0]["judge"]["protocol"] == "helmet-summary"
