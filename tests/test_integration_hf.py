"""The real embedded model (SmolLM2-135M-Instruct) end to end, at short lengths."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

SUITE = """name: integ
lengths: [1024]
samples: 2
tasks: [ruler/niah_single_1, ruler/niah_single_2]
"""


def _score(tmp_path, repo_root, data_dir, *extra):
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    cmd = [sys.executable, "-m", "ctxbench.harness.cli", "score", "--model", "smollm2-135m", "--suite", str(suite),
           "--store", str(tmp_path / "runs"), "--data-dir", str(data_dir), *extra]
    return subprocess.run(cmd, cwd=repo_root, capture_output=True, text=True, timeout=600)


def test_scores_real_model_and_prints_table(tmp_path, repo_root, data_dir):
    r = _score(tmp_path, repo_root, data_dir)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ruler/niah_single_1" in r.stdout and "average" in r.stdout
    (samples,) = (tmp_path / "runs").glob("*/samples.jsonl")
    rows = [json.loads(x) for x in samples.read_text().splitlines()]
    assert len(rows) == 4
    for row in rows:
        assert row["prompt_tokens"] + row["max_new_tokens"] <= 1024
        assert row["generated_tokens"] > 0 and row["seconds"] > 0
    # The passkey task is easy at 1K for this model; if the prompt, chat template or answer prefix
    # were wrong it would fail to retrieve.
    passkey = [r for r in rows if r["task"] == "ruler/niah_single_1"]
    assert sum(r["score"] for r in passkey) >= 1.0, [r["prediction"] for r in passkey]


def test_over_long_prompt_is_refused_before_any_work(tmp_path, repo_root, data_dir):
    r = _score(tmp_path, repo_root, data_dir, "--backend-arg", "max_context=700")
    assert r.returncode == 2
    assert "context of 700 tokens" in r.stderr and "--truncation middle" in r.stderr and "Traceback" not in r.stderr
    assert not list((tmp_path / "runs").glob("*/samples.jsonl"))


@pytest.mark.slow  # > 25 s; the default tier keeps a faster test of the same behaviour
def test_middle_truncation_is_recorded(tmp_path, repo_root, data_dir):
    r = _score(tmp_path, repo_root, data_dir, "--backend-arg", "max_context=900", "--truncation", "middle", "--tasks", "ruler/niah_single_1")
    assert r.returncode == 0, r.stderr[-2000:]
    (samples,) = (tmp_path / "runs").glob("*/samples.jsonl")
    rows = [json.loads(x) for x in samples.read_text().splitlines()]
    assert rows and all(r["truncated_tokens"] > 0 for r in rows)
    assert all(r["prompt_tokens"] + r["max_new_tokens"] <= 900 for r in rows)
    (record,) = (tmp_path / "runs").glob("*/record.json")
    assert json.loads(record.read_text())["truncation"] == "middle"
