"""The ProLong-style presets (configs/trainers/prolong-*.yaml): two stages (64K then 512K) for a small model on one
GPU and for Llama-3-8B on many, each with the long/short 60:40 mix, document masking where it runs, the loss in
chunks, and a memory plan that fits where the header says. The CPU-scale one runs end to end in
tests/journeys/test_prolong_journey.py."""

from __future__ import annotations

import pytest

from ctxbench.harness.core.config import resolve_config
from ctxbench.trainers.base import load_config
from ctxbench.trainers.context_parallel import check_per_document
from ctxbench.trainers.cpt import CPTConfig, CPTTrainer
from ctxbench.trainers.memory_plan import GIB, smallest_cluster

STAGES = {"prolong-smollm2-135m": "smollm2-135m", "prolong-llama3-8b": "meta-llama/Meta-Llama-3-8B-Instruct"}


def preset(name: str) -> CPTConfig:
    return load_config(CPTConfig, resolve_config(f"{name}.yaml", kind="trainers", field="--config"))


@pytest.mark.parametrize("name", ["prolong-tiny", *(f"{s}-{k}" for s in STAGES for k in ("64k", "512k"))])
def test_every_preset_mixes_long_and_short_60_40_with_the_loss_in_chunks(name):
    synthesis = preset(name).data.synthesis
    assert synthesis["mix_ratio"] == 0.4 and synthesis["mix_corpus"] and synthesis["method"] == "within_domain"
    assert preset(name).loss_chunk_tokens > 0 and preset(name).gradient_checkpointing


@pytest.mark.parametrize("stem", STAGES)
def test_stage_two_starts_from_stage_one_at_eight_times_the_length(stem):
    one, two = preset(f"{stem}-64k"), preset(f"{stem}-512k")
    assert two.base_model == one.output_dir
    assert (one.data.synthesis["seq_len"], two.data.synthesis["seq_len"]) == (65536, 524288)
    assert (one.rope.theta, two.rope.theta) == (8e6, 1.28e8)
    assert one.data.synthesis["attention"] == "per_document"


@pytest.mark.parametrize(("name", "gpus", "per_document"), [
    ("prolong-smollm2-135m-64k", 1, True), ("prolong-smollm2-135m-512k", 1, True),
    ("prolong-llama3-8b-64k", 8, True),
    ("prolong-llama3-8b-512k", 8, True),  # 512K of an 8B model: Ulysses 8 with flash attention, per_document
])
def test_each_stage_fits_where_its_header_says(name, gpus, per_document):
    cfg = preset(name)
    if name.endswith("512k"):  # stage 2's base is stage 1's checkpoint: plan it on the architecture it has
        cfg = cfg.model_copy(update={"base_model": STAGES[name.rsplit("-", 1)[0]]})
    [w] = CPTTrainer(cfg).plan_workloads()
    plan = smallest_cluster(w, 80 * GIB)
    assert plan is not None and plan.gpus == gpus
    assert (cfg.data.synthesis["attention"] == "per_document") == per_document
    assert (cfg.sequence_layout.degree > 1) == name.endswith("8b-512k")
    check_per_document(cfg.sequence_layout, cfg.attn_implementation)  # the layout masks per document (else refused)
