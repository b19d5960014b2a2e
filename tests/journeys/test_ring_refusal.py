"""Journey (issue 37): a user asks for ring attention (`sequence_parallel: {ring: 2}`) on a machine without CUDA,
under torchrun, and reads one line before anything is made: no packed data, no run directory. torch's ring attention
has no CPU kernel (tests/trainers/test_ring_attention.py probes it); the trainings need two GPUs
(tests/gpu/test_ring_attention_cuda.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import User


@pytest.mark.slow  # torchrun starts 2 interpreters that import transformers: ~18 s on two shared cores
def test_a_ring_on_a_cpu_is_refused_in_one_line_before_the_data_is_packed(user: User):
    cfg = {"base_model": {"config": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                                     "num_attention_heads": 4, "num_key_value_heads": 2}, "tokenizer": "smollm2-135m"},
           "max_steps": 2, "sequence_parallel": {"ring": 2},
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
    assert r.returncode != 0
    said = [x for x in r.stderr.splitlines() if x.startswith("error: ")]
    assert said and set(said) == {"error: sequence_parallel.ring: 2 needs CUDA GPUs: torch's ring attention has no CPU "
                                  "kernel; on a CPU use Ulysses (sequence_parallel: N with deepspeed)"}, r.stderr[-2000:]
    assert user.files() == {"ring.yaml"}
