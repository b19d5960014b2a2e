"""The model a training starts from: a scratch model built from its config, or a checkpoint, with the config's RoPE
applied for the sequence length, in fp32 master weights (bf16 under DeepSpeed bf16, which keeps its own)."""

from __future__ import annotations

from typing import Any

from ctxbench.trainers.base import ScratchModel, TrainerConfig, apply_rope


def initial_model(c: TrainerConfig, tok: Any, seq_len: int, precision: str) -> Any:
    """The model before the first step (seeded by the config's seed when built from scratch)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if isinstance(c.base_model, ScratchModel):
        kw = dict(c.base_model.config)
        model_type = kw.pop("model_type", "llama")
        kw.setdefault("vocab_size", len(tok))
        for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
            kw.setdefault(key, getattr(tok, key, None))
        mc = AutoConfig.for_model(model_type, **kw)
        apply_rope(mc, c.rope, seq_len)
        torch.manual_seed(c.seed)
        model = AutoModelForCausalLM.from_config(mc, attn_implementation=c.attn_implementation)
    else:
        from ctxbench.harness.core.models import materialize, resolve

        path = materialize(resolve(c.base_model))
        mc = AutoConfig.from_pretrained(path)
        apply_rope(mc, c.rope, seq_len)
        dtype = torch.bfloat16 if (c.deepspeed and precision == "bf16") else torch.float32
        model = AutoModelForCausalLM.from_pretrained(path, config=mc, dtype=dtype, attn_implementation=c.attn_implementation)
    if c.gradient_checkpointing:
        model.config.use_cache = False
    return model
