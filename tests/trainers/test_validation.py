"""Validation in one process for every trainer: hqa_sft's answer-only loss, CPT's and LOGO's own losses. Each writes
an eval loss line at the validation steps and the record's eval_loss (transformers 5 slices what compute_loss returns
with its outputs during evaluation: a trainer that returned None there failed at the first validation)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

from ctxbench.trainers.base import TrainRun

TESTS = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ddp = _load("ddp_tests_validation", TESTS / "trainers" / "test_ddp.py")
packed, hqa_stage_data = ddp.packed, ddp.hqa_stage_data
TINY = ddp.TINY


def eval_losses(store: Path, run_id: str) -> list[float]:
    rows = TrainRun(store, run_id).losses()
    out = [r["loss"] for r in rows if r["split"] == "eval"]
    assert out and all(math.isfinite(x) for x in out), rows
    return out


def test_hqa_sft_validates_in_one_process(tmp_path, hqa_stage_data):
    from ctxbench.trainers.hqa.trainer import HQASFTConfig, HQASFTTrainer

    raw = {"base_model": {"config": {**TINY, "max_position_embeddings": 1024}}, "store": str(tmp_path),
           "per_device_batch_size": 1, "learning_rate": 5e-3, "lr_scheduler": "constant", "save_steps": 2,
           "threads": 1, "seed": 0, "eval_samples": 2,
           "stages": [{"name": "s1", "data": str(hqa_stage_data), "seq_len": 1024, "max_steps": 2}]}
    result = HQASFTTrainer(HQASFTConfig(**raw)).train()
    assert len(eval_losses(tmp_path, result.run_id)) >= 1


def test_cpt_validates_in_one_process(tmp_path, packed):
    from ctxbench.trainers.cpt import CPTConfig, CPTTrainer

    raw = {"base_model": {"config": TINY}, "store": str(tmp_path), "precision": "fp32", "max_steps": 2,
           "per_device_batch_size": 1, "learning_rate": 5e-3, "lr_scheduler": "constant", "save_steps": 2,
           "eval_steps": 1, "threads": 1, "seed": 0, "data": {"path": str(packed), "eval_sequences": 2}}
    result = CPTTrainer(CPTConfig(**raw)).train()
    assert len(eval_losses(tmp_path, result.run_id)) == 2


def test_logo_validates_in_one_process(tmp_path, logo_data):
    from ctxbench.trainers.logo.trainer import LogoConfig, LogoTrainer

    raw = {"base_model": {"config": {**TINY, "max_position_embeddings": 4096}}, "store": str(tmp_path),
           "precision": "fp32", "max_steps": 1, "per_device_batch_size": 2, "learning_rate": 2e-3,
           "warmup_steps": 0, "save_steps": 1, "threads": 1, "seed": 0, "lora": {"r": 4, "alpha": 8},
           "eval_steps": 1, "data": {"path": str(logo_data), "eval_samples": 2, "max_samples": 6}}
    result = LogoTrainer(LogoConfig(**raw)).train()
    assert len(eval_losses(tmp_path, result.run_id)) >= 1
