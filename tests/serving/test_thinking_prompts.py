"""Thinking mode in the prompt and the parser (issue 25, part 1): a chat template with a thinking switch is told the
mode, no answer prefix is sent in thinking mode and the fitter counts the prompt without it exactly; every reasoning
format splits into the reasoning and the answer, and an unclosed block is unfinished."""

from __future__ import annotations

import copy

import pytest

from ctxbench.harness.core.reasoning import opened_in_prompt, split_reasoning

SWITCH_TEMPLATE = (  # Qwen3's switch, reduced: thinking opens <think> in the prompt, off closes an empty block
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% else %}<think>\n{% endif %}"
    "{% endif %}"
)


@pytest.fixture(scope="module")
def switch_tokenizer():
    from ctxbench.harness.core.models import load_tokenizer

    tok = copy.deepcopy(load_tokenizer("smollm2-135m"))
    tok.chat_template = SWITCH_TEMPLATE
    return tok


def samples(tokenizer, thinking: str, *, length: int = 1024, n: int = 3):
    from ctxbench.harness.core import datasets
    from ctxbench.harness.core.config import TaskSpec, build_task
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.prompting import PromptRenderer

    ctx = GenContext(tokenizer, PromptRenderer(tokenizer, "chat", thinking=thinking), verify="full")
    task = build_task(TaskSpec(task="ruler/niah_single_1"))
    return task, datasets.generate(task, length=length, indices=range(n), seed=7, ctx=ctx, use_cache=False)


@pytest.mark.parametrize("mode", ["on", "auto"])
def test_thinking_prompt_has_no_answer_prefix_and_is_counted_exactly(switch_tokenizer, mode):
    task, got = samples(switch_tokenizer, mode)
    for s in got:
        assert s.answer_prefix == "" and s.prompt.endswith("<|im_start|>assistant\n<think>\n")  # the template opened it
        assert opened_in_prompt(s.prompt)
        exact = len(switch_tokenizer(s.prompt, add_special_tokens=False)["input_ids"])
        assert s.prompt_tokens == exact and exact + s.max_new_tokens <= 1024
        assert exact + s.max_new_tokens > 1024 - 20  # filled to its length: lengths compare with non-thinking runs


def test_thinking_off_tells_the_template_and_keeps_the_prefix(switch_tokenizer):
    _, got = samples(switch_tokenizer, "off", n=1)
    s = got[0]
    assert s.prompt.endswith("<think>\n\n</think>\n\n" + s.answer_prefix) and s.answer_prefix.strip()
    assert not opened_in_prompt(s.prompt)


def test_auto_is_off_without_a_switch():
    from ctxbench.harness.core.models import load_tokenizer
    from ctxbench.harness.core.prompting import PromptRenderer

    assert PromptRenderer(load_tokenizer("smollm2-135m"), "chat", thinking="auto").thinking == "off"


@pytest.mark.parametrize("text, api, opened, expected", [
    ("<think>\nR 7\n</think>\n\nA 1", None, False, ("A 1", "<think>\nR 7\n</think>", True, "think")),
    ("R 7\n</think>\nA 1", None, True, ("A 1", "R 7\n</think>", True, "opened")),
    ("R 7 and on", None, True, ("", "R 7 and on", False, "opened")),
    ("<think>R 7 and on", None, False, ("", "<think>R 7 and on", False, "think")),
    ("<|channel|>analysis<|message|>R 7<|end|><|start|>assistant<|channel|>final<|message|>A 1<|return|>", None, False,
     ("A 1", "<|channel|>analysis<|message|>R 7<|end|><|start|>assistant<|channel|>final<|message|>", True, "channel")),
    ("<|channel|>analysis<|message|>R 7", None, False, ("", "<|channel|>analysis<|message|>R 7", False, "channel")),
    ("A 1", "R 7", False, ("A 1", "R 7", True, "api")),
    ("", "R 7", False, ("", "R 7", False, "api")),
    ("A 1", None, False, ("A 1", "", True, "none")),
])
def test_every_reasoning_format_splits(text, api, opened, expected):
    split = split_reasoning(text, api_reasoning=api, opened=opened)
    assert (split.answer, split.reasoning, split.finished, split.form) == expected
