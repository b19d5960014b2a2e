"""The OpenAI-compatible backend's requests, retries, limits and secrets, against a scripted loopback server.

These check what is sent and how failures are handled; the real model behind a real server is exercised
in test_openai_live.py.
"""

import asyncio
import json

import pytest

from ctxbench.harness.backends.openai_compat import OpenAIBackend
from ctxbench.harness.core.errors import ConfigError, PromptTooLongError
from ctxbench.harness.core.types import Request

PREFIX = " The special magic number is"


@pytest.fixture(autouse=True)
def _shared_tokenizer(smol_tokenizer, monkeypatch):
    """Load the tokenizer once for the module, not once per backend built."""
    from ctxbench.harness.core import models

    real = models.load_tokenizer
    monkeypatch.setattr(models, "load_tokenizer", lambda spec: smol_tokenizer if spec == "smollm2-135m" else real(spec))


def make_request(tok, sid: str, user: str, max_new: int = 8, prefix: str = PREFIX) -> Request:
    prompt = tok.apply_chat_template([{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True) + prefix
    n = len(tok(prompt, add_special_tokens=False)["input_ids"])
    return Request(sid, prompt, max_new, False, n, user, prefix)


def backend(stub, **kw) -> OpenAIBackend:
    args = {"model": "smollm2-135m", "served_model": "stub", "base_url": stub.url, "backoff": 0.01, "backoff_max": 0.05}
    return OpenAIBackend(**{**args, **kw})


def test_completions_send_the_exact_rendered_prompt(stub_server, smol_tokenizer):
    stub = stub_server()
    b = backend(stub)
    reqs = [make_request(smol_tokenizer, f"t@512#{i}", f"Question {i}?") for i in range(3)]
    preds = b.generate(reqs)
    bodies = stub.posts("/completions")
    assert sorted(x["prompt"] for x in bodies) == sorted(r.prompt for r in reqs)
    for body in bodies:
        assert body["model"] == "stub" and body["temperature"] == 0 and body["max_tokens"] == 8 and body["stream"] is False
    assert [p.sample_id for p in preds] == [r.sample_id for r in reqs]
    assert all(p.text == " 42" and p.generated_tokens == 2 and p.prompt_tokens == 7 and p.error is None for p in preds)
    assert all(p.seconds > 0 for p in preds)
    assert b.info()["answer_prefix"] == "in the raw prompt"


def test_prompt_format_ids_sends_the_token_ids(stub_server, smol_tokenizer):
    stub = stub_server()
    b = backend(stub, prompt_format="ids")
    r = make_request(smol_tokenizer, "a", "Hi there")
    b.generate([r])
    (body,) = stub.posts("/completions")
    assert body["prompt"] == smol_tokenizer(r.prompt, add_special_tokens=False)["input_ids"]


def test_chat_continues_the_answer_prefix_where_the_server_can(stub_server, smol_tokenizer):
    stub = stub_server(accept_continue=True)
    b = backend(stub, api="chat")
    assert b.prefill == "continue" and b.info()["answer_prefix"] == "continued assistant message"
    b.generate([make_request(smol_tokenizer, "a", "Where is the needle?")])
    body = stub.posts("/chat/completions")[-1]
    assert body["messages"] == [{"role": "user", "content": "Where is the needle?"}, {"role": "assistant", "content": PREFIX}]
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False


def test_chat_appends_the_prefix_to_the_user_turn_otherwise(stub_server, smol_tokenizer):
    stub = stub_server(accept_continue=False)  # like transformers serve: 422 on unknown fields
    b = backend(stub, api="chat")
    assert b.prefill == "user" and b.info()["answer_prefix"] == "appended to the user turn"
    b.generate([make_request(smol_tokenizer, "a", "Where is the needle?")])
    body = stub.posts("/chat/completions")[-1]
    assert body["messages"] == [{"role": "user", "content": "Where is the needle?\n" + PREFIX.strip()}]
    assert "continue_final_message" not in body


def test_context_length_comes_from_the_server_when_it_says(stub_server):
    assert backend(stub_server(context=4096)).context_length == 4096
    assert backend(stub_server()).context_length == 8192  # else the local config of the model
    assert backend(stub_server(context=4096), context_length=1000).context_length == 1000


def test_over_long_prompt_is_refused_before_anything_is_sent(stub_server, smol_tokenizer):
    stub = stub_server()
    b = backend(stub, context_length=64)
    long = make_request(smol_tokenizer, "long", "word " * 200)
    with pytest.raises(PromptTooLongError, match="--truncation middle"):
        b.generate([make_request(smol_tokenizer, "short", "hi"), long])
    assert stub.posts("/completions") == []


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_middle_truncation_is_applied_and_recorded(stub_server, smol_tokenizer, api):
    stub = stub_server(accept_continue=False)
    b = backend(stub, context_length=96, truncation="middle", api=api)
    r = make_request(smol_tokenizer, "long", "start " + "word " * 200 + " end?")
    (p,) = b.generate([r])
    assert p.error is None and p.truncated_tokens > 0
    body = stub.posts(f"/{'chat/' if api == 'chat' else ''}completions")[-1]
    if api == "completions":
        sent = len(smol_tokenizer(body["prompt"], add_special_tokens=False)["input_ids"])
        assert body["prompt"].startswith("<|im_start|>") and body["prompt"].endswith(PREFIX)
    else:
        text = smol_tokenizer.apply_chat_template(body["messages"], tokenize=False, add_generation_prompt=True)
        sent = len(smol_tokenizer(text, add_special_tokens=False)["input_ids"])
        assert body["messages"][0]["content"].startswith("start") and body["messages"][0]["content"].endswith(PREFIX.strip())
    assert sent <= 96 - r.max_new_tokens


def test_transient_failures_are_retried(stub_server, smol_tokenizer):
    stub = stub_server()
    stub.script = [429, 500, 503]
    b = backend(stub, concurrency=1)
    (p,) = b.generate([make_request(smol_tokenizer, "a", "hi")])
    assert p.error is None and p.text == " 42"
    assert len(stub.posts("/completions")) == 4


def test_a_4xx_is_that_samples_error_not_a_crash(stub_server, smol_tokenizer):
    stub = stub_server()
    stub.script = [400]
    b = backend(stub, concurrency=1)
    preds = b.generate([make_request(smol_tokenizer, "bad", "hi"), make_request(smol_tokenizer, "good", "ho")])
    assert preds[0].error.startswith("HTTP 400") and "scripted 400" in preds[0].error and preds[0].text == ""
    assert preds[1].error is None
    assert len(stub.posts("/completions")) == 2  # a 400 is not retried


def test_retries_are_bounded_and_end_in_a_recorded_error(stub_server, smol_tokenizer):
    stub = stub_server()
    stub.script = [500] * 10
    b = backend(stub, max_retries=2, concurrency=1)
    (p,) = b.generate([make_request(smol_tokenizer, "a", "hi")])
    assert p.error.startswith("gave up after 3 attempts") and "HTTP 500" in p.error
    assert len(stub.posts("/completions")) == 3


def test_api_key_is_sent_but_never_recorded(stub_server, smol_tokenizer, monkeypatch):
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("CTXBENCH_TEST_KEY", secret)
    stub = stub_server()
    b = backend(stub, api_key_env="CTXBENCH_TEST_KEY")
    b.generate([make_request(smol_tokenizer, "a", "hi")])
    assert stub.headers.get("Authorization") == f"Bearer {secret}"
    assert secret not in json.dumps(b.info()) and b.info()["api_key_env"] == "CTXBENCH_TEST_KEY"
    assert secret not in b._clean(f"server said: {secret} is invalid")
    with pytest.raises(ConfigError, match="api_key_env"):
        backend(stub, api_key="sk-direct")
    monkeypatch.delenv("CTXBENCH_TEST_KEY")
    with pytest.raises(ConfigError, match="CTXBENCH_TEST_KEY is not set"):
        backend(stub, api_key_env="CTXBENCH_TEST_KEY")


class FakeClock:
    """Monotonic time that moves only when the backend sleeps: the rate limiter is checked without wall-clock time."""

    def __init__(self):
        self.t = 1000.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        wake = self.t + seconds
        await asyncio.sleep(0)  # let the other requests take their slots first
        self.t = max(self.t, wake)


def test_requests_per_minute_are_limited(stub_server, smol_tokenizer):
    stub = stub_server()
    b = backend(stub, rpm=600, concurrency=4)  # one request every 0.1 s
    clock = FakeClock()
    b._clock, b._sleep = clock.now, clock.sleep
    sent: list[float] = []
    real = b._client.send  # every request and stream goes through send

    async def send(*args, **kwargs):
        sent.append(clock.t)
        return await real(*args, **kwargs)

    b._client.send = send
    preds = b.generate([make_request(smol_tokenizer, f"x{i}", f"q{i}") for i in range(4)])
    assert all(p.error is None for p in preds)
    assert [t - sent[0] for t in sorted(sent)] == pytest.approx([0.0, 0.1, 0.2, 0.3])


def test_server_side_token_counting(stub_server, smol_tokenizer):
    stub = stub_server(context=80)
    b = backend(stub, count_tokens="server")
    r = make_request(smol_tokenizer, "a", "hi")
    (p,) = b.generate([r])
    assert p.error is None
    tokenize = [x for x in stub.posts("/tokenize") if x.get("prompt") == r.prompt]
    assert tokenize and tokenize[0]["add_special_tokens"] is False
    with pytest.raises(PromptTooLongError):
        b.generate([make_request(smol_tokenizer, "long", "word " * 100)])
    with pytest.raises(ConfigError, match="count_tokens=local"):
        backend(stub_server(tokenize=False), count_tokens="server")


def test_unreachable_server_is_a_one_line_config_error():
    with pytest.raises(ConfigError, match="is the server running"):
        OpenAIBackend(model="smollm2-135m", base_url="http://127.0.0.1:9/v1", max_retries=1, backoff=0.01, connect_timeout=1)


def test_bad_arguments_name_the_field(stub_server):
    stub = stub_server()
    with pytest.raises(ConfigError, match="backend_args.api:"):
        backend(stub, api="responses")
    with pytest.raises(ConfigError, match="unknown key"):
        backend(stub, temperature=0.7)
    with pytest.raises(ConfigError, match="backend_args.tokenizer"):
        OpenAIBackend(model="gpt-nonexistent-model", base_url=stub.url)



def test_token_logprobs_read_the_echoed_prompt(stub_server):
    from ctxbench.harness.core.types import LogprobRequest

    stub = stub_server()
    b = backend(stub, context_length=64)
    assert "prompt_logprobs" in b.capabilities and "prompt_logprobs" not in backend(stub_server(), api="chat").capabilities
    reqs = [LogprobRequest("d@32#0/w0", tuple(range(300, 332)), 1), LogprobRequest("d@32#0/w1", tuple(range(400, 432)), 20)]
    out = b.token_logprobs(reqs)
    bodies = stub.posts("/completions")
    assert sorted(tuple(x["prompt"]) for x in bodies) == sorted(r.token_ids for r in reqs)
    assert all(x["echo"] is True and x["logprobs"] == 1 and x["max_tokens"] == 1 and x["temperature"] == 0 for x in bodies)
    for r, res in zip(reqs, out):
        ids = r.token_ids
        assert res.sample_id == r.sample_id and res.error is None
        assert res.logprobs == pytest.approx([stub.logprob(ids[i - 1], ids[i]) for i in range(r.score_from, len(ids))])
    with pytest.raises(PromptTooLongError):
        b.token_logprobs([LogprobRequest("long", tuple(range(65)), 1)])


def test_a_server_without_prompt_logprobs_fails_the_window_with_the_fix(stub_server):
    from ctxbench.harness.core.types import LogprobRequest

    (res,) = backend(stub_server(echo_logprobs=False)).token_logprobs([LogprobRequest("x", (5, 6, 7), 1)])
    assert res.logprobs == () and "no prompt logprobs" in res.error and "echo=true" in res.error


def test_perplexity_runs_through_an_openai_compatible_server(stub_server, tmp_path, smol_tokenizer):
    import json as _json

    from ctxbench.harness.core.config import Suite
    from ctxbench.harness.run.runner import RunPlan, run

    text = "The quick brown fox jumps over the lazy dog. " * 20
    docs = tmp_path / "d.jsonl"
    docs.write_text(_json.dumps({"id": "a", "text": text}) + "\n")
    stub = stub_server()
    suite = Suite(name="p", lengths=[64], samples=1, tasks=[{"task": "ppl/full", "args": {"path": str(docs), "min_tokens": 64}}])
    args = {"served_model": "stub", "base_url": stub.url, "backoff": 0.01, "context_length": 128}
    (row,) = run(RunPlan(suite, "smollm2-135m", "openai", args, tmp_path / "runs")).store.latest().values()
    ids = [smol_tokenizer.bos_token_id] + smol_tokenizer(text, add_special_tokens=False)["input_ids"][:63]
    assert row["error"] is None and row["tokens"] == 63
    assert row["nll"] == pytest.approx(-sum(stub.logprob(p, t) for p, t in zip(ids, ids[1:])))
