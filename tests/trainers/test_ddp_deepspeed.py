"""DeepSpeed ZeRO-2 and ZeRO-3 on CPU (gloo) under torchrun: 2 processes with B/2 train what 1 process with B trains
(the same losses and final weights), and the ZeRO-3 checkpoint is gathered into one HF directory that loads.

Skipped where deepspeed does not import (the `train` extra pins it; docs/training-at-scale.md says how it installs).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbench.trainers.base import MANIFEST_NAME

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed")]

REPO = Path(__file__).resolve().parents[2]


def _ddp():
    """The DDP test module's helpers (tests run with --import-mode=importlib: load it by path)."""
    spec = importlib.util.spec_from_file_location("ddp_tests", Path(__file__).with_name("test_ddp.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ddp = _ddp()
packed = ddp.packed  # the module-scoped packed-data fixture


def zero_config(tmp_path: Path, stage: int) -> str:
    cfg = json.loads((REPO / "configs" / "deepspeed" / "zero3.json").read_text())
    if stage == 2:
        cfg["zero_optimization"] = {"stage": 2, "overlap_comm": False, "contiguous_gradients": True,
                                    "reduce_bucket_size": "auto"}
    path = tmp_path / f"zero{stage}.json"
    path.write_text(json.dumps(cfg))
    return str(path)


@pytest.mark.parametrize("stage", [2, 3])
def test_zero_two_ranks_equal_one_process(stage, packed, tmp_path):
    ds = zero_config(tmp_path, stage)
    runs = {}
    for nproc, batch in ((1, 4), (2, 2)):
        store = tmp_path / f"runs{nproc}"
        done = ddp.torchrun(tmp_path, "cpt", ddp.cpt_raw(store, packed, batch, deepspeed=ds), nproc=nproc)
        assert done.returncode == 0, done.stderr[-3000:]
        assert [line for line in done.stdout.splitlines() if line.startswith("trained ")][0].startswith(
            f"trained 3 steps, {3 * 4 * ddp.SEQ:,} tokens")
        [run_dir] = [p for p in store.iterdir() if p.is_dir()]
        ddp.lines_once(run_dir)
        runs[nproc] = (store, run_dir.name)
    ddp.assert_same_training(*runs[1], *runs[2])

    from transformers import AutoModelForCausalLM

    model_dir = runs[2][0] / runs[2][1] / "model"  # ZeRO-3: gathered from the partitions into one HF directory
    assert json.loads((model_dir / MANIFEST_NAME).read_text())["steps"] == 3
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    assert sum(p.numel() for p in model.parameters()) == json.loads((model_dir / MANIFEST_NAME).read_text())["parameters"]
    if stage == 3:  # the gathered directory is a model `ctxbench score` takes as it is
        score = subprocess.run([sys.executable, "-m", "ctxbench.harness.cli", "score", "--model", str(model_dir), "--tasks",
                                "kv/retrieval", "--lengths", "512", "--samples", "1", "--device", "cpu", "--store",
                                str(tmp_path / "scores")], cwd=tmp_path, capture_output=True, text=True, timeout=900)
        assert score.returncode == 0, score.stderr[-3000:]
        assert "kv/retrieval" in score.stdout


def test_logo_zero3_two_ranks_equal_one_process(logo_data, tmp_path):
    ds = zero_config(tmp_path, 3)
    raw = lambda store, batch: {  # noqa: E731
        "base_model": {"config": {**ddp.TINY, "max_position_embeddings": 4096}}, "store": str(store), "max_steps": 2,
        "per_device_batch_size": batch, "learning_rate": 2e-3, "warmup_steps": 0, "save_steps": 2, "eval_steps": 2,
        "threads": 1, "seed": 0, "lora": {"r": 4, "alpha": 8}, "deepspeed": ds,
        "data": {"path": str(logo_data), "eval_samples": 4, "max_samples": 12}}
    runs = {}
    for nproc, batch in ((1, 4), (2, 2)):
        store = tmp_path / f"runs{nproc}"
        done = ddp.torchrun(tmp_path, "logo", raw(store, batch), nproc=nproc)
        assert done.returncode == 0, done.stderr[-3000:]
        [run_dir] = [p for p in store.iterdir() if p.is_dir()]
        ddp.lines_once(run_dir)
        runs[nproc] = (store, run_dir.name)
    ddp.assert_same_training(*runs[1], *runs[2])
