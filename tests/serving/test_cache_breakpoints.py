"""Prompt-cache breakpoints on the openai backend (issue 35 item 1): with `cache_control: true` a chat request marks
where it shares its prompt with the request before it and with the one after it, each moved back to a line break, so
that all questions over one document break where the document ends; off by default, and chat only."""

from __future__ import annotations

import pytest

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.types import Sample
from ctxbench.harness.run.batch import request
from ctxbench.harness.run.prefix import share_prefixes

DOCS = {"a": "Alpha document.\nIt has two lines about alpha.", "b": "Beta document.\nBeta is second."}


def samples(tokenizer) -> list[Sample]:
    from ctxbench.harness.core.prompting import PromptRenderer

    renderer = PromptRenderer(tokenizer, "chat")
    out = []
    for d, doc in DOCS.items():
        for q in ("What is it about?", "What is the first line?"):
            r = renderer.render(f"{doc}\n\nQuestion: {q}")
            out.append(Sample(task="docqa", length=128, index=len(out), prompt=r.text, answers=("x",), prompt_tokens=20,
                              max_new_tokens=4, user_span=r.user_span, meta={"doc": d}))
    return share_prefixes(out)


def backend(stub, smol_tokenizer, monkeypatch, **kw):
    from ctxbench.harness.backends.openai_compat import OpenAIBackend
    from ctxbench.harness.core import models

    monkeypatch.setattr(models, "load_tokenizer", lambda spec: smol_tokenizer)
    return OpenAIBackend(model="smollm2-135m", served_model="stub", base_url=stub.url, api="chat", prefill="user", **kw)


def marks(content) -> list[str]:
    """The text up to each cache_control mark of a message's content (none for plain text)."""
    if isinstance(content, str):
        return []
    out, text = [], ""
    for block in content:
        text += block["text"]
        if "cache_control" in block:
            out.append(text)
    return out


def test_breakpoints_mark_the_shared_document(stub_server, smol_tokenizer, monkeypatch):
    stub = stub_server()
    b = backend(stub, smol_tokenizer, monkeypatch, cache_control=True)
    ordered = samples(smol_tokenizer)
    preds = b.generate([request(s) for s in ordered])
    assert all(p.error is None for p in preds)
    sent = {}  # user text -> its marks (the stub sees the requests in the order they arrive)
    for body in stub.posts("/chat/completions"):
        content = body["messages"][-1]["content"]
        assert isinstance(content, list)  # the text sent is the user text, only split into blocks
        sent["".join(x["text"] for x in content)] = marks(content)
    assert [s.meta["doc"] for s in ordered] == ["a", "a", "b", "b"]
    ends = [f"{DOCS[s.meta['doc']]}\n\n" for s in ordered]
    # each question marks where its document ends: the first of a document writes it for the next, which reads it
    assert [sent[s.user_text] for s in ordered] == [[end] for end in ends]


def test_no_breakpoints_by_default(stub_server, smol_tokenizer, monkeypatch):
    stub = stub_server()
    b = backend(stub, smol_tokenizer, monkeypatch)
    b.generate([request(s) for s in samples(smol_tokenizer)])
    assert all(isinstance(body["messages"][-1]["content"], str) for body in stub.posts("/chat/completions"))


def test_cache_control_needs_chat():
    from ctxbench.harness.backends.args import OpenAIArgs
    from ctxbench.harness.backends.openai_compat import check_arguments

    with pytest.raises(ConfigError, match="backend_args.cache_control: .*api=chat"):
        check_arguments(OpenAIArgs(cache_control=True))
