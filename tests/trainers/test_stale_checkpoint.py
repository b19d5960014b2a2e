"""A training is its config and its data: after a repacking with the same training settings, the old final checkpoint is
never resumed as the 'retrained' model (the bug: steps=3 with max_steps=2, weights byte-identical to the old model)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from ctxbench.harness.core.errors import ConfigError
from ctxbench.trainers.base import MANIFEST_NAME
from ctxbench.trainers.cpt import CPTConfig, CPTTrainer

SEQ = 128


def pack(out: Path, root: Path, sequences: int) -> None:
    from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize
    from ctxbench.trainers.data.stdlib_corpus import resolve_corpus

    shutil.rmtree(out, ignore_errors=True)  # repack in place, as a study whose budget changed used to
    synthesize(SynthesisConfig(corpus=resolve_corpus({"path": "stdlib:json"}, root), method="standard", seq_len=SEQ,
                               budget_tokens=SEQ * sequences, tokenizer="smollm2-135m", seed=0, out_dir=str(out)))


def config(tmp_path: Path, data: Path, **kw) -> CPTConfig:
    return CPTConfig(**{"base_model": {"config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                                                  "num_attention_heads": 2, "num_key_value_heads": 1, "tie_word_embeddings": True}},
                        "store": str(tmp_path / "runs"), "max_steps": 3, "per_device_batch_size": 2, "learning_rate": 1e-3,
                        "save_steps": 3, "threads": 1, "seed": 0, "data": {"path": str(data), "eval_sequences": 2}, **kw})


def weights_hash(checkpoint: Path) -> str:
    return hashlib.sha256((checkpoint / "model.safetensors").read_bytes()).hexdigest()


def test_a_repacked_dataset_never_resumes_the_old_checkpoint(tmp_path):
    data = tmp_path / "packed"
    pack(data, tmp_path, 12)
    explicit = config(tmp_path, data, output_dir=str(tmp_path / "models" / "standard"))
    first = CPTTrainer(explicit).train()
    assert (first.checkpoint / "checkpoint-3").is_dir()  # the final checkpoint stays: what a rerun would resume
    old = weights_hash(first.checkpoint)

    pack(data, tmp_path, 16)  # only the packing budget changes; the training config is the same
    again = CPTTrainer(explicit)
    assert again.config.config_hash() == explicit.config_hash() and again.data.data_hash != first_data_hash(first)
    with pytest.raises(ConfigError, match="trained on other data"):
        again.train()
    assert weights_hash(first.checkpoint) == old  # refused before touching anything

    default = config(tmp_path, data)  # without output_dir: the run id (and so the directory) hashes the data too
    trainer = CPTTrainer(default)
    assert trainer.run_id != first.run_id
    retrained = trainer.train()
    manifest = json.loads((retrained.checkpoint / MANIFEST_NAME).read_text())
    assert manifest["steps"] == 3 and manifest["resumed_from_step"] is None and not retrained.skipped
    assert manifest["data_hash"] == trainer.data.data_hash and weights_hash(retrained.checkpoint) != old
    assert weights_hash(first.checkpoint) == old  # the old model is still there, untouched


def first_data_hash(result) -> str:
    return json.loads((result.checkpoint / MANIFEST_NAME).read_text())["data_hash"]


def test_a_mark_without_a_data_hash_is_not_resumed(tmp_path):
    """Checkpoints written before the mark recorded the data cannot be proven to be this data's."""
    data = tmp_path / "packed"
    pack(data, tmp_path, 12)
    cfg = config(tmp_path, data, output_dir=str(tmp_path / "out"))
    out = Path(cfg.output_dir)
    out.mkdir(parents=True)
    (out / "ctxbench_run.json").write_text(json.dumps({"config_hash": cfg.config_hash(), "run_id": "old"}))
    with pytest.raises(ConfigError, match="data hash unrecorded"):
        CPTTrainer(cfg).train()
    assert CPTTrainer(cfg).train(fresh=True).steps == 3
