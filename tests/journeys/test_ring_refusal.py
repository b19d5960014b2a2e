"""Journey (issue 37): a user asks for ring attention (`sequence_parallel: {ring: 2}`) on a machine without CUDA,
under torchrun, as typed: the data is packed and one run trains over 2 CPU processes (gloo) sharing each sequence,
with torch's ring and its CPU kernel (trainers/ring_cpu.py; until then this was refused in one line). That the
training equals one process is tests/trainers/test_ring_cpu.py; the refusals that remain, test_ring_attention.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import User


@pytest.mark.slow  # torchrun starts 2 interpreters that import transformers: ~18 s on two shared cores
def test_a_ring_on_a_cpu_trains_as_typed(user: User):
    cfg = {"base_model": {"config": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                                     "num_attention_heads": 4, "num_key_value_heads": 2}, "tokenizer": "smollm2-135m"},
           "max_steps": 2, "sequence_parallel": {"ring": 2}, "store": "runs",
           "data": {"synthesis": {"corpus": {"path": "stdlib:json", "format": "repo"}, "method": "standard",
                                  "seq_len": 256, "budget_tokens": 5000, "tokenizer": "smollm2-135m",
                                  "out_dir": "packed/ring"}}}
    (user.cwd / "ring.yaml").write_text(yaml.safe_dump(cfg))
    torchrun = str(Path(sys.executable).parent / "torchrun")  # as typed: torchrun --nproc_per_node 2 -m ctxbench...
    env = {**os.environ, "COLUMNS": "120", "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    env.pop("PYTEST_CURRENT_TEST", None)
    r = subprocess.run([torchrun, "--standalone", "--nproc_per_node", "2", "-m", "ctxbench.harness.cli", "train", "cpt",
                        "--config", "ring.yaml"], cwd=user.cwd, env=env, capture_output=True, text=True, timeout=600,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-3000:]
    said = [x for x in r.stdout.splitlines() if x.startswith("trained ")]
    assert len(said) == 1 and said[0].startswith("trained 2 steps, 512 tokens"), r.stdout[-2000:]  # once, rank 0
    assert len([p for p in (user.cwd / "runs").iterdir() if p.is_dir()]) == 1
    assert (user.cwd / "packed" / "ring").is_dir()
