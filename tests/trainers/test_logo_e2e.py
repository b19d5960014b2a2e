"""LOGO end to end on the command line with the real SmolLM2-135M: `data logo` -> `train logo` -> `score` (slow tier)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, "-m", "ctxbench.harness.cli", *args], cwd=cwd, capture_output=True, text=True,
                         timeout=3600)
    assert res.returncode == 0, res.stderr[-3000:]
    return res


@pytest.mark.slow
@pytest.mark.timeout(7200)  # 18 generator calls, training and scoring: minutes on a loaded 2-core machine
def test_data_train_score_on_the_command_line(tmp_path, data_dir):
    data = yaml.safe_load((REPO / "configs" / "data" / "logo-tiny.yaml").read_text())
    data.update(max_samples=6, out_dir=str(tmp_path / "data"))
    (tmp_path / "data.yaml").write_text(yaml.safe_dump(data))
    res = cli("data", "logo", "--config", str(tmp_path / "data.yaml"), "--data-dir", str(data_dir), cwd=REPO)
    assert "generator calls" in res.stdout
    manifest = json.loads((tmp_path / "data" / "manifest.json").read_text())
    assert manifest["complete"] and manifest["samples"] >= 3 and manifest["generator"]["model"] == "smollm2-135m"
    again = cli("data", "logo", "--config", str(tmp_path / "data.yaml"), "--data-dir", str(data_dir), cwd=REPO)
    assert "already built with the same inputs" in again.stdout and "Loading weights" not in again.stderr  # no model loaded

    train = yaml.safe_load((REPO / "configs" / "trainers" / "logo-tiny.yaml").read_text())
    train.update(store=str(tmp_path / "runs"), max_steps=2, save_steps=2, eval_steps=2, data={"path": str(tmp_path / "data"),
                                                                                             "eval_samples": 1})
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(train))
    res = cli("train", "logo", "--config", str(tmp_path / "train.yaml"), cwd=REPO)
    ckpt = Path(res.stdout.split("checkpoint: ")[1].split()[0])
    m = json.loads((ckpt / "ctxbench_manifest.json").read_text())
    assert m["steps"] == 2 and m["lora"]["trainable_parameters"] < m["lora"]["all_parameters"] and m["eval_loss"] is not None
    assert not (ckpt / "adapter_config.json").exists()

    res = cli("score", "--model", str(ckpt), "--suite", "ruler-quick", "--tasks", "ruler/niah_single_1", "--lengths", "1024",
              "--samples", "1", "--store", str(tmp_path / "scores"), "--dtype", "float32", "--threads", "1", cwd=REPO)
    assert "results:" in res.stdout
