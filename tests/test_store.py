"""The append-only store: a run killed with SIGKILL completes on rerun, with no duplicates and no torn line."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ctxbench.harness.core.store import RunStore

SUITE = """name: resume
lengths: [512, 1024]
samples: 4
tasks: [ruler/niah_single_1, ruler/niah_multikey_2]
"""
TOTAL = 2 * 2 * 4
ENV = {**os.environ, "COLUMNS": "120"}  # the table's width, whatever the shell that runs the tests says


def _cmd(suite, out, *extra):
    return [sys.executable, "-m", "ctxbench.harness.cli", "score", "--suite", str(suite), "--store", str(out), "--backend", "echo",
            "--backend-arg", "delay=0.3", *extra]


def _lines(out):
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return (run / "samples.jsonl").read_bytes().splitlines(keepends=True), run


@pytest.mark.slow  # > 25 s; the default tier keeps a faster test of the same behaviour
def test_sigkill_midway_then_resume(tmp_path, repo_root, data_dir):
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    out = tmp_path / "runs"
    proc = subprocess.Popen(_cmd(suite, out, "--data-dir", str(data_dir)), cwd=repo_root, env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        runs = list(out.glob("*/samples.jsonl")) if out.exists() else []
        if runs and len(runs[0].read_bytes().splitlines()) >= 3:
            break
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    lines, run = _lines(out)
    assert 3 <= len(lines) < TOTAL, "the kill should land mid-run"
    with open(run / "samples.jsonl", "ab") as f:  # simulate a write torn by the kill
        f.write(b'{"id": "ruler/niah_single_1@512#9", "predic')

    r = subprocess.run(_cmd(suite, out, "--data-dir", str(data_dir)), cwd=repo_root, env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines, _ = _lines(out)
    rows = [json.loads(x) for x in lines]  # every line parses
    ids = [x["id"] for x in rows]
    assert len(ids) == len(set(ids)) == TOTAL
    assert all(x["score"] is not None for x in rows)

    r = subprocess.run(_cmd(suite, out, "--data-dir", str(data_dir)), cwd=repo_root, env=ENV, capture_output=True, text=True, timeout=300)
    assert len(_lines(out)[0]) == TOTAL  # a finished run recomputes nothing
    with open(run / "samples.jsonl", "ab") as f:
        f.write(b'{"id": "marker", "score": 1.0}\n')
    r = subprocess.run(_cmd(suite, out, "--data-dir", str(data_dir), "--fresh"), cwd=repo_root, env=ENV,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines, _ = _lines(out)
    assert len(lines) == TOTAL and b"marker" not in b"".join(lines)  # --fresh started over


def _in_process(suite, out, data_dir, *extra) -> list[str]:
    """The same command line for the `ctxbench` fixture (main() in this process: the record and the shards are not
    about processes, so no Python start-up each)."""
    return ["score", "--suite", str(suite), "--store", str(out), "--backend", "echo", "--data-dir", str(data_dir), *extra]


def test_record_has_what_reproduces_the_run(tmp_path, data_dir, ctxbench, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")  # the table's width, whatever the shell that runs the tests says
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE.replace("samples: 4", "samples: 1"))
    out = tmp_path / "runs"
    code, stdout, stderr = ctxbench(*_in_process(suite, out, data_dir))
    assert code == 0, stderr
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    rec = RunStore(out, run.name).read_record()
    for key in ("suite_config", "model", "backend", "tokenizer", "tokenizer_fingerprint", "template", "seed", "versions", "truncation"):
        assert rec[key] not in (None, "", {}), key
    assert rec["suite_config"]["tasks"][0]["task"] == "ruler/niah_single_1"
    assert "transformers" in rec["versions"]
    assert "average" in stdout and "niah_single_1" in stdout


def test_torn_line_is_repaired(tmp_path):
    store = RunStore(tmp_path, "r")
    store.append([{"id": "a", "score": 1.0}])
    with open(store.samples_path, "ab") as f:
        f.write(b'{"id": "b", "sco')
    store.open_for_append()
    store.append([{"id": "b", "score": 0.0}])
    assert [r["id"] for r in store.rows()] == ["a", "b"]


def test_shards_split_the_suite_and_merge(tmp_path, data_dir, ctxbench):
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    out = tmp_path / "runs"
    for part in ("0/2", "1/2"):
        code, _, stderr = ctxbench(*_in_process(suite, out, data_dir, "--shard", part))
        assert code == 0, stderr
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    parts = sorted(run.glob("samples.shard-*.jsonl"))
    assert len(parts) == 2
    ids = [[json.loads(x)["id"] for x in p.read_text().splitlines()] for p in parts]
    assert ids[0] and ids[1] and not set(ids[0]) & set(ids[1])
    assert len(RunStore(out, run.name).latest()) == TOTAL
    code, _, stderr = ctxbench(*_in_process(suite, out, data_dir, "--shard", "2/2"))
    assert code == 2 and "--shard" in stderr
