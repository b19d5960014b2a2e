"""The OpenAI backend's one retry policy, one client and masked credentials, without wall-clock time.

Faults come from an httpx MockTransport swapped in for the backend's client (a timeout is raised, not waited
for), and every wait goes through a fake clock, so these tests do not depend on how loaded the machine is.
"""

from __future__ import annotations

import base64
import json
import threading

import httpx
import pytest

from ctxbench.harness.backends.openai_compat import OpenAIBackend
from ctxbench.harness.core.errors import ConfigError

from .test_openai_requests import FakeClock, make_request

OK = {"choices": [{"index": 0, "text": " 42", "finish_reason": "stop"}], "usage": {"prompt_tokens": 7, "completion_tokens": 2}}


@pytest.fixture(autouse=True)
def _shared_tokenizer(smol_tokenizer, monkeypatch):
    from ctxbench.harness.core import models

    real = models.load_tokenizer
    monkeypatch.setattr(models, "load_tokenizer", lambda spec: smol_tokenizer if spec == "smollm2-135m" else real(spec))


def scripted(stub, answers, **kw) -> tuple[OpenAIBackend, FakeClock, list[httpx.Request]]:
    """A backend built against the stub, then talking to a transport that plays `answers` in order
    (an httpx.Response, an exception to raise, or a callable of the request)."""
    b = OpenAIBackend(**{"model": "smollm2-135m", "served_model": "stub", "base_url": stub.url, "backoff": 1.0,
                         "backoff_max": 60.0, **kw})
    clock = FakeClock()
    b._clock, b._sleep = clock.now, clock.sleep
    seen: list[httpx.Request] = []
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = queue.pop(0) if queue else httpx.Response(200, json=OK)
        if isinstance(answer, Exception):
            raise answer
        return answer(request) if callable(answer) else answer

    b._client = httpx.AsyncClient(transport=httpx.MockTransport(handler), headers=b._headers())
    return b, clock, seen


def test_one_policy_retries_every_transient_failure(stub_server, smol_tokenizer):
    answers = [httpx.ReadTimeout("slow"), httpx.ConnectError("refused"), httpx.Response(503, text="busy"),
               httpx.Response(429, headers={"Retry-After": "7"}), httpx.Response(200, content=b"{trunc"),
               httpx.Response(200, json={"choices": []})]  # well-formed JSON without a completion
    b, clock, seen = scripted(stub_server(), answers, max_retries=6)
    (p,) = b.generate([make_request(smol_tokenizer, "a", "hi")])
    assert p.error is None and p.text == " 42" and len(seen) == 7
    assert len(clock.sleeps) == 6 and 7.0 <= clock.sleeps[3] <= 8.0  # Retry-After honoured: max(7, jittered 4..8)
    # exponential backoff with jitter: attempt k waits between 2^k/2 and 2^k seconds (k from 0)
    for k, wait in enumerate(clock.sleeps):
        if k != 3:
            assert 2 ** k / 2 <= wait <= 2 ** k, (k, wait)


@pytest.mark.parametrize("fault, message", [(httpx.ReadTimeout("slow"), "timed out after"),
                                            (httpx.Response(500, text="boom"), "HTTP 500"),
                                            (httpx.Response(200, json={"nothing": 1}), "malformed completion response")])
def test_retries_are_bounded_and_end_in_a_recorded_error(fault, message, stub_server, smol_tokenizer):
    b, clock, seen = scripted(stub_server(), [fault] * 3, max_retries=2)
    (p,) = b.generate([make_request(smol_tokenizer, "a", "hi")])
    assert len(seen) == 3 and len(clock.sleeps) == 2
    assert p.error.startswith("gave up after 3 attempts") and message in p.error


def test_a_4xx_is_not_retried(stub_server, smol_tokenizer):
    b, clock, seen = scripted(stub_server(), [httpx.Response(400, json={"error": {"message": "bad prompt"}})])
    (p,) = b.generate([make_request(smol_tokenizer, "a", "hi")])
    assert p.error == "HTTP 400: bad prompt" and len(seen) == 1 and clock.sleeps == []


def test_one_client_and_one_loop_for_the_backend(stub_server, smol_tokenizer):
    stub = stub_server()
    b = OpenAIBackend(model="smollm2-135m", served_model="stub", base_url=stub.url)
    client, loop = b._client, b._io.loop
    ours = lambda: [t for t in threading.enumerate() if t.name == "ctxbench-openai"]  # noqa: E731
    threads = ours()
    for i in range(3):  # several batches of the runner
        b.generate([make_request(smol_tokenizer, f"r{i}-{j}", f"q{j}") for j in range(3)])
    assert b._client is client and b._io.loop is loop
    assert not set(ours()) - set(threads) and b._io.thread in threads  # no loop or thread per batch (others' may end)
    assert len(stub.posts("/completions")) == 9
    b.close()
    assert not b._io.thread.is_alive() and client.is_closed


def test_credentials_in_base_url_and_echoed_headers_are_masked(stub_server, smol_tokenizer):
    stub = stub_server()
    url = stub.url.replace("http://", "http://alice:s3cret-pw@")
    basic = base64.b64encode(b"alice:s3cret-pw").decode()

    def echo_auth(request: httpx.Request) -> httpx.Response:  # a server that echoes the header it got
        return httpx.Response(401, json={"error": {"message": f"bad credentials: Authorization: {request.headers['authorization']}"}})

    b, _, seen = scripted(stub, [echo_auth], base_url=url)
    (p,) = b.generate([make_request(smol_tokenizer, "a", "hi")])
    assert seen[0].headers["authorization"] == f"Basic {basic}"  # the credentials are used...
    for text in (p.error, json.dumps(b.info())):  # ...and never recorded
        assert "s3cret-pw" not in text and basic not in text, text
    assert b.info()["base_url"].startswith("http://***@127.0.0.1:")
    with pytest.raises(ConfigError) as e:
        OpenAIBackend(model="smollm2-135m", base_url="http://bob:hunter2-pw@127.0.0.1:9/v1", max_retries=0, connect_timeout=1)
    assert "hunter2-pw" not in str(e.value) and "***@127.0.0.1:9" in str(e.value)


def test_unknown_and_ill_typed_arguments_list_the_valid_ones(stub_server):
    stub = stub_server()
    with pytest.raises(ConfigError, match=r"backend_args\.temprature: unknown key for backend openai; valid keys: api, api_key_env"):
        OpenAIBackend(model="smollm2-135m", base_url=stub.url, temprature=0)
    with pytest.raises(ConfigError, match=r"backend_args\.concurrency: .*integer.* \(got 'many'\); valid keys"):
        OpenAIBackend(model="smollm2-135m", base_url=stub.url, concurrency="many")
