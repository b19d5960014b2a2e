"""CPU settings for local inference, chosen by measurement on the machine at hand rather than assumed.

- dtype: bfloat16 beats float32 only where the CPU multiplies bf16 natively (AVX512-BF16, AMX); elsewhere torch
  converts on the fly and bf16 is several times slower (on this project's 2-core AMD EPYC without AVX512:
  SmolLM2-135M prefill ~5x slower in bf16, see benchmarks/README.md). `cpu_dtype()` times one matmul of the
  model's shapes in both dtypes, interleaved, keeps the faster, and caches the verdict per CPU model, torch
  version, thread count and shape.
- threads: OpenMP threads that outnumber the free cores wait on each other at every parallel region while one of
  them is descheduled; on a shared machine torch's default (every core) then stalls. `default_threads()` is the
  number of cores this process may use minus the cores that other work keeps busy, measured from /proc/stat
  over half a second (at least 1): all cores on an idle machine, one on a busy one.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time

from ctxbench.harness.core.io import atomic_write_json
from ctxbench.harness.core.models import cache_dir


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def cpu_times() -> tuple[int, int, int] | None:
    """(all jiffies, idle jiffies, CPUs counted) from /proc/stat's aggregate line; None where there is none."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    fields = [int(x) for x in lines[0].split()[1:]]
    cpus = sum(1 for ln in lines[1:] if ln.startswith("cpu"))
    return sum(fields[:8]), fields[3] + fields[4], cpus  # user..steal; idle + iowait


def busy_cores(window: float = 0.5) -> float | None:
    """How many cores other work keeps busy, measured over `window` seconds; None where /proc/stat is missing.

    The load average is not used where this exists: in containers and sandboxes it can count tasks that use no
    CPU (here it read 1.0-1.4 on an idle machine, which cost the idle 2-core run its second thread), and it
    lags a minute behind, so it still counts a job that just ended.
    """
    a = cpu_times()
    if a is None:
        return None
    time.sleep(window)
    b = cpu_times()
    if b is None or b[0] <= a[0]:
        return None
    busy = 1.0 - (b[1] - a[1]) / (b[0] - a[0])
    return max(0.0, busy) * a[2]


def default_threads() -> int:
    """Cores this process may use, minus the cores other work keeps busy now; at least 1."""
    cores = usable_cores()
    busy = busy_cores()
    if busy is None:
        try:
            busy = os.getloadavg()[0]
        except OSError:
            busy = 0.0
    return max(1, min(cores, int(cores - busy + 0.5)))


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
