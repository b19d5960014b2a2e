"""Batch mode of the openai backend (issue 35, item 5): `--backend-arg batch_api=true` submits a run's requests as
provider batches (OpenAI Batch API), polls them and reads the answers back; a killed run picks up its submitted
batches and pays for no request twice. Against tests/json_server.py's BatchStandIn on loopback; every loop is bounded
(the stand-in finishes a batch at its first poll once released, and the waits below stop by themselves)."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess

import pytest

from ctxbench.harness.backends.openai_batch import Journal, journal_path
from tests.journeys.conftest import ctxbench_argv
from tests.json_server import BatchStandIn

SUITE = ("name: batched\nlengths: [256]\nsamples: 6\n"
         "tasks:\n  - task: niah/single\n    max_new_tokens: 8\n    args: {depths: 2, samples_per_cell: 3}\n")
USAGE = {"prompt_tokens": 200, "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": 128}}


def failing(body: dict) -> bool:
    """One request in about three is answered with an error line (a fixed function of the prompt)."""
    return int(hashlib.sha256(body["prompt"].encode()).hexdigest(), 16) % 3 == 0


class Script:
    def __init__(self, errors: bool = False):
        self.errors = errors

    def __call__(self, body: dict) -> dict | str:
        if self.errors and failing(body):
            return "scripted failure"
        return {"choices": [{"index": 0, "text": "The number is 1.", "finish_reason": "stop"}], "usage": USAGE}


def argv(stand_in: BatchStandIn, suite, store, data_dir, *more: str, retries: int = 0) -> list[str]:
    return ["score", "--backend", "openai", "--model", "smollm2-135m", "--suite", str(suite), "--store", str(store),
            "--data-dir", str(data_dir), "--backend-arg", f"base_url={stand_in.url}", "--backend-arg", "served_model=stub",
            "--backend-arg", "context_length=8192", "--backend-arg", "batch_api=true", "--backend-arg", f"max_retries={retries}",
            "--backend-arg", "backoff=0", "--backend-arg", "batch_poll_interval=0.05", *more]


def rows_of(store) -> list[dict]:
    """Each sample's latest row (a rerun appends the retried ones)."""
    (run,) = [p for p in store.iterdir() if p.is_dir()]
    rows = [json.loads(line) for f in sorted(run.glob("samples*.jsonl")) for line in f.read_text().splitlines()]
    return list({r["id"]: r for r in rows}.values())


@pytest.fixture()
def suite(tmp_path):
    path = tmp_path / "batched.yaml"
    path.write_text(SUITE)
    return path


def forget(stand_in: BatchStandIn) -> None:
    journal_path(stand_in.url, "stub").unlink(missing_ok=True)


def test_a_run_in_batch_mode_sends_one_batch_and_an_error_line_is_retried_by_a_rerun(data_dir, tmp_path, suite, ctxbench):
    stand_in = BatchStandIn(Script(errors=True))
    store = tmp_path / "runs"
    try:
        code, _, err = ctxbench(*argv(stand_in, suite, store, data_dir))
        assert stand_in.direct == 0 and len(stand_in.batches) == 1 and sorted(stand_in.paid.values()) == [1] * 6
        rows = rows_of(store)
        failed = [r for r in rows if r["error"]]
        assert failed and len(failed) < 6, "the script must fail some requests and answer others"
        assert code == 3, err
        assert all("scripted failure" in r["error"] for r in failed)
        assert "batch batch-0: completed, 6/6 requests done" in err
        good = [r for r in rows if not r["error"]]
        assert all(r["prompt_tokens"] == 200 and r["generated_tokens"] == 4 for r in good)  # the server's usage

        stand_in.answer = Script(errors=False)
        code, _, err = ctxbench(*argv(stand_in, suite, store, data_dir))
        assert code == 0, err
        assert len(stand_in.batches) == 2 and stand_in.direct == 0
        assert sum(stand_in.paid.values()) == 6 + len(failed)  # the rerun paid for the failed requests only
        rows = rows_of(store)
        assert len(rows) == 6 and not [r for r in rows if r["error"]]
    finally:
        forget(stand_in)
        stand_in.server.shutdown()


def test_a_batch_whose_creation_reply_is_lost_is_found_again_not_created_twice(data_dir, tmp_path, suite, ctxbench):
    """Creating a batch is the paid call: a lost reply (500) is not retried blindly; the server's batch over the
    uploaded file is found (GET /batches) and polled."""
    stand_in = BatchStandIn(Script())
    stand_in.create_faults = ["lose"]
    store = tmp_path / "runs"
    try:
        code, _, err = ctxbench(*argv(stand_in, suite, store, data_dir, retries=2))
        assert code == 0, err
        assert len(stand_in.batches) == 1 and sorted(stand_in.paid.values()) == [1] * 6
        assert len(rows_of(store)) == 6
    finally:
        forget(stand_in)
        stand_in.server.shutdown()


def test_an_uploaded_file_whose_batch_was_refused_becomes_a_batch_on_rerun(data_dir, tmp_path, suite, ctxbench):
    """The server refused to create the batch (503, retries used up): error rows; the rerun creates the batch over
    the file already uploaded (no second upload) and pays for each request once."""
    stand_in = BatchStandIn(Script())
    stand_in.create_faults = ["refuse"]
    store = tmp_path / "runs"
    try:
        code, _, err = ctxbench(*argv(stand_in, suite, store, data_dir))
        assert code == 3 and not stand_in.batches and "HTTP 503" in err, err
        uploads = len(stand_in.files)
        code, _, err = ctxbench(*argv(stand_in, suite, store, data_dir))
        assert code == 0, err
        assert uploads == 1 and stand_in.batches["batch-0"]["input_file_id"] == "file-0"
        assert len(stand_in.batches) == 1 and sorted(stand_in.paid.values()) == [1] * 6
        assert not [r for r in rows_of(store) if r["error"]]
    finally:
        forget(stand_in)
        stand_in.server.shutdown()


def test_a_server_without_the_batch_api_is_refused_in_one_line_with_nothing_written(data_dir, tmp_path, suite, ctxbench):
    stand_in = BatchStandIn(Script(), batches=False)
    store = tmp_path / "runs"
    try:
        code, _, err = ctxbench(*argv(stand_in, suite, store, data_dir))
        assert code == 2, err
        lines = [x for x in err.splitlines() if x.strip()]
        assert len(lines) == 1 and "backend_args.batch_api" in lines[0] and "has no OpenAI Batch API" in lines[0], err
        assert not store.exists() or not any(store.iterdir())
        assert stand_in.direct == 0
    finally:
        stand_in.server.shutdown()


def test_a_run_killed_while_its_batch_is_pending_resumes_it_and_pays_for_no_request_twice(data_dir, tmp_path, suite,
                                                                                           ctxbench, monkeypatch):
    """The journey: submit, SIGKILL while the batch is in progress, rerun: the batch is found, polled, read. The
    killed run is a process of its own; the rerun, which is not about processes, runs in this one."""
    stand_in = BatchStandIn(Script())
    stand_in.hold = True
    store = tmp_path / "runs"
    command = [*ctxbench_argv(), *argv(stand_in, suite, store, data_dir)]
    try:
        first = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 stdin=subprocess.DEVNULL, text=True)
        try:
            assert stand_in.polled.wait(timeout=240), "the first run never polled its batch"
        finally:
            first.send_signal(signal.SIGKILL)
            _, err = first.communicate(timeout=60)
        assert first.returncode == -signal.SIGKILL, err
        assert len(stand_in.batches) == 1 and stand_in.batches["batch-0"]["status"] == "in_progress"
        file_of, batch_of = Journal(journal_path(stand_in.url, "stub")).live()
        assert len(file_of) == 6 and list(batch_of.values()) == ["batch-0"]  # recorded before the first poll

        stand_in.hold = False
        monkeypatch.chdir(tmp_path)
        code, _, stderr = ctxbench(*argv(stand_in, suite, store, data_dir))
        assert code == 0, stderr
        assert len(stand_in.batches) == 1, "the rerun submitted a new batch"
        assert sorted(stand_in.paid.values()) == [1] * 6 and stand_in.direct == 0
        rows = rows_of(store)
        assert len(rows) == 6 and not [r for r in rows if r["error"]]
        assert Journal(journal_path(stand_in.url, "stub")).live()[0] == {}  # every answer collected
    finally:
        forget(stand_in)
        stand_in.server.shutdown()


def test_sequential_scoring_sends_each_round_as_its_own_batches(data_dir, tmp_path, suite, ctxbench):
    """--until works in batch mode: each turn of rounds (batch_size rounds) is a batch of its own, and the run stops
    early, having paid once for each request it sent and for nothing else."""
    stand_in = BatchStandIn(Script())
    store = tmp_path / "runs"
    try:
        command = argv(stand_in, suite, store, data_dir)
        at = command.index("--suite")
        command[at: at + 2] = ["--tasks", "ruler/niah_single_1", "--lengths", "256", "--samples", "40"]
        code, _, err = ctxbench(*command, "--until", "effective-length", "--backend-arg", "batch_size=8")
        assert code == 0, err
        assert stand_in.direct == 0 and stand_in.batches and set(stand_in.paid.values()) == {1}
        assert sum(stand_in.paid.values()) == len(rows_of(store)) < 40  # stopped early: only the rounds it needed
    finally:
        forget(stand_in)
        stand_in.server.shutdown()


def test_the_backend_reads_usage_and_cached_tokens_from_the_output_file():
    """In process: the generate() call's predictions carry the server's usage; cached prompt tokens are counted."""
    from ctxbench.harness.backends.openai_compat import OpenAIBackend
    from ctxbench.harness.core.types import Request

    stand_in = BatchStandIn(Script())
    backend = OpenAIBackend(model="smollm2-135m", base_url=stand_in.url, served_model="stub", context_length=8192,
                            batch_api=True, batch_poll_interval=0.01, max_retries=0)
    try:
        preds = backend.generate([Request(f"t@256#{i}", f"question {i}", 8) for i in range(3)])
        assert [(p.text, p.prompt_tokens, p.generated_tokens, p.timing) for p in preds] == [
            ("The number is 1.", 200, 4, "batch-share")] * 3
        assert backend.last_cached_tokens == 3 * 128 and backend.info()["batch_api"] is True
        assert backend.batch_size == 256  # one batch per runner batch: larger by default in batch mode
    finally:
        backend.close()
        forget(stand_in)
        stand_in.server.shutdown()


def test_chat_requests_go_to_the_chat_endpoint_of_the_batch():
    """api=chat: the batch's endpoint and every line's url are /v1/chat/completions, the bodies carry messages."""
    from ctxbench.harness.backends.openai_compat import OpenAIBackend
    from ctxbench.harness.core.types import Request

    def chat(body: dict) -> dict:
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": body["messages"][-1]["content"][-1]}}]}

    stand_in = BatchStandIn(chat)
    backend = OpenAIBackend(model="smollm2-135m", base_url=stand_in.url, served_model="stub", context_length=8192,
                            api="chat", prefill="user", batch_api=True, batch_poll_interval=0.01, max_retries=0)
    try:
        preds = backend.generate([Request(f"t@256#{i}", "", 8, user_text=f"say {i}") for i in range(2)])
        assert [p.text for p in preds] == ["0", "1"] and stand_in.direct == 0
        (batch,) = stand_in.batches.values()
        lines = [json.loads(x) for x in stand_in.files[batch["input_file_id"]].splitlines()]
        assert batch["endpoint"] == "/v1/chat/completions" and {x["url"] for x in lines} == {"/v1/chat/completions"}
        assert all("messages" in x["body"] and x["method"] == "POST" for x in lines)
    finally:
        backend.close()
        forget(stand_in)
        stand_in.server.shutdown()
