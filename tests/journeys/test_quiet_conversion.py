"""Journey (issue 32, "Quiet, early refusals"): converting the GGUF alias into an empty cache prints nothing of the
libraries underneath (transformers' dtype notice, DeepSpeed's accelerator line, tqdm bars); they are in the run's
log, which the record names."""

from __future__ import annotations

import json

import pytest


@pytest.mark.slow  # ~1.5 min on a loaded 2-core machine: a fresh GGUF conversion; tests/test_run_log.py covers it in process
def test_a_fresh_conversion_is_quiet_and_logged(user, tmp_path):
    r = user.run("ctxbench score --backend echo --model smollm2-135m --tasks ruler/niah_single_1 --lengths 512 --samples 1",
                 env={"CTXBENCH_CACHE": str(tmp_path / "cache")})
    assert r.code == 0, r.err[-2000:]
    for noise in ("[transformers]", "GGUF", "DeepSpeed", "it/s]"):
        assert noise not in r.err and noise not in r.out, noise
    (record,) = (user.cwd / "runs").glob("*/record.json")
    log = record.parent / json.loads(record.read_text())["sessions"][-1]["execution"]["log"]
    assert "GGUF" in log.read_text()  # transformers' notice, kept for whoever wants it
