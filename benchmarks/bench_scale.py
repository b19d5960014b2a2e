"""Memory and time of the paper-scale run loop: the ruler-paper shape with the echo backend.

    python benchmarks/bench_scale.py --data-dir ../shared/data                    # 20, then 200 samples per cell
    python benchmarks/bench_scale.py --samples 20 --shards 2 --json scale.json   # plus shards 0/2 and 1/2 side by side

Each level is one `ctxbench score --backend echo --suite ruler-paper --samples N` in a child process, with a
fresh, empty dataset cache (so every sample is generated, cached and then sent) and a fresh store. The echo
backend answers instantly, so the run is generation + the run loop + the store: what the harness itself costs.

Printed per level: peak RSS of the child (wait4's ru_maxrss), wall time, CPU time (user + system), samples,
prompt tokens, and the size of the dataset cache on disk. Then:
- RSS growth between the smallest and largest level (target: < 1.3x for 10x the samples; < 2 GB at 200);
- the projected generation time of the full protocol (500 samples per cell): time is fitted per level as
  a + b * samples (the fixed part: imports, tokenizer, haystack costs), then evaluated at 500;
- with --shards K, the same smallest level run as K processes side by side (--shard i/K, one shared run and
  cache), and the speed-up that K processes give on this machine, applied to the projection.

The machine's load average is printed before and after: on a shared machine wall time is noisy, CPU time less so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAPER_SAMPLES = 500


def child_cmd(args, samples: int, store: Path, shard: str | None = None) -> list[str]:
    cmd = [sys.executable, "-c", "from ctxbench.harness.cli import main; main()", "score", "--backend", "echo",
           "--model", args.model, "--suite", args.suite, "--samples", str(samples), "--store", str(store),
           "--data-dir", str(args.data_dir), "--fresh"]
    if args.lengths:
        cmd += ["--lengths", args.lengths]
    if args.tasks:
        cmd += ["--tasks", args.tasks]
    if shard:
        cmd += ["--shard", shard]
    return cmd


def run_children(cmds: list[list[str]], env: dict[str, str], log: Path) -> list[dict]:
    """Start the commands together; wait for each with wait4 (its own peak RSS and CPU time)."""
    t0 = time.perf_counter()
    procs = []
    for i, cmd in enumerate(cmds):
        out = open(log.with_suffix(f".{i}.log"), "w")  # noqa: SIM115 - closed below
        procs.append((subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT), out))
    results = []
    for p, out in procs:
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.close()
        results.append({"rc": p.returncode, "wall_s": time.perf_counter() - t0, "cpu_s": usage.ru_utime + usage.ru_stime,
                        "peak_rss_mb": usage.ru_maxrss / 1024, "log": out.name})
    return results


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def store_stats(store: Path) -> dict:
    rows = prompt_tokens = errors = 0
    for f in store.rglob("samples*.jsonl"):
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                rows += 1
                prompt_tokens += r.get("prompt_tokens") or 0
                errors += bool(r.get("error"))
    return {"rows": rows, "prompt_tokens": prompt_tokens, "errors": errors}


def level(args, samples: int, shards: int, scratch: Path) -> dict:
    tag = f"n{samples}" + (f"-x{shards}" if shards > 1 else "")
    cache, store = scratch / f"cache-{tag}", scratch / f"runs-{tag}"
    env = {**os.environ, "CTXBENCH_CACHE": str(cache), "PYTHONUNBUFFERED": "1", "COLUMNS": "160"}
    if args.threads:
        env.update(OMP_NUM_THREADS=str(args.threads), RAYON_NUM_THREADS=str(args.threads))
    # the embedded model's tokenizer comes from the shared model cache, not the fresh one
    shared = Path(os.environ.get("CTXBENCH_CACHE", Path.home() / ".cache" / "ctxbench"))
    for sub in ("models", "fingerprints"):
        if (shared / sub).exists():
            cache.mkdir(parents=True, exist_ok=True)
            os.symlink(shared / sub, cache / sub)
    cmds = [child_cmd(args, samples, store, f"{i}/{shards}" if shards > 1 else None) for i in range(shards)]
    print(f"level {tag}: {' '.join(cmds[0][3:])}", flush=True)
    procs = run_children(cmds, env, scratch / tag)
    out = {"samples": samples, "shards": shards, "procs": procs, "wall_s": max(p["wall_s"] for p in procs),
           "cpu_s": sum(p["cpu_s"] for p in procs), "peak_rss_mb": max(p["peak_rss_mb"] for p in procs),
           **store_stats(store), "cache_mb": dir_size(cache / "datasets") / 2**20 if (cache / "datasets").exists() else 0.0}
    for p in procs:
        if p["rc"] not in (0,):
            out["failed"] = f"exit {p['rc']}; see {p['log']}"
            print(Path(p["log"]).read_text()[-3000:], file=sys.stderr)
    if "failed" in out:  # a failed child's figures are not a measurement: no projection from them
        raise SystemExit(f"level {tag} failed: {out['failed']}")
    if not args.keep:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(store, ignore_errors=True)
    print(f"  wall {out['wall_s']:.1f} s, cpu {out['cpu_s']:.1f} s, peak RSS {out['peak_rss_mb']:.0f} MB, "
          f"{out['rows']} rows, {out['prompt_tokens'] / 1e6:.1f} M prompt tokens, cache {out['cache_mb']:.0f} MB", flush=True)
    return out


def fit_line(xs: list[int], ys: list[float]) -> tuple[float, float]:
    """(a, b) of y = a + b x through the smallest and largest level (b only, if there is one level)."""
    if len(xs) == 1:
        return 0.0, ys[0] / xs[0]
    (x0, y0), (x1, y1) = (xs[0], ys[0]), (xs[-1], ys[-1])
    b = (y1 - y0) / (x1 - x0)
    return max(0.0, y0 - b * x0), b


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", default="20,200", help="samples per task and length, one level each (comma-separated)")
    ap.add_argument("--shards", type=int, default=2, help="also run the smallest level as this many shards side by side (1: skip)")
    ap.add_argument("--suite", default="ruler-paper")
    ap.add_argument("--lengths", default=None, help="override the suite's lengths (default: 4K..128K)")
    ap.add_argument("--tasks", default=None, help="keep only these tasks (default: all 13)")
    ap.add_argument("--model", default="smollm2-135m", help="whose tokenizer and chat template the samples use")
    ap.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--threads", type=int, default=0, help="cap OMP/rayon threads of the children (0: leave)")
    ap.add_argument("--scratch", type=Path, default=None, help="where caches and stores go (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the generated caches and stores")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    levels = sorted(int(x) for x in args.samples.split(","))
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="ctxbench-scale-"))
    scratch.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    print(f"load average before: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} on {os.cpu_count()} CPUs", flush=True)
    # the shard pair runs right after the smallest level (same size, comparable load), before the long levels
    results = [level(args, levels[0], 1, scratch)]
    pair = level(args, levels[0], args.shards, scratch) if args.shards > 1 else None
    results += [level(args, n, 1, scratch) for n in levels[1:]]
    load1 = os.getloadavg()

    print("\n== bench_scale: ruler-paper shape, echo backend ==")
    print(f"{'samples/cell':>12} {'procs':>5} {'wall s':>8} {'cpu s':>8} {'peak RSS MB':>12} {'rows':>7} {'M prompt tok':>12} {'cache MB':>9}")
    for r in results + ([pair] if pair else []):
        print(f"{r['samples']:>12} {r['shards']:>5} {r['wall_s']:>8.1f} {r['cpu_s']:>8.1f} {r['peak_rss_mb']:>12.0f} {r['rows']:>7} "
              f"{r['prompt_tokens'] / 1e6:>12.1f} {r['cache_mb']:>9.0f}" + (f"  FAILED: {r['failed']}" if "failed" in r else ""))
    lo, hi = results[0], results[-1]
    summary: dict = {"levels": results, "shards": pair, "load_before": load0, "load_after": load1}
    if len(results) > 1:
        growth = hi["peak_rss_mb"] / lo["peak_rss_mb"]
        summary["rss_growth"] = growth
        print(f"peak RSS growth for {hi['samples'] / lo['samples']:.0f}x samples: {growth:.2f}x (target < 1.3x); "
              f"at {hi['samples']}: {hi['peak_rss_mb']:.0f} MB (target < 2048 MB)")
    xs = [r["samples"] for r in results]
    for key in ("wall_s", "cpu_s"):
        a, b = fit_line(xs, [r[key] for r in results])
        summary[f"projected_{key}"] = a + b * PAPER_SAMPLES
        print(f"projected full ruler-paper ({PAPER_SAMPLES} samples/cell), one process: {key[:-2]} "
              f"{(a + b * PAPER_SAMPLES) / 3600:.2f} h (fit {a:.0f} s + {b:.2f} s/sample-per-cell)")
    if pair:
        one = next(r for r in results if r["samples"] == pair["samples"])
        speedup = one["wall_s"] / pair["wall_s"]
        summary["shard_speedup"] = speedup
        summary["projected_wall_s_sharded"] = summary["projected_wall_s"] / speedup
        print(f"{args.shards} shards side by side at {pair['samples']} samples/cell: wall {pair['wall_s']:.1f} s vs {one['wall_s']:.1f} s "
              f"in one process ({speedup:.2f}x); peak RSS per shard {max(p['peak_rss_mb'] for p in pair['procs']):.0f} MB; "
              f"projected full ruler-paper: {summary['projected_wall_s_sharded'] / 3600:.2f} h")
    print(f"load average after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return 1 if any("failed" in r for r in results + ([pair] if pair else [])) else 0


if __name__ == "__main__":
    sys.exit(main())
