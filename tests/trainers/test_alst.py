"""ALST switches (trainers/alst.py): `tiled_mlp` (DeepSpeed's TiledMLP on each gated MLP) and `activation_offload`
(torch's save_on_cpu around the loss's forward) give the same loss and gradients as without them, are execution-only,
are refused in one line where they cannot run, and change what `--plan` counts."""

from __future__ import annotations

import importlib.util

import pytest

from ctxbench.harness.core.errors import ConfigError
from ctxbench.trainers.alst import alst_trainer_class, check_alst, tile_mlps
from ctxbench.trainers.base import TrainerConfig

HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None
TINY = {"hidden_size": 32, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 256}


def tiny_llama():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**TINY)).float()


def loss_and_grads(model, ids):
    model.zero_grad()
    out = model(input_ids=ids, labels=ids, use_cache=False)
    out.loss.backward()
    return out.loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.skipif(not HAS_DEEPSPEED, reason="tiled_mlp uses DeepSpeed's TiledMLP")
def test_tiled_mlp_gives_the_same_loss_and_gradients():
    import torch

    ids = torch.randint(0, 256, (2, 64), generator=torch.Generator().manual_seed(1))
    model = tiny_llama()
    plain_loss, plain = loss_and_grads(model, ids)
    tiled = tile_mlps(model, 4)
    assert all("TiledMLP" not in type(m).__name__ for m in tiled.modules())  # the modules stay; their forward tiles
    tiled_loss, grads = loss_and_grads(tiled, ids)
    assert tiled_loss == pytest.approx(plain_loss, rel=1e-6)
    for name, g in plain.items():
        assert torch.allclose(grads[name], g, atol=1e-6, rtol=1e-5), name


@pytest.mark.skipif(not HAS_DEEPSPEED, reason="tiled_mlp uses DeepSpeed's TiledMLP")
def test_tiled_mlp_really_runs_in_tiles():
    """Each MLP's down projection sees the sequence a tile at a time (so the intermediate is one tile's)."""
    import torch

    model = tile_mlps(tiny_llama(), 4)
    seen = []
    model.model.layers[0].mlp.down_proj.register_forward_hook(lambda m, i, o: seen.append(i[0].shape[-2]))
    model(input_ids=torch.zeros(1, 64, dtype=torch.long), use_cache=False)
    assert seen == [16, 16, 16, 16]


def test_a_model_without_a_gated_mlp_is_refused_for_tiled_mlp():
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    model = GPTNeoXForCausalLM(GPTNeoXConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                             intermediate_size=64, vocab_size=128))
    if not HAS_DEEPSPEED:
        pytest.skip("needs deepspeed to reach the model check")
    with pytest.raises(ConfigError, match=r"^tiled_mlp: the model's MLP \(GPTNeoXMLP\) is not a gated"):
        tile_mlps(model, 2)


def test_tiled_mlp_under_ddp_is_refused_in_one_line():
    cfg = TrainerConfig(base_model="m", tiled_mlp=4)
    with pytest.raises(ConfigError, match=r"^tiled_mlp: (4 under 2 processes needs deepspeed|DeepSpeed's TiledMLP needs)"):
        check_alst(cfg, world=2)
    if HAS_DEEPSPEED:
        check_alst(cfg.model_copy(update={"deepspeed": "zero3"}), world=2)  # ZeRO knows when a tiled gradient is complete
    check_alst(TrainerConfig(base_model="m"), world=2)  # off: nothing to refuse


def test_the_switches_are_execution_only():
    plain = TrainerConfig(base_model="m").config_hash()
    assert TrainerConfig(base_model="m", tiled_mlp=8, activation_offload=True).config_hash() == plain


def test_activation_offload_runs_the_loss_forward_under_save_on_cpu(monkeypatch):
    """What autograd saves during compute_loss goes through save_on_cpu's hooks; the loss and gradients are equal."""
    import torch

    calls = []
    real = torch.autograd.graph.save_on_cpu

    class Spy(real):
        def __init__(self, *a, **k):
            calls.append(k)
            super().__init__(*a, **k)

    monkeypatch.setattr(torch.autograd.graph, "save_on_cpu", Spy)

    class Base:
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            return model(**inputs, use_cache=False).loss

    ids = torch.randint(0, 256, (1, 32), generator=torch.Generator().manual_seed(2))
    model = tiny_llama()
    plain_loss, plain = loss_and_grads(model, ids)
    off = alst_trainer_class(Base, TrainerConfig(base_model="m", activation_offload=True))()
    assert alst_trainer_class(Base, TrainerConfig(base_model="m")) is Base
    model.zero_grad()
    loss = off.compute_loss(model, {"input_ids": ids, "labels": ids})
    loss.backward()
    assert calls == [{"pin_memory": torch.cuda.is_available()}]
    assert loss.item() == pytest.approx(plain_loss, rel=1e-7)
    for name, p in model.named_parameters():
        assert torch.allclose(p.grad, plain[name], atol=1e-7), name


def test_the_plan_counts_each_switch():
    from ctxbench.trainers.memory_plan import per_gpu, render, workload

    cfg = TrainerConfig(base_model="smollm2-135m", gradient_checkpointing=True)
    base = per_gpu(workload(cfg, "w", seq_len=65536, sequences=1), 1)
    tiled = per_gpu(workload(cfg.model_copy(update={"tiled_mlp": 8}), "w", seq_len=65536, sequences=1), 1)
    off_cfg = cfg.model_copy(update={"activation_offload": True})
    off = per_gpu(workload(off_cfg, "w", seq_len=65536, sequences=1), 1)
    assert tiled.activations < base.activations and off.activations < base.activations
    assert off.offloaded == pytest.approx(base.activations - off.activations)  # the layer inputs move to CPU memory
    lines = "\n".join(render([workload(off_cfg.model_copy(update={"tiled_mlp": 8}), "w", seq_len=65536, sequences=1)], 80))
    assert "tiled MLP in 8 tiles" in lines and "activations offloaded to CPU" in lines


@pytest.mark.slow  # ~30 s: packs a small corpus and trains twice
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="tiled_mlp uses DeepSpeed's TiledMLP")
def test_cpt_trains_with_both_switches_as_without(tmp_path, monkeypatch):
    """Through the real loop (trainers/loop.py puts the switches on the model and the Trainer class): the same losses
    at every step and the same final weights, under the same run id."""
    from pathlib import Path

    from ctxbench.trainers import loop
    from ctxbench.trainers.cpt import CPTConfig, CPTTrainer
    from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize
    from ctxbench.trainers.data.stdlib_corpus import resolve_corpus

    corpus = resolve_corpus({"path": "stdlib:json"}, tmp_path)
    synthesize(SynthesisConfig(corpus=corpus, method="standard", seq_len=128, budget_tokens=128 * 6,
                               tokenizer="smollm2-135m", seed=0, out_dir=str(tmp_path / "packed")))
    applied = []
    monkeypatch.setattr(loop, "tile_mlps", lambda model, tiles: applied.append(tiles) or tile_mlps(model, tiles))
    runs = {}
    for name, switches in (("plain", {}), ("alst", {"tiled_mlp": 4, "activation_offload": True})):
        cfg = CPTConfig(base_model={"config": {**TINY, "vocab_size": 49152}}, store=str(tmp_path / name), max_steps=3,
                        per_device_batch_size=2, learning_rate=5e-3, save_steps=3, threads=1, seed=0,
                        gradient_checkpointing=True, data={"path": str(tmp_path / "packed"), "eval_sequences": 0},
                        **switches)
        runs[name] = CPTTrainer(cfg).train()
    plain, alst = runs["plain"], runs["alst"]
    assert applied == [0, 4] and plain.run_id == alst.run_id and plain.steps == alst.steps == 3
    spec = importlib.util.spec_from_file_location("ddp_tests_alst", Path(__file__).with_name("test_ddp.py"))
    ddp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ddp)
    # Adam moves a weight whose gradient is near 0 by an amount rounding decides: within 1% of one step's move (5e-3),
    # as tests/trainers/test_sequence_parallel.py compares; the tiled MLP adds its weight gradients tile by tile
    ddp.assert_same_training(tmp_path / "plain", plain.run_id, tmp_path / "alst", alst.run_id, rtol=1e-5, atol=5e-5)
