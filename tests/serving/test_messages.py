"""Multi-message prompts (issue 25, part 3): a task returns a conversation (system, user and assistant turns); the
fitter counts the rendered conversation exactly, the run loop scores it, and chat APIs receive the turns as messages."""

from __future__ import annotations

import json

import pytest
from pydantic import Field

from ctxbench.harness.core import registry
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.fitting import fit_units
from ctxbench.tasks.base import Task, TaskArgs

FILLER = "The grass is green. The sky is blue. "


class ConversationArgs(TaskArgs):
    tokens_to_generate: int = Field(16, ge=1)


class Conversation(Task):
    """A few-shot chat: the code is given in an earlier assistant turn, the last user turn holds the haystack."""

    Args = ConversationArgs

    def generate(self, *, length, index, seed, ctx):
        def build(n: int):
            return ctx.renderer.render([
                {"role": "system", "content": "You repeat codes."},
                {"role": "user", "content": "What is the code?"},
                {"role": "assistant", "content": f"The code is {1000 + index}."},
                {"role": "user", "content": FILLER * n + "Say the code again."},
            ]), None

        cost = float(ctx.piece_counts([FILLER])[0])
        fit = fit_units(budget=length - self.max_new_tokens, build=build, estimate=lambda n: n * cost, count=ctx.count,
                        state=self.fit_state(ctx, length), max_units=10**5, what=self.name)
        return self.make_sample(length=length, index=index, text=fit.text, tokens=fit.tokens, answers=[str(1000 + index)])


@pytest.fixture(scope="module", autouse=True)
def conversation_task():
    """Registered for this module only: the registry is global, and other tests list every registered task."""
    factory = registry.register("task", "test/conversation")(
        lambda **kw: Conversation("test/conversation", ConversationArgs(**kw)))
    yield factory
    registry._REGISTRY["task"].pop("test/conversation", None)


def samples(tokenizer, length=512, n=2):
    from ctxbench.harness.core import datasets
    from ctxbench.harness.core.config import TaskSpec, build_task
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.prompting import PromptRenderer

    ctx = GenContext(tokenizer, PromptRenderer(tokenizer, "chat"), verify="full")
    task = build_task(TaskSpec(task="test/conversation"))
    return datasets.generate(task, length=length, indices=range(n), seed=1, ctx=ctx, use_cache=False)


def test_a_conversation_is_fitted_from_exact_counts(smol_tokenizer):
    for s in samples(smol_tokenizer):
        exact = len(smol_tokenizer(s.prompt, add_special_tokens=False)["input_ids"])
        assert s.prompt_tokens == exact and exact + 16 <= 512
        assert exact + 16 > 512 - 12  # filled: one more filler would not fit
        assert s.turns == (("system", "You repeat codes."), ("user", "What is the code?"),
                           ("assistant", f"The code is {1000 + s.index}."))
        assert f"<|im_start|>assistant\nThe code is {1000 + s.index}.<|im_end|>" in s.prompt
        assert s.user_text.endswith("Say the code again.")


def test_chat_api_receives_the_turns(stub_server, smol_tokenizer, monkeypatch):
    from ctxbench.harness.backends.openai_compat import OpenAIBackend
    from ctxbench.harness.core import models
    from ctxbench.harness.run.batch import request

    monkeypatch.setattr(models, "load_tokenizer", lambda spec: smol_tokenizer)
    stub = stub_server()
    b = OpenAIBackend(model="smollm2-135m", served_model="stub", base_url=stub.url, api="chat", prefill="continue")
    s = samples(smol_tokenizer, n=1)[0]
    (pred,) = b.generate([request(s)])
    (body,) = stub.posts("/chat/completions")
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "user"]
    assert body["messages"][-1]["content"] == s.user_text and pred.error is None
    assert pred.prompt_tokens == s.prompt_tokens or pred.prompt_tokens == 7  # the stub's usage, or the local count


def test_a_conversation_runs_through_the_run_loop(tmp_path):
    from ctxbench.harness.core.config import Suite
    from ctxbench.harness.run.runner import RunPlan, run

    suite = Suite(name="conv", lengths=[512], samples=2, tasks=[{"task": "test/conversation"}])
    outcome = run(RunPlan(suite, "smollm2-135m", "echo", {}, tmp_path))
    got = [json.loads(x) for x in (outcome.store.dir / "samples.jsonl").read_text().splitlines()]
    assert outcome.done == 2 and [r["error"] for r in got] == [None, None] and all(r["prompt_tokens"] <= 496 for r in got)


def test_a_conversation_must_end_with_a_user_turn(smol_tokenizer):
    from ctxbench.harness.core.prompting import PromptRenderer

    with pytest.raises(ConfigError, match="must end with a user message"):
        PromptRenderer(smol_tokenizer, "chat").render([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
