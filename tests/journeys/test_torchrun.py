"""Journey: a user outgrows one process and types the torchrun line of issue 27 on a CPU machine.

Before: two independent replicas (6,144 tokens), every loss line twice, both ranks writing one checkpoint directory.
Now: one model over 2 ranks (gloo), each line and the checkpoint written once, 12,288 tokens, one summary printed.
The cheaper default-tier check of the same behaviour is tests/trainers/test_ddp.py (3 steps on a smaller packing).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

REPRO = "torchrun --nproc_per_node 2 -m ctxbench.harness.cli train cpt --config configs/trainers/cpt-tiny.yaml --max-steps 6"


def typed(cwd: Path, command: str) -> subprocess.CompletedProcess:
    """A command line as the user types it; torchrun is the one installed beside this Python."""
    argv = shlex.split(command)
    argv[0] = str(Path(sys.executable).parent / argv[0])
    env = {**os.environ, "COLUMNS": "120"}
    env.pop("PYTEST_CURRENT_TEST", None)
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_the_issue_repro_trains_one_model_over_two_ranks(user):
    done = typed(user.cwd, REPRO)
    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in done.stdout.splitlines() if line.startswith("trained ")]
    assert len(said) == 1 and said[0].startswith("trained 6 steps, 12,288 tokens"), done.stdout
    assert done.stdout.count("checkpoint: ") == 1
    assert "parallel_mode != ParallelMode.DISTRIBUTED" not in done.stderr

    [run_dir] = list((user.cwd / "runs").iterdir())
    rows = [json.loads(line) for line in (run_dir / "losses.jsonl").read_text().splitlines()]
    assert max(Counter((r["split"], r["step"]) for r in rows).values()) == 1  # each line once
    assert [r["tokens"] for r in rows if r["split"] == "train"] == [2048 * k for k in range(1, 7)]
    model = run_dir / "model"
    manifest = json.loads((model / "ctxbench_manifest.json").read_text())
    assert manifest["tokens"]["trained"] == 12288 and manifest["steps"] == 6
    assert [p.name for p in model.glob("checkpoint-*")] == ["checkpoint-6"]
    assert json.loads((model / "ctxbench_run.json").read_text())["world_size"] == 2
