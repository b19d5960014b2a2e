"""Ring attention past the head limit (`sequence_parallel: {ring: N}`, torch context parallelism through transformers
and accelerate under FSDP2): the layout in the config, its one-line refusals, the TrainingArguments it makes, the
memory plan, and the probe that keeps the CPU adapter (trainers/ring_cpu.py) needed. The equivalence trainings (2 and 4
processes equal 1) run on the CPU over gloo in tests/trainers/test_ring_cpu.py, and on 2 GPUs in
tests/gpu/test_ring_attention_cuda.py.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ctxbench.harness.core.errors import ConfigError
from ctxbench.trainers.base import TrainerConfig
from ctxbench.trainers.context_parallel import SequenceParallel, layout
from ctxbench.trainers.distributed import check_sequence_parallel, sequence_parallel_arguments

TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2}


def test_an_int_is_the_ulysses_degree_and_a_ring_is_a_mapping():
    assert TrainerConfig(base_model="m", sequence_parallel=2).sequence_layout == SequenceParallel(ulysses=2)
    ring = TrainerConfig(base_model="m", sequence_parallel={"ring": 4}).sequence_layout
    assert (ring.ulysses, ring.ring, ring.degree, ring.spec) == (1, 4, 4, {"ulysses": 1, "ring": 4})
    assert layout(3).spec == 3  # run marks written before rings existed compare equal
    with pytest.raises(ValueError):
        TrainerConfig(base_model="m", sequence_parallel={"rings": 2})


def test_the_layout_is_execution_only():
    """Like the process count, the layout changes where a sequence is computed, not the training: no new run id."""
    plain = TrainerConfig(base_model="m").config_hash()
    assert TrainerConfig(base_model="m", sequence_parallel={"ring": 8}).config_hash() == plain
    assert TrainerConfig(base_model="m", sequence_parallel=2).config_hash() == plain


RING = {"deepspeed": None, "attn": "sdpa", "seq_len": 128, "trainer": "t", "heads": (4, 2), "has_cuda": True}


@pytest.mark.parametrize(("env", "sp", "kw", "says"), [
    ({"WORLD_SIZE": "4"}, {"ulysses": 2, "ring": 2}, {}, r"^sequence_parallel: ulysses 2 with ring 2 \(USP\) does not run"),
    ({"WORLD_SIZE": "2"}, {"ring": 2}, {"deepspeed": "zero3"}, r"^sequence_parallel.ring: 2 runs under FSDP2 .*drop deepspeed"),
    ({"WORLD_SIZE": "2"}, {"ring": 2}, {"attn": "eager"}, r"^sequence_parallel.ring: 2 needs attn_implementation sdpa"),
    ({"WORLD_SIZE": "2"}, {"ring": 2}, {"attn": "flash_attention_2"}, r"needs attn_implementation sdpa .*not flash"),
    ({"WORLD_SIZE": "3"}, {"ring": 2}, {}, r"^sequence_parallel.ring: 2 does not divide the 3 launched process\(es\)"),
    ({"WORLD_SIZE": "2"}, {"ring": 2}, {"seq_len": 130}, r"^sequence_parallel.ring: 2 needs a sequence length divisible by 4"),
    ({"WORLD_SIZE": "2"}, {"ring": 2}, {"supported": False}, r"^sequence_parallel: trainer t has no sequence parallelism"),
])
def test_a_ring_that_cannot_run_is_refused_in_one_line(monkeypatch, env, sp, kw, says):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ConfigError, match=says) as e:
        check_sequence_parallel(SequenceParallel(**sp), **{**RING, **kw})
    assert "\n" not in str(e.value)


def test_a_ring_passes_the_head_limit(monkeypatch):
    """Ulysses stops at the heads (4 here); a ring of 8 over a 4-head model is not refused for it."""
    monkeypatch.setenv("WORLD_SIZE", "8")
    with pytest.raises(ConfigError, match="must divide the model's 4 attention heads.*ring: N"):
        check_sequence_parallel(8, **{**RING, "deepspeed": "zero3"})
    check_sequence_parallel(SequenceParallel(ring=8), **RING)  # what runs (on GPUs)
    check_sequence_parallel(SequenceParallel(ring=8), **{**RING, "has_cuda": False})  # and on a CPU, over gloo


def test_ring_arguments_are_fsdp2_context_parallel(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    kw = sequence_parallel_arguments({"output_dir": "x", "activation_checkpointing": True}, SequenceParallel(ring=2), "sdpa")
    pc = kw["parallelism_config"]
    assert (pc.cp_size, pc.cp_backend, pc.dp_shard_size, pc.sp_size) == (2, "torch", 2, 1)
    assert pc.cp_handler.cp_comm_strategy == "alltoall"  # the ring rotation, not an all-gather of every key and value
    assert kw["fsdp"] is True and kw["fsdp_config"] == {"version": 2, "activation_checkpointing": True}
    assert kw["activation_checkpointing"] is False  # FSDP's own checkpointing instead of transformers'
    from transformers import TrainingArguments

    monkeypatch.delenv("WORLD_SIZE")
    args = TrainingArguments(**{**kw, "report_to": [], "use_cpu": True})  # transformers takes them (on a CPU, too)
    assert args.parallelism_config.cp_size == 2 and args.fsdp_config["version"] == 2
    assert sequence_parallel_arguments({"output_dir": "x"}, 1, "sdpa") == {"output_dir": "x"}


def test_a_cpt_ring_that_cannot_run_is_refused_before_any_data_is_made(tmp_path, monkeypatch):
    from ctxbench.trainers.cpt import CPTConfig, CPTTrainer

    monkeypatch.setenv("WORLD_SIZE", "3")
    cfg = CPTConfig(base_model={"config": TINY}, store=str(tmp_path / "runs"), sequence_parallel={"ring": 2},
                    data={"path": str(tmp_path / "nowhere")})
    with pytest.raises(ConfigError, match=r"^sequence_parallel.ring: 2 does not divide the 3 launched process"):
        CPTTrainer(cfg).train()
    assert not (tmp_path / "runs").exists()


def test_a_launched_cpu_ring_installs_the_cpu_adapter_and_an_fsdp_state(monkeypatch):
    """On a CPU (use_cpu, set for a launched run without GPUs) the ring gets torch's CPU SDPA entries and an
    accelerate state that FSDP accepts; without use_cpu (GPUs) neither is touched."""
    import torch
    from torch.distributed.tensor.experimental._context_parallel import _attention as cp

    from ctxbench.trainers import ring_cpu

    cpu_op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    monkeypatch.setitem(cp.__dict__, "custom_ops", dict(cp.custom_ops))
    cp.custom_ops.pop(cpu_op, None)
    monkeypatch.setattr(ring_cpu, "fsdp_on_cpu", lambda: {"accelerator_config": {"use_configured_state": True}})
    monkeypatch.setenv("WORLD_SIZE", "2")
    gpu = sequence_parallel_arguments({"output_dir": "x"}, SequenceParallel(ring=2), "sdpa")
    assert cpu_op not in cp.custom_ops and "accelerator_config" not in gpu
    cpu = sequence_parallel_arguments({"output_dir": "x", "use_cpu": True}, SequenceParallel(ring=2), "sdpa")
    assert cp.custom_ops[cpu_op] is ring_cpu._cpu_ring_handler
    assert cpu["accelerator_config"] == {"use_configured_state": True}


def test_the_plan_shards_activations_over_the_ring_and_names_it_past_the_heads():
    from ctxbench.trainers.memory_plan import KNOWN, needed_layout, per_gpu, render, workload

    cfg = TrainerConfig(base_model="meta-llama/Llama-3.1-8B-Instruct", gradient_checkpointing=True,
                        sequence_parallel={"ring": 64})
    ring = workload(cfg, "w", seq_len=4_000_000, sequences=1)
    flat = workload(cfg.model_copy(update={"sequence_parallel": 1}), "w", seq_len=4_000_000, sequences=1)
    assert (ring.sequence_parallel, ring.ring, ring.zero) == (64, 64, 3)  # FSDP2 full_shard partitions as ZeRO-3 does
    assert per_gpu(ring, 64).activations < per_gpu(flat, 64).activations / 60
    assert "sequence parallel 64 (ring 64)" in render([ring], 80)[0]
    heads = KNOWN["meta-llama/Llama-3.1-8B-Instruct"].heads
    assert needed_layout(16, heads) == "sequence_parallel >= 16"
    assert needed_layout(64, heads) == "sequence_parallel: {ring: 64} (past the 32 heads)"


PROBE = textwrap.dedent("""
    import os, torch, torch.distributed as dist, torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.experimental import context_parallel
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("PROBE_PORT", "29561"))
    dist.init_process_group("gloo", rank=0, world_size=1)
    q, k, v = (torch.randn(1, 2, 16, 8) for _ in range(3))
    try:
        with context_parallel(init_device_mesh("cpu", (1,)), buffers=[q, k, v], buffer_seq_dims=[2, 2, 2]):
            F.scaled_dot_product_attention(q, k, v, is_causal=True)
        print("ran")
    except NotImplementedError as e:
        print("refused:", e)
""")


def test_torch_ring_attention_still_has_no_cpu_kernel():
    """The CPU adapter (trainers/ring_cpu.py) stands on this: torch's own context parallelism has no entry for the CPU
    SDPA op. When a torch release adds one this fails, and the adapter can go."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120,
                         env={"PROBE_PORT": str(port), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert "refused:" in out.stdout and "_scaled_dot_product_flash_attention_for_cpu" in out.stdout, out.stderr[-2000:]


def test_an_hqa_stage_ring_that_cannot_run_is_refused_naming_the_stage_before_any_data(tmp_path, monkeypatch):
    from ctxbench.trainers.hqa.trainer import HQASFTConfig, HQASFTTrainer

    monkeypatch.setenv("WORLD_SIZE", "2")
    stage = {"name": "s1", "data": "hqa-tiny", "seq_len": 1026, "sequence_parallel": {"ring": 2}}
    cfg = HQASFTConfig(base_model={"config": TINY}, store=str(tmp_path / "runs"), stages=[stage])
    with pytest.raises(ConfigError, match=r"^stages\.s1\.sequence_parallel\.ring: 2 needs a sequence length divisible by 4"):
        HQASFTTrainer(cfg).train()
    assert not (tmp_path / "runs").exists()
    with pytest.raises(ValueError, match="per stage"):
        HQASFTConfig(base_model="m", stages=[stage], sequence_parallel={"ring": 2})


def test_resuming_under_another_layout_is_refused(tmp_path):
    """Run marks record the layout: Ulysses 2 as 2 (as before rings), a ring as a mapping; another is refused."""
    from ctxbench.trainers.distributed import refuse_other_world_size

    ring = SequenceParallel(ring=2).spec
    refuse_other_world_size(tmp_path, 1, 1, sp_before=ring, sp_now=SequenceParallel(ring=2).spec)  # the same: resumes
    refuse_other_world_size(tmp_path, 1, 1, sp_before=2, sp_now=layout(2).spec)
    with pytest.raises(ConfigError, match=r"trained with sequence_parallel 2, this config has \{'ulysses': 1, 'ring': 2\}"):
        refuse_other_world_size(tmp_path, 1, 1, sp_before=2, sp_now=ring)


def test_the_chunked_loss_runs_under_a_ring_for_cpt_and_hqa_sft_and_is_refused_for_logo(tmp_path, monkeypatch):
    """CPT's and hqa_sft's chunked head runs inside the model's forward (trainers/chunked_loss.py `loss_in_forward`;
    trained over a CPU ring in tests/trainers/test_ring_cpu.py); LOGO's chunked rewards still run the head after the
    forward, which FSDP2 frees first under a ring (a segfault on a CPU): refused in one line."""
    from ctxbench.trainers.cpt import CPTConfig, CPTTrainer
    from ctxbench.trainers.hqa.trainer import HQASFTConfig, HQASFTTrainer
    from ctxbench.trainers.logo.trainer import LogoConfig, LogoTrainer

    monkeypatch.setenv("WORLD_SIZE", "2")
    cfg = CPTConfig(base_model={"config": TINY}, store=str(tmp_path / "runs"), sequence_parallel={"ring": 2},
                    loss_chunk_tokens=32, data={"path": str(tmp_path / "nowhere")})
    CPTTrainer(cfg).check_sequence_parallel(128)
    stage = {"name": "s1", "data": "hqa-tiny", "seq_len": 1024, "sequence_parallel": {"ring": 2}}
    cfg = HQASFTConfig(base_model={"config": TINY}, store=str(tmp_path / "runs"), stages=[stage], loss_chunk_tokens=32)
    assert HQASFTTrainer(cfg).stage_configs()[0].loss_chunk_tokens == 32
    cfg = LogoConfig(base_model={"config": TINY}, store=str(tmp_path / "runs"), sequence_parallel={"ring": 2},
                     loss_chunk_tokens=32, data={"path": str(tmp_path / "nowhere")})
    with pytest.raises(ConfigError, match=r"^loss_chunk_tokens: 32 runs the output head after .*ring 2; set "
                                          r"loss_chunk_tokens: 0") as e:
        LogoTrainer(cfg).train()
    assert "\n" not in str(e.value)
    assert not (tmp_path / "runs").exists()


def test_logo_takes_a_ring_and_refuses_ulysses_before_any_data(tmp_path, monkeypatch):
    """LOGO's rewards sum each response over a ring's shards (trainers/logo/ring_rewards.py); Ulysses has no such sum."""
    from ctxbench.trainers.logo.trainer import LogoConfig, LogoTrainer

    monkeypatch.setenv("WORLD_SIZE", "2")
    raw = {"base_model": {"config": TINY}, "store": str(tmp_path / "runs"), "data": {"path": str(tmp_path / "nowhere")}}
    with pytest.raises(ConfigError, match=r"^sequence_parallel: trainer logo has no Ulysses sequence parallelism .*"
                                          r"set sequence_parallel: \{ring: 2\} or 1$"):
        LogoTrainer(LogoConfig(**{**raw, "sequence_parallel": 2, "deepspeed": "zero3"})).train()
    ring = LogoTrainer(LogoConfig(**{**raw, "sequence_parallel": {"ring": 2}}))
    ring.check_sequence_parallel(1001)  # the collator pads each batch to a multiple of 4: any length runs
    with pytest.raises(ConfigError, match=r"^sequence_parallel.ring: 2 does not divide the 3 launched"):
        monkeypatch.setenv("WORLD_SIZE", "3")
        ring.check_sequence_parallel(None)
    assert not (tmp_path / "runs").exists()


def test_logo_batches_pad_to_the_rings_multiple():
    import numpy as np

    from ctxbench.trainers.logo.trainer import collate_responses

    row = {key: [np.arange(5), np.arange(3)] for key in ("input_ids", "labels", "position_ids")}
    assert collate_responses([row], pad_id=0)["input_ids"].shape == (2, 5)
    batch = collate_responses([row], pad_id=0, multiple=4)
    assert batch["input_ids"].shape == (2, 8) and batch["attention_mask"].sum().item() == 8
