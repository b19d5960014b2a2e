"""The run's protocol in OpenAI-compatible requests (issue 25): the system turn as a system message, sampling settings
(each repeat its own seed), the thinking switch passed through and the answer plus thinking budget as max_tokens."""

from __future__ import annotations

import dataclasses

import pytest

from ctxbench.harness.backends.openai_compat import OpenAIBackend
from ctxbench.harness.core.types import Request


@pytest.fixture(autouse=True)
def _shared_tokenizer(smol_tokenizer, monkeypatch):
    from ctxbench.harness.core import models

    real = models.load_tokenizer
    monkeypatch.setattr(models, "load_tokenizer", lambda spec: smol_tokenizer if spec == "smollm2-135m" else real(spec))


def chat_backend(stub, **kw) -> OpenAIBackend:
    return OpenAIBackend(model="smollm2-135m", served_model="stub", base_url=stub.url, api="chat", prefill="continue",
                         backoff=0.01, backoff_max=0.05, **kw)


def test_system_prompt_sampling_and_repeats_in_the_body(stub_server):
    stub = stub_server()
    b = chat_backend(stub)
    base = Request("t@512#0", "ignored", 8, user_text="Question?", system_prompt="Be brief.",
                   sampling=(("seed", 5), ("temperature", 0.7), ("top_p", 0.9)))
    b.generate([base, dataclasses.replace(base, sample_id="t@512#0~1", repeat=1)])
    bodies = sorted(stub.posts("/chat/completions"), key=lambda body: body["seed"])
    assert [body["seed"] for body in bodies] == [5, 6]  # each repeat its own reproducible draw
    for body in bodies:
        assert body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Question?"}]
        assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.7, 0.9, 8)


def test_thinking_passes_the_switch_and_the_budget(stub_server):
    stub = stub_server(reply="done")
    b = chat_backend(stub, reasoning_effort="high")
    b.generate([Request("t@512#0", "ignored", 8, user_text="Q?", thinking=True, max_thinking_tokens=100)])
    (body,) = stub.posts("/chat/completions")
    assert body["chat_template_kwargs"] == {"enable_thinking": True} and body["reasoning_effort"] == "high"
    assert body["max_tokens"] == 108 and body["temperature"] == 0
    quiet_stub = stub_server()
    chat_backend(quiet_stub, thinking_switch=False).generate(
        [Request("t@512#0", "ignored", 8, user_text="Q?", thinking=True, max_thinking_tokens=100)])
    (body,) = quiet_stub.posts("/chat/completions")
    assert "chat_template_kwargs" not in body and body["max_tokens"] == 108
