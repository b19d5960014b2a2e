"""`ctxbench train --plan`: the model-state formula against DeepSpeed's own estimator, the activation formula against
the tensors a tiny model really saves for backward, and the plan printed for every shipped config."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxbench.trainers.memory_plan import KNOWN, Shape, Workload, per_gpu, render, smallest_cluster

REPO = Path(__file__).resolve().parents[2]


def deepspeed_zero3_gpu(total_params: int, largest_layer_params: int, gpus: int) -> int:
    """deepspeed.runtime.zero.stage3.estimate_zero3_model_states_mem_needs (0.19.8), cpu_offload=False: its GPU bytes."""
    return 4 * largest_layer_params + int(18 * total_params / gpus)


def deepspeed_zero2_gpu(total_params: int, gpus: int) -> int:
    """deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs (0.19.8), cpu_offload=False."""
    return 2 * total_params + int(18 * total_params / gpus)


@pytest.mark.parametrize("name", sorted(KNOWN))
@pytest.mark.parametrize("gpus", [1, 8, 64])
def test_model_states_are_deepspeeds_estimate_plus_the_16bit_partition_it_leaves_out(name, gpus):
    shape = KNOWN[name]
    p = shape.params()
    w = Workload("w", shape, 1024, 1, p, 0.0, zero=3)
    plan = per_gpu(w, gpus)
    states = plan.weights + plan.gradients + plan.optimizer
    assert states == pytest.approx(deepspeed_zero3_gpu(p, shape.largest_layer(), gpus) + 2 * p / gpus, rel=1e-9)
    two = per_gpu(Workload("w", shape, 1024, 1, p, 0.0, zero=2), gpus)
    assert two.weights + two.gradients + two.optimizer == pytest.approx(deepspeed_zero2_gpu(p, gpus), rel=1e-9)


def test_the_formula_matches_deepspeeds_estimator_on_a_live_model():
    deepspeed = pytest.importorskip("deepspeed")  # noqa: F841 - the estimator itself, where deepspeed installs
    import torch
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs, model_to_params
    from transformers import LlamaConfig, LlamaForCausalLM

    shape = Shape(256, 4, 8, 4, 688, 4096)
    model = LlamaForCausalLM(LlamaConfig(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=8,
                                         num_key_value_heads=4, vocab_size=4096, tie_word_embeddings=False))
    total, largest = model_to_params(model)
    assert (total, largest) == (shape.params(), shape.largest_layer())
    _, gpu, _ = estimate_zero3_model_states_mem_needs(total, largest, num_gpus_per_node=8, cpu_offload=False)
    plan = per_gpu(Workload("w", shape, 64, 1, total, 0.0, zero=3), 8)
    assert plan.weights + plan.gradients + plan.optimizer == pytest.approx(gpu + 2 * total / 8, rel=1e-6)
    del torch


def test_parameter_counts_of_the_paper_models():
    assert KNOWN["meta-llama/Llama-3.1-8B-Instruct"].params() == 8_030_261_248
    assert KNOWN["meta-llama/Llama-2-7b-chat-hf"].params() == 6_738_415_616
    assert KNOWN["mistralai/Mistral-7B-Instruct-v0.2"].params() == 7_241_732_096
    assert KNOWN["smollm2-135m"].params() == 134_515_008


def saved_for_backward(model, ids, checkpointing: bool) -> int:
    """Bytes of the distinct tensors autograd saves during forward (the activations), parameters excluded."""
    import torch

    seen: dict[int, int] = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, labels=ids)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    return sum(n for ptr, n in seen.items() if ptr not in params)


def test_activation_formula_against_what_a_tiny_model_saves():
    """Per layer and token 20h + 4kv + 8I bytes (bf16), within 3%; with checkpointing exactly the layer inputs (2h B)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    seq, layers, vocab = 256, 2, 1024
    for h, kv_heads, inter in ((256, 4, 688), (256, 4, 1376), (512, 8, 688)):
        shape = Shape(h, layers, 8, kv_heads, inter, vocab)
        cfg = LlamaConfig(hidden_size=h, intermediate_size=inter, num_hidden_layers=layers, num_attention_heads=8,
                          num_key_value_heads=kv_heads, vocab_size=vocab, attn_implementation="sdpa")
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
        ids = torch.randint(0, vocab, (1, seq))
        full, kept = saved_for_backward(model, ids, False) / seq, saved_for_backward(model, ids, True) / seq
        logits = kept - layers * 2 * h  # checkpointing keeps each layer's input, the final norm's and the loss's tensors
        assert 4 * vocab <= logits <= 5 * vocab + 8 * h  # fp32 logits; the plan's 10 B/token/vocab adds the backward
        assert (full - logits) / layers == pytest.approx(shape.activation_bytes(), rel=0.03)


def test_the_plan_of_every_shipped_config(ctxbench):
    for path in sorted((REPO / "configs" / "trainers").glob("*.yaml")):
        text = path.read_text()
        method = "hqa_sft" if "stages:" in text else "logo" if path.name.startswith("logo") else "cpt"
        code, out, err = ctxbench("train", method, "--config", str(path), "--plan")
        if "base_model: runs/" in text:  # a second stage (prolong-*-512k): its base is the first stage's checkpoint
            assert code == 2 and err.strip().startswith("error: base_model: no shape known for 'runs/"), (path.name, err)
            continue
        assert code == 0, (path.name, err)
        assert "per GPU on" in out and ("fits: " in out or "does not fit" in out), out
    code, out, _ = ctxbench("train", "hqa_sft", "--config", "configs/trainers/hqa-sft-llama3.1-8b-1m.yaml", "--plan")
    assert "stage 1m:" in out and "sequence parallel 16" in out and "fits: 16 x 80 GiB" in out
    assert "stage 180k:" in out and "needs sequence_parallel >= 2" in out
    code, out, _ = ctxbench("train", "cpt", "--config", "configs/trainers/cpt-quest-1.4b-128k.yaml", "--plan")
    assert "sequence parallel 2," in out and "fits: 2 x 80 GiB" in out  # a CPT config's own degree


def test_more_gpu_memory_fits_on_fewer_gpus():
    w = Workload("w", KNOWN["meta-llama/Llama-3.1-8B-Instruct"], 65536, 1, 8_030_261_248, 0.05, zero=3, checkpointing=True)
    small, big = smallest_cluster(w, 80 * 1024**3), smallest_cluster(w, 141 * 1024**3)
    assert small is not None and big is not None and big.gpus <= small.gpus
    assert any("fits: " in line for line in render([w], 80))
