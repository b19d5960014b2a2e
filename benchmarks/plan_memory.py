"""The plan's memory estimate against what a score run really uses (issue 32: "about 13x low").

Runs `ctxbench score` (echo backend: ctxbench's own prompts, no model weights) at a baseline (1 sample at 1024
tokens) and at long lengths, each in its own process with its own seed (no sample-cache hits), and reads each child's
peak resident memory (ru_maxrss, from os.wait4). What the prompts cost is the peak over the baseline's; the estimate
is the `plan:` line's "prompts need ~X". Prints one row per run and the ratio measured / estimated.

    python benchmarks/plan_memory.py                       # echo, 128K-1M tokens
    python benchmarks/plan_memory.py --backend hf --lengths 4096,16384 --samples 1,4
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from ctxbench.harness.run.plan_size import estimate


def peak_rss(argv: list[str], cwd: Path) -> tuple[int, str]:
    """(peak resident bytes of the child, its stderr)."""
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(argv)}\n{err[-2000:]}")
    return usage.ru_maxrss * 1024, err


def score(backend: str, length: int, samples: int, seed: int, work: Path) -> tuple[int, str]:
    argv = [sys.executable, "-m", "ctxbench.harness.cli", "score", "--backend", backend, "--tasks", "ruler/niah_single_1",
            "--lengths", str(length), "--samples", str(samples), "--seed", str(seed), "--store", str(work / f"s{seed}")]
    if backend == "echo":
        argv += ["--backend-arg", "context_length=2000000"]
    return peak_rss(argv, work)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="echo")
    ap.add_argument("--lengths", default="131072,524288,1048576")
    ap.add_argument("--samples", default="1,8")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base, _ = score(a.backend, 1024, 1, 1000, work)
        print(f"baseline ({a.backend}, 1 sample at 1024 tokens): peak {base / 1e6:.0f} MB")
        print("| length | samples | estimate (plan line) | measured over baseline | measured / estimate |")
        print("|---|---|---|---|---|")
        seed = 1001
        for length in map(int, a.lengths.split(",")):
            for n in map(int, a.samples.split(",")):
                seed += 1
                peak, err = score(a.backend, length, n, seed, work)
                est = estimate([(length, n)], 1).peak_bytes
                said = re.search(r"prompts need ~([^ ]+ [KMG]?B)", err)
                extra = peak - base
                print(f"| {length} | {n} | {est / 1e6:.1f} MB ({said.group(1) if said else '?'}) | {extra / 1e6:.1f} MB | "
                      f"{extra / est:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
