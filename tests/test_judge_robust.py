"""The judge never takes the run down (issue 32): a judge that cannot be reached, refuses the credentials or gets a
prompt over its context gives that sample an error row (a rerun retries it), never exit 2 after writing; an answer
far over its token budget is cut before the judge sees it, and flagged; --judge-budget is held against the calls
and tokens really spent, stopping the run resumably once they reach it. Also: the judge is sent HELMET's sampling
(temperature 0.1, top_p 0.9, seed 42) and token limits (QA 2048, summary 4096), and they are its identity (the cache
key). Local fake servers only, no network."""

from __future__ import annotations

import json
import socket
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ctxbench.harness.core.types import Sample
from ctxbench.tasks.judge.task import MAX_CHARS_PER_TOKEN, within_budget
from tests.test_judge import FakeJudge, suite_yaml


@pytest.fixture()
def fake_judge():
    judge = FakeJudge()
    yield judge
    judge.close()


def qa_judge(url: str, tmp_path, **more):
    from ctxbench.harness.core import registry

    data = tmp_path / "nqa.jsonl"
    data.write_text("")
    return registry.get("task", "judge/qa")(task="longbench/narrativeqa", task_args={"data_file": str(data)},
                                            model=f"judge-{uuid.uuid4().hex[:8]}", base_url=url, api_key_env="", **more)


def sample(max_new_tokens: int = 32) -> Sample:
    return Sample(task="judge/qa/longbench/narrativeqa", length=1024, index=0, prompt="p", answers=("the river",),
                  prompt_tokens=10, max_new_tokens=max_new_tokens, metric="judge/qa", meta={"question": "Where?"})


def refusing_server(status: int) -> tuple[ThreadingHTTPServer, str]:
    """A server that answers every request with `status` (401: credentials refused)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _refuse(self):
            body = b'{"error": {"message": "invalid api key"}}'
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _refuse

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_helmet_sampling_and_limits_are_sent_and_are_the_judges_identity(fake_judge, tmp_path):
    task = qa_judge(fake_judge.url, tmp_path)
    score, extra, error = task.score_row("Answer: the river", sample())
    assert error is None and score == 1.0
    body = fake_judge.bodies[0]
    assert (body["temperature"], body["top_p"], body["seed"], body["max_tokens"]) == (0.1, 0.9, 42, 2048)
    assert [m["role"] for m in body["messages"]] == ["user"]  # HELMET's judge has no system message
    judge = extra["judge"]
    assert (judge["temperature"], judge["top_p"], judge["seed"], judge["max_tokens"]) == (0.1, 0.9, 42, 2048)
    keys = {task.cache_key("x")}
    for change in ({"top_p": 1.0}, {"seed": 7}, {"max_tokens": 1024}, {"temperature": 0.0}):
        other = qa_judge(fake_judge.url, tmp_path, **change)
        other.args = other.args.model_copy(update={"model": task.args.model})
        keys.add(other.cache_key("x"))
    assert len(keys) == 5  # each setting changes the verdict's cache key

    from ctxbench.harness.core import registry

    summ = registry.get("task", "judge/summary")(task_args={"data_file": str(tmp_path / "x.jsonl")}, keypoints_file="k.jsonl")
    assert summ.args.max_tokens == 4096 and summ.settings["top_p"] == 0.9


def test_an_answer_far_over_its_budget_is_cut_and_flagged(fake_judge, tmp_path):
    assert within_budget("short", 32) == ("short", [])
    huge = "Answer: " + "river " * 200_000  # ~1.2 MB (4,700 times the cut), from a server that ignored max_tokens
    score, extra, error = qa_judge(fake_judge.url, tmp_path).score_row(huge, sample(max_new_tokens=32))
    assert error is None and score == 1.0
    sent = fake_judge.bodies[0]["messages"][0]["content"]
    assert len(sent) < 5000 and "river " * 40 in sent
    assert extra["judge"]["flags"] == [f"answer cut at {32 * MAX_CHARS_PER_TOKEN:,} of 1,199,999 characters before "
                                              "judging (over its 32-token budget)"]


@pytest.mark.parametrize("case", ["unreachable", "401", "over-context"])
def test_a_failing_judge_is_an_error_row_not_a_stopped_run(case, fake_judge, tmp_path):
    server = None
    if case == "unreachable":
        task = qa_judge(closed_port_url(), tmp_path, backend_args={"max_retries": 0, "connect_timeout": 2})
    elif case == "401":
        server, url = refusing_server(401)
        task = qa_judge(url, tmp_path, backend_args={"max_retries": 0})
    else:
        task = qa_judge(fake_judge.url, tmp_path, backend_args={"context_length": 2500})
    try:
        first = task.score_row("Answer: the river", sample())
        second = task.score_row("Answer: the sea", sample())
    finally:
        if server:
            server.shutdown()
    for score, extra, error in (first, second):
        assert score is None and error.startswith("judge: ") and extra["judge"]["model"] == task.args.model
    want = {"unreachable": "no usable answer", "401": "refused the credentials (HTTP 401)", "over-context": "> context 2500"}[case]
    assert want in first[2] and fake_judge.calls == 0


def test_a_refused_judge_mid_run_gives_error_rows_not_exit_2(ctxbench, tmp_path):
    server, url = refusing_server(401)
    try:
        suite = suite_yaml(tmp_path, url)
        code, _, err = ctxbench("score", "--suite", suite, "--backend", "echo", "--store", str(tmp_path / "runs"),
                                "--judge-budget", "3")
    finally:
        server.shutdown()
    assert code == 3 and "3 samples failed (judge: 3); rerun the same command to retry them" in err, err[-2000:]
    rows = [json.loads(x) for x in next((tmp_path / "runs").rglob("samples.jsonl")).read_text().splitlines()]
    assert len(rows) == 3 and all(r["score"] is None and "HTTP 401" in r["error"] for r in rows)


def test_the_budget_holds_against_real_use_and_the_run_resumes(ctxbench, tmp_path, fake_judge):
    """A judge whose real use (as its server reports it) is far over the plan's estimate: the run stops once real
    spending reaches --judge-budget, and a rerun resumes without paying again for what was cached."""
    fake_judge.usage = {"prompt_tokens": 30000, "completion_tokens": 20}
    suite = suite_yaml(tmp_path, fake_judge.url)
    score = ("score", "--suite", suite, "--backend", "echo", "--store", str(tmp_path / "runs"), "--batch-size", "1")
    code, _, err = ctxbench(*score, "--judge-budget", "calls=3,tokens=40k")
    assert code == 130 and "judge: --judge-budget reached by real use (tokens 60,040 of 40,960" in err
    assert fake_judge.calls == 2  # the estimate allowed three calls; real use stopped the third
    rows = [json.loads(x) for x in next((tmp_path / "runs").rglob("samples.jsonl")).read_text().splitlines()]
    assert [r["score"] for r in rows] == [1.0, 1.0]
    code, _, err = ctxbench(*score, "--judge-budget", "calls=3,tokens=100k")
    assert code == 0 and fake_judge.calls == 3, err[-2000:]


def test_refused_verdicts_are_never_read_back_and_a_retry_has_its_own_seed(fake_judge, tmp_path):
    task = qa_judge(fake_judge.url, tmp_path)
    fake_judge.verdict = "I cannot decide."
    score, extra, error = task.score_row("Answer: the river", sample())
    assert score is None and "refused verdict" in error and extra["judge"]["refused"][0]["seed"] == 42
    fake_judge.verdict = 'Beyond the rubric. {"fluency": 1, "correctness": 4}'  # HELMET scores it: 4 of 3
    score, extra, error = task.score_row("Answer: the river", sample())
    assert error is None and fake_judge.seeds == [42, 43] and extra["judge"]["seeds"] == [43]
    assert score == 1.0 and extra["judge"]["official_score"] == pytest.approx(4 / 3)
    assert extra["judge"]["flags"] == ["correctness 4 outside the rubric (0, 1, 2, 3)",
                                              "score 1.333 clipped to the board's 0..1"]
    # a verdict cached under an older reading that today's refuses is asked again, never read back
    task.cache().put(task.cache_key(task.judge_prompts("Answer: the sea", sample())[0][0]), {"output": "garbage"})
    fake_judge.verdict = '{"fluency": 1, "correctness": 3}'
    score, extra, error = task.score_row("Answer: the sea", sample())
    assert error is None and score == 1.0 and fake_judge.calls == 3 and extra["judge"]["cached"] == 0
