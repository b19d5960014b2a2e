"""Continued pretraining of a tiny model on really packed data: loss falls, the checkpoint scores, resume works."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ctxbench.trainers.base import MANIFEST_NAME, TrainRun
from ctxbench.trainers.cpt import CPTConfig, CPTTrainer

REPO = Path(__file__).resolve().parents[2]
SEQ = 128


@pytest.fixture(scope="module")
def packed(tmp_path_factory) -> Path:
    """Standard packing of a small real corpus (the stdlib json package) through the data pipeline."""
    from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize
    from ctxbench.trainers.data.stdlib_corpus import resolve_corpus

    root = tmp_path_factory.mktemp("packed")
    corpus = resolve_corpus({"path": "stdlib:json"}, root)
    m = synthesize(SynthesisConfig(corpus=corpus, method="standard", seq_len=SEQ, budget_tokens=SEQ * 40,
                                   tokenizer="smollm2-135m", seed=0, out_dir=str(root / "standard")))
    assert m.complete and m.num_sequences == 40
    return root / "standard"


def tiny(tmp_path: Path, packed: Path, **kw) -> dict:
    return {"base_model": {"config": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                                      "num_attention_heads": 4, "num_key_value_heads": 2, "tie_word_embeddings": True}},
            "store": str(tmp_path / "runs"), "max_steps": 8, "per_device_batch_size": 4, "learning_rate": 5e-3,
            "warmup_steps": 1, "save_steps": 3, "eval_steps": 4, "threads": 1, "seed": 0, "rope": {"theta": 50000.0},
            "data": {"path": str(packed), "eval_sequences": 8}, **kw}


def test_loss_falls_and_the_checkpoint_loads_and_scores(tmp_path, packed, data_dir):
    cfg = CPTConfig(**tiny(tmp_path, packed, delete_checkpoints=True))
    result = CPTTrainer(cfg).train()
    assert not list(result.checkpoint.glob("checkpoint-*"))  # resume points go once the final model is saved
    losses = TrainRun(tmp_path / "runs", result.run_id).losses()
    train = [r["loss"] for r in losses if r["split"] == "train"]
    evals = [r for r in losses if r["split"] == "eval"]
    assert len(train) == 8 and train[-1] < train[0] - 1.0
    assert [r["step"] for r in evals] == [4, 8] and evals[-1]["loss"] < evals[0]["loss"]
    assert [r["tokens"] for r in losses if r["split"] == "train"][-1] == 8 * 4 * SEQ

    ckpt = result.checkpoint
    manifest = json.loads((ckpt / MANIFEST_NAME).read_text())
    assert manifest["trainer"] == "cpt" and manifest["base_model"] == "scratch-llama"
    assert manifest["config_hash"] == cfg.config_hash() and manifest["data_hash"] and manifest["tokens"]["trained"] == 4096
    assert manifest["tokens"]["data"] == 32 * SEQ and manifest["tokens"]["eval"] == 8 * SEQ
    assert json.loads((ckpt / "config.json").read_text())["rope_parameters"]["rope_theta"] == 50000.0
    record = json.loads((result.run_dir / "record.json").read_text())
    assert record["kind"] == "train" and record["status"] == "complete" and record["model"] == str(ckpt.resolve())

    from ctxbench.harness.core.config import Suite
    from ctxbench.harness.run.runner import RunPlan, run

    suite = Suite(name="tiny", lengths=[256], samples=1, tasks=[{"task": "niah/single", "args": {"depths": [50],
                                                                                             "tokens_to_generate": 8}}])
    outcome = run(RunPlan(suite, str(ckpt), "hf", {"dtype": "float32", "threads": 1}, tmp_path / "scores", data_dir))
    rows = list(outcome.store.latest().values())
    assert (outcome.planned, outcome.done, outcome.failed) == (1, 1, 0)
    assert len(rows) == 1 and rows[0]["score"] is not None and rows[0]["error"] is None

    again = CPTTrainer(cfg).train()  # same config and data: nothing is retrained
    assert again.skipped and again.steps == 8


@pytest.mark.slow  # ~12 s; resume after interruption stays in the default tier: test_logo_trainer, journeys/test_signals (training)
def test_interrupted_run_resumes_from_its_last_checkpoint(tmp_path, packed, repo_root):
    from transformers import TrainerCallback

    class Interrupt(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 5:
                raise RuntimeError("simulated crash")

    raw = tiny(tmp_path, packed, max_steps=7)
    with pytest.raises(RuntimeError, match="simulated crash"):
        CPTTrainer(CPTConfig(**raw)).train(callbacks=[Interrupt()])
    trainer = CPTTrainer(CPTConfig(**raw))
    assert (trainer.output_dir / "checkpoint-3").is_dir() and not (trainer.output_dir / MANIFEST_NAME).exists()

    cfg_file = tmp_path / "cpt.yaml"
    cfg_file.write_text(yaml.safe_dump(raw))
    res = subprocess.run([sys.executable, "-m", "ctxbench.harness.cli", "train", "cpt", "--config", str(cfg_file)], cwd=repo_root,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "resumed from step 3" in res.stdout
    manifest = json.loads((trainer.output_dir / MANIFEST_NAME).read_text())
    assert manifest["resumed_from_step"] == 3 and manifest["steps"] == 7
    steps = [r["step"] for r in TrainRun(tmp_path / "runs", trainer.run_id).losses() if r["split"] == "train"]
    assert steps == list(range(1, 8))  # steps 4-5 were logged twice; the rerun's rows win


def test_bad_trainer_config_on_the_command_line(tmp_path, repo_root, ctxbench, monkeypatch):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("base_model: smollm2-135m\ndata: {path: x}\nlearnig_rate: 0.1\n")
    monkeypatch.chdir(repo_root)  # the CLI in process: a refusal needs no process of its own
    code, _, err = ctxbench("train", "cpt", "--config", str(cfg))
    assert code == 2 and "learnig_rate" in err and "Traceback" not in err
    code, _, err = ctxbench("train", "cpx", "--config", str(cfg))
    assert code == 2 and "did you mean 'cpt'" in err
