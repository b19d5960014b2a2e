"""ALST switches (Arctic Long Sequence Training, as DeepSpeed and PyTorch ship its pieces), each a config switch:

- `tiled_mlp: K`: DeepSpeed's `TiledMLP` (deepspeed.runtime.sequence_parallel.ulysses_sp) runs each Llama-style MLP
  over K tiles of the sequence and recomputes each tile in backward, so the tokens x intermediate activations exist
  one tile at a time. Put on the model's MLP modules (each instance), not on the transformers class.
- `activation_offload: true`: `torch.autograd.graph.save_on_cpu` around the loss's forward: what autograd saves for
  backward (with activation checkpointing, every layer's input; and the loss's own) is kept in CPU memory.
- tiled logits and loss: `loss_chunk_tokens` (trainers/chunked_loss.py).

No computation is written here; the MLP's own modules run on each tile.
"""

from __future__ import annotations

import contextlib
import importlib.util
import types
from typing import Any

from ctxbench.harness.core.errors import ConfigError

GATED = ("gate_proj", "up_proj", "down_proj")  # Llama, Mistral, SmolLM2, Qwen: down(act(gate(x)) * up(x))


def check_alst(config: Any, *, world: int) -> None:
    """Refuse, in one line and before anything is written, a switch that cannot run as configured."""
    if not config.tiled_mlp:
        return
    if importlib.util.find_spec("deepspeed") is None:
        raise ConfigError("tiled_mlp: DeepSpeed's TiledMLP needs the deepspeed package (pip install 'ctxbench[train]'); "
                          "set tiled_mlp: 0")
    if world > 1 and not config.deepspeed:
        raise ConfigError(f"tiled_mlp: {config.tiled_mlp} under {world} processes needs deepspeed (TiledMLP tells ZeRO when "
                          "a weight's gradient is complete; DDP would reduce it after the first tile); set deepspeed: zero3 "
                          "or tiled_mlp: 0")


def mlp_modules(model: Any) -> list[Any]:
    """The model's gated MLP modules; a model without them is refused for tiled_mlp."""
    found = [m for m in model.modules() if type(m).__name__.endswith("MLP") and all(hasattr(m, n) for n in GATED)]
    if not found:
        names = sorted({type(m).__name__ for m in model.modules() if type(m).__name__.endswith("MLP")}) or ["none"]
        raise ConfigError(f"tiled_mlp: the model's MLP ({', '.join(names)}) is not a gated gate/up/down MLP; set tiled_mlp: 0")
    return found


def _gated_mlp(module: Any, x: Any) -> Any:
    return module.down_proj(module.act_fn(module.gate_proj(x)) * module.up_proj(x))


def tile_mlps(model: Any, tiles: int) -> Any:
    """Run every gated MLP of `model` through DeepSpeed's TiledMLP in `tiles` tiles (tiles <= 1: unchanged)."""
    if tiles <= 1:
        return model
    from deepspeed.runtime.sequence_parallel.ulysses_sp import TiledMLP

    def forward(self, x):
        weights = [self.gate_proj.weight, self.up_proj.weight, self.down_proj.weight]
        return TiledMLP.apply(_gated_mlp, self, x, min(tiles, max(1, x.shape[-2])), weights)

    for module in mlp_modules(model):
        module.forward = types.MethodType(forward, module)
    return model


def offloaded(enabled: bool):
    """A context in which what autograd saves for backward lives in CPU memory (pinned on a GPU machine)."""
    if not enabled:
        return contextlib.nullcontext()
    import torch

    return torch.autograd.graph.save_on_cpu(pin_memory=torch.cuda.is_available())


def alst_trainer_class(cls: type, config: Any) -> type:
    """`cls` (a transformers Trainer class) with the loss's forward under activation offload when the config asks."""
    if not config.activation_offload:
        return cls

    class Offloaded(cls):
        def compute_loss(self, *args, **kwargs):
            with offloaded(True):
                return super().compute_loss(*args, **kwargs)

    Offloaded.__name__ = f"Offloaded{cls.__name__}"
    return Offloaded
