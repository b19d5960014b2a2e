"""Acceptance (issue 13 §8), on a CPU: data hqa -> train hqa_sft (2 stages) -> score base and each stage on ruler-quick
without ruler/qa_1 (SQuAD is the training data) -> board build --compare s2:base. Slow: real SmolLM2 generation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TASKS = "ruler/niah*,ruler/vt,ruler/cwe,ruler/fwe,ruler/qa_2"  # ruler-quick minus ruler/qa_1


def cli(args: list[str], cwd: Path, timeout: int = 3600) -> str:
    env = {**os.environ, "CTXBENCH_DATA_DIR": os.environ.get("CTXBENCH_DATA_DIR", str(Path(__file__).resolve().parents[3]
                                                                                         / "shared" / "data"))}
    res = subprocess.run([sys.executable, "-m", "ctxbench.harness.cli", *args], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=timeout)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_tiny_hqa_pipeline_end_to_end(tmp_path, repo_root, data_dir):
    (tmp_path / "configs").symlink_to(repo_root / "configs")  # the shipped configs, with relative out_dirs under tmp
    cli(["data", "hqa", "--config", "configs/data/hqa-tiny.yaml"], tmp_path)
    data = json.loads((tmp_path / "hqa-data" / "tiny" / "manifest.json").read_text())
    assert data["samples"] == 2 and data["counts"]["tokens"]["answer"] > 0
    out = cli(["train", "hqa_sft", "--config", "configs/trainers/hqa-sft-tiny.yaml"], tmp_path)
    ckpts = [line.split(": ", 1)[1] for line in out.splitlines() if "checkpoint" in line and ": " in line]
    s1, s2 = (tmp_path / ckpts[0]).resolve(), (tmp_path / ckpts[-1]).resolve()  # printed relative to the cwd
    m2 = json.loads((s2 / "ctxbench_manifest.json").read_text())
    assert (tmp_path / m2["base_model"]).resolve() == s1 and m2["answer_tokens"]["trained"] > 0
    for model, label in (("smollm2-135m", "base"), (str(s1), "s1"), (str(s2), "s2")):
        cli(["score", "--model", model, "--label", label, "--suite", "ruler-quick", "--tasks", TASKS, "--dtype", "float32",
             "--threads", "1", "--store", "scores"], tmp_path)
    cli(["board", "build", "--store", "scores", "--compare", "s2:base", "--compare", "s1:base", "--out", "board"], tmp_path)
    board = json.loads((tmp_path / "board" / "results.json").read_text())
    assert {m["model"] for m in board["models"]} >= {"base", "s1", "s2"}
    comps = {(c["model_a"], c["model_b"]) for c in board["comparisons"]}
    assert ("s2", "base") in comps and ("s1", "base") in comps
    md = (tmp_path / "board" / "leaderboard.md").read_text().replace("\\_", "_")  # markdown escapes underscores
    assert "## Training" in md  # answer-token counts and generator drop rates beside the scores (§8)
    s2_row = next(line for line in md.splitlines() if line.startswith("| s2 | hqa_sft |"))
    summary = m2["data_summary"]
    assert f"{summary['answer_tokens']:,}" in s2_row
    assert f"{summary['requested'] - summary['kept']} of {summary['requested']} QAs" in s2_row
    assert "significant" in md  # the comparison says whether Δ is significant
    s2_vs_base = next(c for c in board["comparisons"] if (c["model_a"], c["model_b"]) == ("s2", "base"))
    assert s2_vs_base["ci95"] is not None or "no interval" in s2_vs_base["ci_note"]  # Δ with its 95% CI, or why not
