"""The opt-in LLM judge (judge/qa): HELMET's answer cut and verdict parsing, the cost guard (--judge-budget), and a
run against a local fake OpenAI-compatible judge that counts its calls: cached and resumable, a failure is an error
row retried on rerun, never a 0. No network."""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.judge import JudgeBudget, JudgeCost, check_budget, parse_budget
from ctxbench.tasks.judge import parsed_answer, qa_verdict

JUDGE = f"judge-4o-{uuid.uuid4().hex[:8]}"  # the verdict cache is per judge model: a fresh name starts it empty


class FakeJudge:
    """An OpenAI-compatible chat server on 127.0.0.1 that answers every judge prompt with `verdict` and counts calls."""

    def __init__(self):
        self.calls = 0
        self.verdict = 'Reasoning: fine. {"fluency": 1, "correctness": 3}'
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, body):
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send({"data": [{"id": JUDGE}]})

            def do_POST(self):
                json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.calls += 1
                self._send({"model": JUDGE, "choices": [{"message": {"content": outer.verdict}}],
                            "usage": {"prompt_tokens": 700, "completion_tokens": 20}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

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
    data = tmp_path / "nqa.jsonl"
    narrativeqa(data)
    text = (f"name: judged\nlengths: [1024]\nsamples: {samples}\ntasks:\n  - task: judge/qa\n    args:\n"
            f"      task: longbench/narrativeqa\n      task_args: {{data_file: {data}}}\n      model: {JUDGE}\n"
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


@pytest.mark.parametrize("text,verdict", [
    ('think... {"fluency": 1, "correctness": 2}', {"fluency": 1, "correctness": 2}),
    ('{"fluency": 0, "correctness": 3} then {"fluency": 1, "correctness": 1}', {"fluency": 1, "correctness": 1}),  # last
    ('{"fluency": 1}', None),  # a score missing: no verdict (HELMET skips it; here an error row)
    ('{"fluency": 1, "correctness": 5}', None),  # out of the rubric's range
    ("no json at all", None),
])
def test_verdict_parsing(text, verdict):
    assert qa_verdict(text) == verdict


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

    fake_judge.verdict = "I cannot decide."  # no readable verdict: error rows, never zeros
    code, _, err = ctxbench(*score, "--judge-budget", "3")
    assert "judge: 3 paid calls planned" in err and fake_judge.calls == 3
    rows = [json.loads(x) for x in next(store.rglob("samples.jsonl")).read_text().splitlines()]
    assert all(r["score"] is None and r["error"].startswith("judge: no readable verdict") for r in rows)

    fake_judge.verdict = 'The answer matches. {"fluency": 1, "correctness": 2}'
    code, _, err = ctxbench(*score, "--judge-budget", "3")  # the rerun retries the failed samples
    assert code == 0, err
    assert fake_judge.calls == 6
    latest = {json.loads(x)["id"]: json.loads(x) for x in next(store.rglob("samples.jsonl")).read_text().splitlines()}
    assert all(r["score"] == pytest.approx(2 / 3) for r in latest.values())
    judge = next(iter(latest.values()))["judge"]
    assert judge["model"] == JUDGE and judge["version"] == JUDGE and judge["verdict"] == {"fluency": 1, "correctness": 2}

    code, _, err = ctxbench(*score)  # finished: nothing pending, no budget needed, no call
    assert code == 0 and fake_judge.calls == 6 and "all 3 samples are scored already" in err
    code, _, err = ctxbench(*score, "--fresh", "--judge-budget", "3")  # re-scored from scratch: every verdict cached
    assert code == 0 and fake_judge.calls == 6
    assert all(json.loads(x)["judge"]["cached"] for x in next(store.rglob("samples.jsonl")).read_text().splitlines())
