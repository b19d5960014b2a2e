"""LoRA for LOGO (§4.1; the authors' code): r 32, α 16, no dropout, on q/k/v/o, embeddings and norms trained in full.

The fully trained modules go through PEFT's `modules_to_save`, so adapter checkpoints carry them (a resumed
run restores them). Models that tie the output head to the input embedding keep the tie through
`ensure_weight_tying`. The final checkpoint is merged into a plain HF directory (no adapter_config.json at
its top level), which `ctxbench score --model DIR` and vLLM load like any model.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ctxbench.harness.core.errors import ConfigError


class LoraSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    r: int = Field(32, ge=1, description="LoRA rank (code 32)")
    alpha: float = Field(16, gt=0, description="LoRA alpha (code 16)")
    dropout: float = Field(0.0, ge=0, lt=1, description="LoRA dropout (code 0)")
    target_modules: list[str] = Field(["q_proj", "k_proj", "v_proj", "o_proj"], min_length=1,
                                      description="linear modules that get LoRA adapters (attention q/k/v/o)")
    trainable: list[str] = Field(["embed", "norm"], description="modules trained in full: names containing any of these "
                                 "(the code's `embed,norm`: token embeddings and every norm)")


def linear_modules(model: Any) -> list[str]:
    """Last name components of the model's linear layers (what target_modules may name)."""
    import torch

    return sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)})


def full_modules(model: Any, patterns: list[str]) -> list[str]:
    """Last name components of modules with their own weights whose name contains a pattern (output head aside)."""
    head = model.get_output_embeddings()
    names = set()
    for n, m in model.named_modules():
        last = n.rsplit(".", 1)[-1]
        if m is not head and any(p in last for p in patterns) and any(True for _ in m.parameters(recurse=False)):
            names.add(last)
    return sorted(names)


def wrap(model: Any, spec: LoraSpec) -> Any:
    """The model with LoRA adapters and fully trained embeddings/norms; a missing target is one line listing the linears."""
    from peft import LoraConfig, get_peft_model

    linear = linear_modules(model)
    missing = [t for t in spec.target_modules if t not in linear]
    if missing:
        raise ConfigError(f"lora.target_modules: {', '.join(missing)} not in the model; its linear modules: {', '.join(linear)}")
    full = full_modules(model, spec.trainable)
    if spec.trainable and not full:
        raise ConfigError(f"lora.trainable: no module name contains {', '.join(spec.trainable)}")
    embed_name = next((n.rsplit(".", 1)[-1] for n, m in model.named_modules() if m is model.get_input_embeddings()), None)
    tied = bool(getattr(model.config, "tie_word_embeddings", False)) and embed_name in full
    config = LoraConfig(r=spec.r, lora_alpha=spec.alpha, lora_dropout=spec.dropout, target_modules=list(spec.target_modules),
                        modules_to_save=full or None, ensure_weight_tying=tied, task_type="CAUSAL_LM")
    return get_peft_model(model, config)


def summary(model: Any, spec: LoraSpec) -> dict[str, Any]:
    """What the manifest records: the LoRA settings and the trainable parameters."""
    trainable = [(n, p.numel()) for n, p in model.named_parameters() if p.requires_grad]
    total = sum(p.numel() for p in model.parameters())
    config = model.peft_config["default"]
    return {**spec.model_dump(), "modules_to_save": sorted(config.modules_to_save or []),
            "ensure_weight_tying": bool(getattr(config, "ensure_weight_tying", False)),
            "trainable_parameters": sum(n for _, n in trainable), "all_parameters": total,
            "trainable_tensors": len(trainable)}
