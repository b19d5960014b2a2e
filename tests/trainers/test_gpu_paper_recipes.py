"""benchmarks/gpu_paper_recipes.py on a CPU (--tiny): each paper recipe runs through its real trainer on synthesized
data, writes the JSON the coordinator reads from the GPU run (losses, tokens/s, peak against the plan), and a loss
that does not fall fails the script with exit 1."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_paper_recipes.py"


def script():
    spec = importlib.util.spec_from_file_location("gpu_paper_recipes", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def run(tmp_path: Path, monkeypatch, recipes: str) -> tuple[int, dict]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CTXBENCH_GPU_TOKENIZER", raising=False)
    code = script().main(["--tiny", "--steps", "3", "--recipes", recipes, "--out", str(tmp_path / "out.json")])
    return code, json.loads((tmp_path / "out.json").read_text())


def test_hqa_recipe_runs_its_trainer_and_reports_what_the_gpu_run_reports(tmp_path, monkeypatch):
    code, out = run(tmp_path, monkeypatch, "hqa")
    assert code == 0 and out["failures"] == []
    [row] = out["recipes"]
    assert row["recipe"].startswith("hqa-sft-llama3.1-8b-1m") and row["steps"] == 3 and len(row["losses"]) == 3
    assert row["loss_last"] < row["loss_first"] and row["tokens"] == 3 * row["seq_len"]
    assert row["tokens_per_s_per_gpu"] > 0 and row["plan_gib"]["total"] > 0 and row["peak_allocated_gib"] is None  # CPU


def test_a_loss_that_does_not_fall_fails_the_script(tmp_path, monkeypatch):
    mod = script()
    assert mod.failure({"recipe": "r", "loss_first": 2.0, "loss_last": 2.5}) == "r: loss did not fall (2.0000 -> 2.5000)"
    assert "not finite" in mod.failure({"recipe": "r", "loss_first": 2.0, "loss_last": float("nan")})
    assert mod.failure({"recipe": "r", "loss_first": 2.0, "loss_last": 1.5}) is None


@pytest.mark.slow
def test_every_recipe_on_a_cpu(tmp_path, monkeypatch):
    code, out = run(tmp_path, monkeypatch, "")
    assert code == 0, out["failures"]
    assert [r["trainer"] for r in out["recipes"]] == ["cpt", "cpt", "hqa_sft", "logo"]
