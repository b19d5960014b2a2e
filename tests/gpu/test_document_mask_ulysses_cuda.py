"""`attention: per_document` under DeepSpeed-Ulysses over 2 GPUs with flash_attention_2: DeepSpeed hands flash
attention the gathered position ids and no mask, and transformers' varlen path masks per document where they restart,
so CPT on a per_document packing over 2 GPUs sharing each sequence trains what 1 GPU trains (bf16: flash attention
takes no fp32; losses within 1e-2 relative). Needs 2 CUDA GPUs, flash-attn and deepspeed. The plumbing runs on the CPU
tier with a test attention that masks from the position ids (tests/trainers/test_document_mask_ulysses.py); the
refusals of sdpa, flex and the ring are in tests/trainers/test_document_mask.py. Never run yet: no machine with 2 GPUs
has been lent.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
TESTS = Path(__file__).resolve().parents[1]
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "tie_word_embeddings": True}


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def ready() -> bool:
    import torch

    found = all(importlib.util.find_spec(m) is not None for m in ("flash_attn", "deepspeed"))
    return found and torch.cuda.device_count() >= 2


@pytest.mark.skipif(not ready(), reason="needs 2 CUDA GPUs, flash-attn and deepspeed")
def test_per_document_ulysses_with_flash_attention_over_two_gpus_equals_one(tmp_path, tokenizer_dir):
    cpu = _load("docmask_ulysses_tests", TESTS / "trainers" / "test_document_mask_ulysses.py")
    packing = cpu.short_document_packing(tmp_path, tokenizer_dir)
    base = {"model": {"config": TINY, "tokenizer": tokenizer_dir}, "attn": "flash_attention_2"}
    cpu.assert_ulysses_equals_one_process(tmp_path, packing, "transformers", precision="bf16", base=base, rtol=1e-2,
                                          atol=5e-3)
