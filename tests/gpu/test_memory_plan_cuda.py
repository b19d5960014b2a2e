"""The memory plan holds on a GPU: for the recipes of benchmarks/gpu_paper_recipes.py (SmolLM2-135M shape, bf16,
SDPA, one GPU) and for CPT at 16K with each ALST switch, the peak torch allocates stays within the plan's total and its
margin (`Plan.bound`: trainers/plan_margin.py), the bound `ctxbench train --plan` prints. Prints every number, for
benchmarks/README.md. Written this session without a GPU: not run yet."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[2]


def recipes():
    if "gpu_paper_recipes" not in sys.modules:
        spec = importlib.util.spec_from_file_location("gpu_paper_recipes", REPO / "benchmarks" / "gpu_paper_recipes.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["gpu_paper_recipes"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["gpu_paper_recipes"]


def peak_and_plan(tmp_path: Path, tokenizer_dir: str, recipe_index: int, steps: int, **switches):
    import torch

    from ctxbench.harness.core.models import load_tokenizer
    from ctxbench.trainers.memory_plan import per_gpu

    g = recipes()
    r = g.RECIPES[recipe_index]
    made = g.recipe_config(r, steps=steps, tokenizer=tokenizer_dir, store=tmp_path / "runs", tiny=False)
    made["raw"].update(switches)
    tok = load_tokenizer(tokenizer_dir)
    trainer = g.build_trainer(r, made, lambda n: g.stdlib_tokens(tok, n))
    [w] = g.plan_workload(r, trainer, made)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    trainer.train()
    peak, plan = torch.cuda.max_memory_allocated(), per_gpu(w, 1)
    print(f"{r.name} {switches}: peak {peak / 2**30:.2f} GiB, plan {plan.total / 2**30:.2f} GiB, "
          f"bound {plan.bound / 2**30:.2f} GiB")
    return peak, plan


@pytest.mark.parametrize("index", range(4), ids=["cpt-quest", "cpt-splice", "hqa-180k", "logo-64k"])
def test_each_recipes_peak_lies_within_the_plan_and_its_margin(tmp_path, tokenizer_dir, index):
    peak, plan = peak_and_plan(tmp_path, tokenizer_dir, index, steps=3)
    assert peak <= plan.bound


NO_DEEPSPEED = pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="tiled_mlp uses DeepSpeed's TiledMLP")


@pytest.mark.parametrize("switches", [
    {"loss_chunk_tokens": 4096}, pytest.param({"tiled_mlp": 4}, marks=NO_DEEPSPEED), {"activation_offload": True},
    pytest.param({"tiled_mlp": 4, "activation_offload": True, "loss_chunk_tokens": 4096}, marks=NO_DEEPSPEED),
], ids=["chunked-loss", "tiled-mlp", "offload", "all"])
def test_each_alst_switch_stays_within_its_plan_and_margin(tmp_path, tokenizer_dir, switches):
    peak, plan = peak_and_plan(tmp_path, tokenizer_dir, 0, steps=3, gradient_accumulation_steps=1, **switches)
    assert peak <= plan.bound
