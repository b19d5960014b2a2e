"""CPU settings for local inference, chosen by measurement on the machine at hand rather than assumed.

- dtype: bfloat16 beats float32 only where the CPU multiplies bf16 natively (AVX512-BF16, AMX); elsewhere torch
  converts on the fly and bf16 is several times slower (on this project's 2-core AMD EPYC without AVX512:
  SmolLM2-135M prefill ~5x slower in bf16, see benchmarks/README.md). `cpu_dtype()` times one matmul of the
  model's shapes in both dtypes, interleaved, keeps the faster, and caches the verdict per CPU model, torch
  version, thread count and shape.
- threads: OpenMP threads that outnumber the free cores wait on each other at every parallel region while one of
  them is descheduled; on a shared machine torch's default (every core) then stalls. `core.cores.default_threads()` is the
  number of cores this process may use minus the cores that other work keeps busy, measured from /proc/stat
  over half a second (at least 1): all cores on an idle machine, one on a busy one.
"""

from __future__ import annotations

import hashlib
import json
import platform
import time

from ctxbench.harness.core.io import atomic_write_json
from ctxbench.harness.core.models import cache_dir


def cpu_model() -> str:
    """The CPU's model name and a hash of its feature flags (what decides bf16 speed)."""
    try:
        info = open("/proc/cpuinfo", encoding="utf-8").read()
        name = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "")
        flags = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("flags")), "")
        return f"{name}|{hashlib.sha256(flags.encode()).hexdigest()[:12]}"
    except OSError:
        return platform.processor() or platform.machine()


def time_matmul(torch, dtype, rows: int, inner: int, cols: int, reps: int = 3) -> float:
    """Best of `reps` wall times of a (rows x inner) @ (inner x cols) product in dtype."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(rows, inner, generator=g).to(dtype)
    b = torch.randn(inner, cols, generator=g).to(dtype)
    best = float("inf")
    with torch.inference_mode():
        a @ b  # warm-up: kernel selection
        for _ in range(reps):
            t = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t)
    return best


def cpu_dtype(hidden: int, intermediate: int, threads: int) -> tuple[str, dict]:
    """("bfloat16" or "float32", the measurement): the faster on this CPU for a model of these sizes."""
    import torch

    key = f"{cpu_model()}|torch {torch.__version__}|{threads} threads|{hidden}x{intermediate}"
    path = cache_dir("machine") / "cpu-dtype.json"
    try:
        known = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        known = {}
    if key in known:
        return known[key]["dtype"], known[key]
    seconds = {"float32": float("inf"), "bfloat16": float("inf")}
    for _ in range(2):  # interleaved, so that a burst of load hits both
        for name in seconds:
            seconds[name] = min(seconds[name], time_matmul(torch, getattr(torch, name), 256, hidden, intermediate))
    verdict = {"dtype": min(seconds, key=seconds.get), "seconds": seconds, "shape": [256, hidden, intermediate]}
    known[key] = verdict
    atomic_write_json(path, known)
    return verdict["dtype"], verdict
