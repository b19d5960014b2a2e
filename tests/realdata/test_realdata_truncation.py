"""Middle truncation on the real SmolLM2 tokenizer: the final rendered prompt plus generation always fits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.prompting import PromptRenderer
from ctxbench.tasks.longbench.task import PROMPTS

QUESTION = "Which startup did the essay mention first?"


@pytest.fixture(scope="module")
def long_context(data_dir) -> str:
    text = " ".join((data_dir / "pg_essays" / "apple.txt").read_text().split())
    return "BEGINNING-MARKER " + text + " " + text + " END-MARKER"  # ~6K tokens, both ends recognisable


def _record(context: str) -> dict:
    return {"input": QUESTION, "context": context, "answers": ["x"], "length": 6000, "dataset": "qasper", "language": "en",
            "all_classes": ["Human", "Entity"], "_id": "t"}


def _task(name: str, tmp_path: Path, context: str):
    f = tmp_path / "d.jsonl"
    f.write_text(json.dumps(_record(context)) + "\n")
    return registry.get("task", name)(data_file=str(f))


@pytest.mark.parametrize("length", [1024, 2048])
def test_rendered_prompt_and_generation_fit_and_keep_both_ends(gen_ctx, smol_tokenizer, tmp_path, long_context, length):
    task = _task("longbench/qasper", tmp_path, long_context)
    s = task.generate(length=length, index=0, seed=0, ctx=gen_ctx)
    real = len(smol_tokenizer(s.prompt, add_special_tokens=s.add_special_tokens)["input_ids"])
    assert real == s.prompt_tokens and s.prompt_tokens + s.max_new_tokens <= length
    assert s.prompt_tokens + s.max_new_tokens > length - 16  # and the budget is used, not wasted
    head, tail = PROMPTS["qasper"].split("{context}")
    assert head in s.prompt and tail.format(input=QUESTION) in s.prompt  # instruction and question survive
    assert "BEGINNING-MARKER" in s.prompt and "END-MARKER" in s.prompt  # both ends of the context survive
    n = len(smol_tokenizer(long_context, add_special_tokens=False)["input_ids"])
    assert s.meta["context_tokens"] == n and 0 < s.meta["truncated_tokens"] < n
    assert s.prompt.startswith("<|im_start|>") and s.meta["template"] == "chat"


def test_short_context_is_not_truncated(gen_ctx, tmp_path):
    s = _task("longbench/qasper", tmp_path, "A short article.").generate(length=2048, index=0, seed=0, ctx=gen_ctx)
    assert s.meta["truncated_tokens"] == 0 and "A short article." in s.prompt


def test_official_order_overflows_where_ours_fits(gen_ctx, smol_tokenizer, tmp_path, long_context):
    """LongBench's pred.py: format, cut the middle to max_length, THEN apply the chat template."""
    length, gen = 1024, 128
    max_length = length - gen  # even when generation is reserved, the template comes on top
    prompt = PROMPTS["qasper"].format(context=long_context, input=QUESTION)
    ids = smol_tokenizer(prompt)["input_ids"]
    assert len(ids) > max_length
    half = max_length // 2
    prompt = smol_tokenizer.decode(ids[:half], skip_special_tokens=True) + smol_tokenizer.decode(ids[-half:], skip_special_tokens=True)
    official = PromptRenderer(smol_tokenizer, "chat").render(prompt)
    official_tokens = len(smol_tokenizer(official.text, add_special_tokens=False)["input_ids"])
    assert official_tokens + gen > length  # the official order overflows the window
    ours = _task("longbench/qasper", tmp_path, long_context).generate(length=length, index=0, seed=0, ctx=gen_ctx)
    assert ours.prompt_tokens + ours.max_new_tokens <= length


def test_no_chat_template_datasets_render_plain(gen_ctx, tmp_path, long_context):
    chat = _task("longbench/hotpotqa", tmp_path, long_context).generate(length=1024, index=0, seed=0, ctx=gen_ctx)
    for name in ("longbench/trec", "longbench/triviaqa", "longbench/samsum", "longbench/lsht", "longbench/lcc", "longbench/repobench-p"):
        s = _task(name, tmp_path, long_context).generate(length=1024, index=0, seed=0, ctx=gen_ctx)
        assert "<|im_start|>" not in s.prompt and s.meta["template"] == "plain", name
        assert s.prompt_tokens + s.max_new_tokens <= 1024
    assert "<|im_start|>" in chat.prompt and chat.meta["template"] == "chat"


def test_too_small_a_length_is_a_config_error(gen_ctx, tmp_path, long_context):
    from ctxbench.harness.core.errors import ConfigError

    with pytest.raises(ConfigError, match="use a larger length"):
        _task("longbench/qasper", tmp_path, long_context).generate(length=200, index=0, seed=0, ctx=gen_ctx)
