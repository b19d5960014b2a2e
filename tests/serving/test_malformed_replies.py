"""The server is untrusted (issue 32, Medium 1 and 2, and answers far over max_tokens).

A local stand-in (tests/json_server.py's raw_server, on loopback) serves each malformed shape byte for byte:
well-formed JSON of the wrong shape, non-finite counts, a body trickled a byte at a time, and answers far longer than
max_tokens. Each becomes that sample's error row (or, over the budget, an answer cut and flagged), the rest of the
batch is kept, and the run goes on. No assertion here is about wall time.
"""

from __future__ import annotations

import json

import pytest

from ctxbench.harness.backends import http_transport
from ctxbench.harness.backends.openai_compat import OpenAIBackend
from ctxbench.harness.backends.openai_replies import CHARS_PER_TOKEN
from tests.json_server import RawReply, raw_server

from .test_openai_requests import make_request

MODELS = {"object": "list", "data": [{"id": "stub", "max_model_len": 8192}]}
GOOD = {"choices": [{"index": 0, "text": " 42", "finish_reason": "stop"}], "usage": {"prompt_tokens": 7, "completion_tokens": 2}}
SHAPES = {  # what a broken or hostile server sends back, as bytes
    "choice is a string": b'{"choices": ["oops"]}',
    "usage is a list": b'{"choices": [{"text": " 42"}], "usage": [1]}',
    "count is Infinity": b'{"choices": [{"text": " 42"}], "usage": {"completion_tokens": Infinity}}',
    "count is NaN": b'{"choices": [{"text": " 42"}], "usage": {"prompt_tokens": NaN, "completion_tokens": 2}}',
    "count is negative": b'{"choices": [{"text": " 42"}], "usage": {"completion_tokens": -3}}',
    "text is a number": b'{"choices": [{"text": 42}]}',
    "message is a string": b'{"choices": [{"message": "hi"}]}',
    "no choices": b'{"choices": []}',
}


@pytest.fixture(autouse=True)
def _shared_tokenizer(smol_tokenizer, monkeypatch):
    from ctxbench.harness.core import models

    real = models.load_tokenizer
    monkeypatch.setattr(models, "load_tokenizer", lambda spec: smol_tokenizer if spec == "smollm2-135m" else real(spec))


@pytest.fixture()
def untrusted():
    """make(post) -> the stand-in's base URL; post(body) answers a dict (sent as JSON) or a RawReply."""
    servers = []

    def make(post):
        server, url = raw_server(lambda: MODELS, post)
        servers.append(server)
        return url

    yield make
    for s in servers:
        s.shutdown()
        s.server_close()


def backend(url: str, **kw) -> OpenAIBackend:
    return OpenAIBackend(**{"model": "smollm2-135m", "served_model": "stub", "base_url": url, "max_retries": 0,
                            "backoff": 0.0, "backoff_max": 0.0, **kw})


def last_user_text(body: dict) -> str:
    return body["messages"][-1]["content"] if "messages" in body else body["prompt"]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_malformed_reply_is_that_samples_error_and_the_batch_is_kept(shape, untrusted, smol_tokenizer):
    api = "chat" if "message" in shape else "completions"
    chat_good = {"choices": [{"index": 0, "message": {"role": "assistant", "content": " 42"}}]}

    def post(body: dict):
        if "BAD" in last_user_text(body):
            return RawReply(SHAPES[shape])
        return chat_good if api == "chat" else GOOD

    b = backend(untrusted(post), api=api, prefill="user")
    preds = b.generate([make_request(smol_tokenizer, f"s{i}", "BAD?" if i == 1 else f"q{i}") for i in range(3)])
    assert [p.error is None for p in preds] == [True, False, True]
    assert preds[1].error.startswith("gave up after 1 attempts: malformed completion response"), preds[1].error
    assert preds[0].text == preds[2].text == " 42"


def test_a_malformed_reply_is_retried_like_an_unreadable_one(untrusted, smol_tokenizer):
    sent = []

    def post(body: dict):
        sent.append(body)
        return RawReply(SHAPES["count is Infinity"]) if len(sent) == 1 else GOOD

    (p,) = backend(untrusted(post), max_retries=1).generate([make_request(smol_tokenizer, "a", "q")])
    assert p.error is None and p.text == " 42" and len(sent) == 2


def test_a_trickling_server_fails_the_attempt_at_the_deadline(untrusted, smol_tokenizer):
    """Headers at once, then a byte every 50 ms: before the deadline bounded the whole answer, each byte reset the read
    timeout and the sample succeeded after the whole body (bounded here: about 6 s, then the handler stops)."""
    body = json.dumps(GOOD).encode()
    assert len(body) * 0.05 > 4 * 1.0  # the trickle lasts far longer than the deadline

    def post(_body: dict):
        return RawReply(body, chunk=1, pause=0.05)

    (p,) = backend(untrusted(post), timeout=1.0).generate([make_request(smol_tokenizer, "a", "q")])
    assert p.error is not None and "the deadline for a whole answer" in p.error, p.error
    assert p.error.startswith("gave up after 1 attempts: timed out after 1s")


def test_a_reply_over_the_size_limit_is_refused_unread(untrusted, smol_tokenizer, monkeypatch):
    monkeypatch.setattr(http_transport, "MAX_REPLY_BYTES", 4096)
    sent = []

    def post(body: dict):
        sent.append(body)
        return {"choices": [{"text": "x" * 10_000}]} if "BIG" in body["prompt"] else GOOD

    preds = backend(untrusted(post), max_retries=3).generate([make_request(smol_tokenizer, f"s{i}", "BIG" if i else "q")
                                                              for i in range(2)])
    assert preds[0].error is None
    assert "over the limit" in preds[1].error and len(sent) == 2  # permanent: not retried in the run (a rerun retries it)


@pytest.mark.parametrize("size, usage", [(100_000, None), (10_000_000, {"completion_tokens": 8}),
                                         (3_000, {"completion_tokens": 900})])
def test_an_answer_over_max_tokens_is_cut_to_the_budget_and_flagged(size, usage, untrusted, smol_tokenizer):
    """100 KB without a count, 10 MB that claims to be within budget, and a server that admits it ignored max_tokens."""
    answer = ("The special magic number is 42. " * (size // 32 + 1))[:size]

    def post(body: dict):
        assert body["max_tokens"] == 8
        return {"choices": [{"text": answer}], **({"usage": usage} if usage else {})}

    (p,) = backend(untrusted(post)).generate([make_request(smol_tokenizer, "a", "q", max_new=8)])
    assert p.error is None and p.over_budget == size
    assert p.generated_tokens <= 8 and len(p.text) <= 8 * CHARS_PER_TOKEN
    assert answer.startswith(p.text) and p.text.startswith("The special magic number")


def test_an_answer_within_max_tokens_is_kept_whole(untrusted, smol_tokenizer):
    answer = "The special magic number is 42."  # 8 tokens or fewer, no count from the server

    (p,) = backend(untrusted(lambda body: {"choices": [{"text": answer}]})).generate(
        [make_request(smol_tokenizer, "a", "q", max_new=16)])
    assert p.error is None and p.text == answer and p.over_budget == 0 and 0 < p.generated_tokens <= 16


def test_non_finite_prompt_logprobs_are_that_windows_error(untrusted, smol_tokenizer):
    from ctxbench.harness.core.types import LogprobRequest

    def post(body: dict):
        values = "[null, -0.5, Infinity, -1.0, -1.0]" if body["prompt"][0] == 1 else "[null, -0.5, -0.25, -1.0, -1.0]"
        return RawReply(f'{{"choices": [{{"text": "x", "logprobs": {{"token_logprobs": {values}}}}}]}}'.encode())

    b = backend(untrusted(post))
    bad, good = b.token_logprobs([LogprobRequest("bad", (1, 2, 3, 4)), LogprobRequest("good", (2, 2, 3, 4))])
    assert "not a finite number" in bad.error and good.error is None and good.logprobs == (-0.5, -0.25, -1.0)


def test_a_malformed_tokenize_reply_is_that_samples_error(untrusted, smol_tokenizer, monkeypatch):
    def post(body: dict):
        if "count" not in json.dumps(body) and "prompt" in body and "max_tokens" not in body:
            return RawReply(b'{"count": "many"}' if "BAD" in body["prompt"] else b'{"count": 9}')
        return GOOD

    b = backend(untrusted(post), count_tokens="server")
    preds = b.generate([make_request(smol_tokenizer, f"s{i}", "BAD" if i else "q") for i in range(2)])
    assert preds[0].error is None and preds[1].error.startswith("tokenize: malformed /tokenize response: count")


@pytest.mark.parametrize("listing", [{"data": 5}, {"data": [{"id": "stub", "max_model_len": 10 ** 30}]}, {"data": "stub"}])
def test_a_malformed_model_listing_is_no_listing(listing, smol_tokenizer):
    """/models of another shape, or an impossible context length, states no context (the local config's is used)."""
    server, url = raw_server(lambda: listing, lambda body: GOOD)
    try:
        b = backend(url)
        assert b.server_context == 0 and b.context_length == 8192
        (p,) = b.generate([make_request(smol_tokenizer, "a", "q")])
        assert p.error is None
    finally:
        server.shutdown()
        server.server_close()


def test_json_nested_past_the_parsers_depth_is_an_unreadable_reply(untrusted, smol_tokenizer):
    deep = b'{"choices": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"

    (p,) = backend(untrusted(lambda body: RawReply(deep))).generate([make_request(smol_tokenizer, "a", "q")])
    assert p.error == f"gave up after 1 attempts: unreadable JSON in a 200 response ({len(deep)} bytes)"


@pytest.mark.parametrize("value", ["inf", "nan", "-5"])
def test_a_retry_after_that_is_no_time_is_ignored(value, stub_server, smol_tokenizer):
    import math

    import httpx

    from .test_openai_transport import scripted

    b, clock, seen = scripted(stub_server(), [httpx.Response(429, headers={"Retry-After": value})], max_retries=1,
                              backoff_max=0.0)
    (p,) = b.generate([make_request(smol_tokenizer, "a", "q")])
    assert p.error is None and len(seen) == 2 and all(math.isfinite(s) for s in clock.sleeps)


def test_the_budget_covers_the_reasoning_first_then_the_answer(smol_tokenizer):
    from ctxbench.harness.backends.openai_replies import LOCAL_SLACK, Answer, within_budget

    thought, final = "Let me think about the number. " * 400, "It is 42."
    cut = within_budget(Answer(final, None, 7, thought, None), 16, smol_tokenizer)
    assert cut.over_budget == len(thought) + len(final) and cut.completion_tokens == 16 and cut.text == ""
    assert thought.startswith(cut.reasoning) and len(smol_tokenizer(cut.reasoning, add_special_tokens=False)["input_ids"]) == 16
    # a server without a count, a few tokens over by the local tokenizer: within the slack, kept whole and not flagged
    near = " ".join(["word"] * (16 + LOCAL_SLACK // 2))
    kept = within_budget(Answer(near, None, 7, None, None), 16, smol_tokenizer)
    assert kept.text == near and kept.over_budget == 0 and kept.completion_tokens == 16 + LOCAL_SLACK // 2
