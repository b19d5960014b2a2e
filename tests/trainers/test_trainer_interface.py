"""The trainer interface without training: configs, RoPE, DeepSpeed arguments, the loss log, cheap imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbench.harness.core.errors import ConfigError
from ctxbench.trainers.base import TrainRun, apply_rope, load_config
from ctxbench.trainers.cpt import CPTConfig, CPTTrainer

REPO = Path(__file__).resolve().parents[2]
TINY = {"base_model": {"config": {"hidden_size": 64, "num_hidden_layers": 2}}, "data": {"path": "packed"}}


def test_registry_lists_cpt_and_trainer_modules_import_no_torch():
    code = ("import sys; from ctxbench.harness.core import registry; assert 'cpt' in registry.names('trainer'); "
            "import ctxbench.trainers.cpt, ctxbench.trainers.loop; bad = [m for m in ('torch', 'transformers') if m in sys.modules]; "
            "assert not bad, bad")
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("path", sorted((REPO / "configs" / "trainers").glob("cpt-*.yaml")), ids=lambda p: p.name)
def test_shipped_trainer_configs_validate(path):
    cfg = load_config(CPTConfig, path)
    assert cfg.max_steps and cfg.data.synthesis


@pytest.mark.parametrize("raw, where, hint", [
    ({**TINY, "learning_rat": 1e-4}, "learning_rat", "unknown key"),
    ({**TINY, "rope": {"type": "yarn"}}, "rope", "rope.factor is required"),
    ({**TINY, "data": {"path": "a", "synthesis": {}}}, "data", "exactly one of"),
    ({**TINY, "precision": "int4"}, "precision", "'auto', 'fp32', 'bf16' or 'fp16'"),
])
def test_bad_config_is_one_line(tmp_path, raw, where, hint):
    import yaml

    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as e:
        load_config(CPTConfig, f)
    msg = str(e.value)
    assert "\n" not in msg and where in msg and hint in msg


def test_every_config_field_has_help():
    from ctxbench.harness.study import EvalSpec, MethodSpec, StudyConfig
    from ctxbench.trainers.base import RopeSpec, ScratchModel
    from ctxbench.trainers.cpt import CPTData

    for cls in (CPTConfig, CPTData, RopeSpec, ScratchModel, StudyConfig, MethodSpec, EvalSpec):
        missing = [name for name, f in cls.model_fields.items() if not f.description]
        assert not missing, f"{cls.__name__}: {missing}"


def test_rope_theta_and_scaling_go_into_rope_parameters():
    from transformers import LlamaConfig

    from ctxbench.trainers.base import RopeSpec

    mc = LlamaConfig(hidden_size=64, num_hidden_layers=2, max_position_embeddings=2048)
    apply_rope(mc, RopeSpec(theta=1e6, type="yarn", factor=4.0), seq_len=8192)
    assert mc.rope_parameters["rope_theta"] == 1e6 and mc.rope_parameters["rope_type"] == "yarn"
    assert mc.rope_parameters["factor"] == 4.0 and mc.rope_parameters["original_max_position_embeddings"] == 2048
    assert mc.max_position_embeddings == 8192
    mc = LlamaConfig(hidden_size=64, num_hidden_layers=2, max_position_embeddings=2048)
    apply_rope(mc, None, seq_len=512)  # no extension: the window is kept
    assert mc.rope_parameters["rope_theta"] == 10000.0 and mc.max_position_embeddings == 2048


def test_deepspeed_presets_reach_training_arguments():
    from ctxbench.trainers.base import DataBundle

    for preset in ("zero3", "zero3_offload"):
        cfg = CPTConfig(**{**TINY, "deepspeed": preset, "gradient_checkpointing": True, "max_steps": 10})
        kw = CPTTrainer(cfg).training_arguments(DataBundle(list(range(8)), None, "h", 128, 128))
        ds = json.loads(Path(kw["deepspeed"]).read_text())
        assert ds["zero_optimization"]["stage"] == 3 and kw["activation_checkpointing"] is True
        assert ds["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] is True
    assert "offload_optimizer" in ds["zero_optimization"]
    with pytest.raises(ConfigError, match="deepspeed"):
        CPTTrainer(CPTConfig(**{**TINY, "deepspeed": "zero9"})).training_arguments(DataBundle([1], None, "h", 8, 8))


def test_loss_log_repairs_torn_lines_and_last_write_wins(tmp_path):
    run = TrainRun(tmp_path, "train-x")
    run.append([{"step": 1, "tokens": 10, "split": "train", "loss": 3.0}, {"step": 2, "tokens": 20, "split": "train", "loss": 2.5}])
    with open(run.losses_path, "a") as f:
        f.write('{"step": 3, "tok')  # a writer killed mid-line
    run.repair()
    run.append([{"step": 2, "tokens": 20, "split": "train", "loss": 2.4}, {"step": 2, "tokens": 20, "split": "eval", "loss": 2.6}])
    rows = run.losses()
    assert [(r["split"], r["step"], r["loss"]) for r in rows] == [("eval", 2, 2.6), ("train", 1, 3.0), ("train", 2, 2.4)]


def test_config_hash_ignores_where_things_go():
    a = CPTConfig(**TINY)
    assert a.config_hash() == CPTConfig(**{**TINY, "store": "elsewhere", "output_dir": "o", "label": "x"}).config_hash()
    assert a.config_hash() != CPTConfig(**{**TINY, "learning_rate": 1e-3}).config_hash()
