"""The memory plan's margin (trainers/plan_margin.py): calibrated so that the GPU tier's recorded peaks, which the
plan's four parts under-counted by 1.0-1.9 GiB, lie within total + margin; every switch's share printed by --plan."""

from __future__ import annotations

import pytest

from ctxbench.trainers.memory_plan import GIB, KNOWN, Workload, per_gpu, render
from ctxbench.trainers.plan_margin import margin_of

SMOL = KNOWN["smollm2-135m"]
# The GPU tier's runs (benchmarks/gpu_paper_recipes.py on one H100: bf16, SDPA, checkpointing, no DeepSpeed), as the
# plan saw them, and the peak each allocated (docs/training-at-scale.md, "On one GPU").
RECORDED = [
    (Workload("cpt-quest-1.4b-32k", SMOL, 16384, 1, SMOL.params(), 1.0, checkpointing=True), 12.3),
    (Workload("cpt-splice-3b-32k", SMOL, 16384, 1, SMOL.params(), 1.0, checkpointing=True), 11.8),
    (Workload("hqa stage 180k", SMOL, 65536, 1, SMOL.params(), 0.05, checkpointing=True), 8.2),
    (Workload("logo-llama3-8b-instruct-64k", SMOL, 8704, 3, 32_033_088, 512 / 8704, checkpointing=True), 4.0),
]


@pytest.mark.parametrize(("w", "peak_gib"), RECORDED, ids=[w.name for w, _ in RECORDED])
def test_the_recorded_peaks_lie_within_the_plan_and_its_margin(w, peak_gib):
    plan = per_gpu(w, 1)
    assert plan.total / GIB < peak_gib  # what the GPU tier found: the four parts alone under-count
    assert plan.bound / GIB >= peak_gib
    assert (plan.bound - plan.total) / GIB < 2.5  # and not by an arbitrary amount


# The chunked-loss measurements on one H100 (docs/training-at-scale.md, "The formula"): one forward and backward of a
# SmolLM2-135M-shaped model with checkpointing, no optimizer; not used to fit the margin. (seq, loss_chunk_tokens, GiB)
CHUNKED = [(16384, 0, 9.9), (16384, 4096, 3.2), (65536, 0, 38.7), (65536, 4096, 5.1)]


@pytest.mark.parametrize(("seq", "chunk", "peak_gib"), CHUNKED)
def test_the_chunked_loss_peaks_also_lie_within_the_plan_and_its_margin(seq, chunk, peak_gib):
    """Out of sample: the 64K unchunked peak is 3.1 GiB above the plan's total and still within its margin."""
    plan = per_gpu(Workload("w", SMOL, seq, 1, SMOL.params(), 1.0, checkpointing=True, loss_chunk_tokens=chunk), 1)
    assert (plan.bound - plan.optimizer) / GIB >= peak_gib  # those runs took no optimizer step: no Adam moments


def test_every_switch_prints_its_share_of_the_margin():
    w = Workload("w", KNOWN["meta-llama/Llama-3.1-8B-Instruct"], 262144, 1, 8_030_261_248, 1.0, zero=3,
                 sequence_parallel=64, ring=64, checkpointing=True, loss_chunk_tokens=8192, tiled_mlp=8,
                 activation_offload=True)
    lines = render([w], 80)
    [head] = [x for x in lines if x.startswith("  margin: +")]
    m = margin_of(per_gpu(w, 64))
    assert f"at most {(per_gpu(w, 64).total + m.total) / GIB:,.1f} GiB per GPU" in head
    shares = [x.strip() for x in lines if x.startswith("    ")]
    for switch in ("activation checkpointing on: +0.0 GiB", "loss in chunks of 8,192: +0.0 GiB", "tiled MLP in 8 tiles: +",
                   "activation offload: +", "sequence parallel (ring 64): +", "ZeRO-3: +"):
        assert any(x.startswith(switch) for x in shares), (switch, shares)
    assert all("not measured on a GPU yet" in x for x in shares if x.startswith(("tiled", "activation offload", "ZeRO")))


def test_fitting_counts_the_margin():
    """A workload whose parts fit in 90% of a GPU but whose parts and margin do not is not said to fit there."""
    from ctxbench.trainers.memory_plan import HEADROOM, smallest_cluster

    w = RECORDED[0][0]
    plan = per_gpu(w, 1)
    gpu = (plan.total + (plan.bound - plan.total) / 2) / HEADROOM  # room for the parts, not for the margin
    assert smallest_cluster(w, gpu) is None
    assert smallest_cluster(w, plan.bound / HEADROOM).gpus == 1


def test_the_longest_length_is_the_last_that_fits():
    from dataclasses import replace

    from ctxbench.trainers.memory_plan import HEADROOM, longest_seq_len

    w = replace(RECORDED[0][0], loss_chunk_tokens=8192)
    gpu = 80 * GIB
    longest = longest_seq_len(w, 1, gpu)
    assert longest % 1024 == 0 and longest > 65536
    assert per_gpu(replace(w, seq_len=longest), 1).bound <= HEADROOM * gpu
    assert per_gpu(replace(w, seq_len=longest + 1024), 1).bound > HEADROOM * gpu
    assert longest_seq_len(replace(w, sequence_parallel=8, ring=8, zero=3), 8, gpu) > 4 * longest  # a ring of 8
    assert longest_seq_len(w, 1, 0.5 * GIB) == 0  # not even 1K tokens
