"""Coverage of the board's intervals in the corners of issue 31, on a simulator written for this check alone.

It imports nothing from ctxbench but the two functions the board calls, `mean_interval` (a task x length cell) and
`stratified_interval` (a length's mean of task means), from the module named by --impl (or a stats.py file given
by --file, e.g. an older copy). The data are drawn here, with the truth known by construction:

- continuous scores piled at 1.0 (partial-credit string_match_all on a strong model): w.p. q a score of 1.0, else
  Beta(a, b), so the true mean is q + (1 − q)·a/(a + b); cells of n = 10..30 and a length of 13 such tasks at n = 10;
- a length's mean over 13 tasks of 0/1 scores with unequal n where the small task is the hard one;
- clustered 0/1 cells (haystack draws x 11 depths): each draw's accuracy is Beta with mean p and intra-class
  correlation ρ (a + b = 1/ρ − 1), so the truth is p;
- skewed continuous clustered cells with 3-10 clusters (each cluster's mean Beta around μ, scores Beta around it);
- last turn's grid: plain binomial cells, n = 30..200, p near 0.99; and ordinary designs, to watch the widths.

    python benchmarks/interval_corners.py --reps 2000                      # every design, the code as installed
    python benchmarks/interval_corners.py --reps 2000 --file /tmp/old_stats.py   # another copy of stats.py
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import math
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

DEPTHS = 11


@dataclass(frozen=True)
class Design:
    name: str
    group: str
    draw: Callable  # rng -> (call kind, data, clusters or None)
    truth: float


# ---------------------------------------------------------------- generators (numpy only)
def piled(rng, n: int, q: float, a: float, b: float) -> np.ndarray:
    """n scores: 1.0 with probability q, else Beta(a, b)."""
    return np.where(rng.random(n) < q, 1.0, rng.beta(a, b, n))


def piled_truth(q: float, a: float, b: float) -> float:
    return q + (1 - q) * a / (a + b)


def binary(rng, n: int, p: float) -> np.ndarray:
    return (rng.random(n) < p).astype(float)


def clustered_binary(rng, draws: int, p: float, icc: float) -> tuple[np.ndarray, np.ndarray]:
    """draws haystacks x DEPTHS depths; a haystack's accuracy is Beta(p·c, (1 − p)·c), c = 1/icc − 1."""
    c = 1 / icc - 1
    acc = rng.beta(p * c, (1 - p) * c, draws)
    groups = np.repeat(np.arange(draws), DEPTHS)
    return (rng.random(groups.size) < acc[groups]).astype(float), groups


def clustered_skewed(rng, clusters: int, size: int, mu: float, between: float, within: float
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Cluster means Beta(mu·between, (1 − mu)·between); scores Beta(m·within, (1 − m)·within): truth mu."""
    m = np.clip(rng.beta(mu * between, (1 - mu) * between, clusters), 1e-9, 1 - 1e-9)
    groups = np.repeat(np.arange(clusters), size)
    return rng.beta(m[groups] * within, (1 - m[groups]) * within), groups


# ---------------------------------------------------------------- the designs
def cell(fn) -> Callable:
    return lambda rng: ("cell", fn(rng), None)


def designs() -> list[Design]:
    out = []
    for n, q, a, b in ((10, 0.9, 2, 2), (10, 0.8, 5, 2), (15, 0.7, 5, 2), (20, 0.9, 2, 2), (30, 0.8, 5, 2),
                       (30, 0.95, 2, 2)):
        out.append(Design(f"continuous piled at 1: n={n}, q={q}, else Beta({a},{b})", "piled",
                          cell(lambda rng, n=n, q=q, a=a, b=b: piled(rng, n, q, a, b)), piled_truth(q, a, b)))
    for lo, hi, a, b in ((0.6, 0.95, 5, 2), (0.85, 0.99, 2, 2), (0.95, 0.995, 2, 2)):
        qs = np.linspace(lo, hi, 13)
        out.append(Design(f"length of 13 piled tasks, n=10 each (q {lo}-{hi}, else Beta({a},{b}))", "piled",
                          lambda rng, qs=qs, a=a, b=b: ("strata", [piled(rng, 10, q, a, b) for q in qs], None),
                          float(np.mean([piled_truth(q, a, b) for q in qs]))))
    unequal = {"12 tasks p=.998 n=200 + 1 task p=.9 n=10": [(200, 0.998)] * 12 + [(10, 0.9)],
               "12 tasks p=1 n=500 + 1 task p=.5 n=2": [(500, 1.0)] * 12 + [(2, 0.5)],
               "12 tasks p=.975-1 n=500 + 1 task p=.9 n=20": [(500, p) for p in np.linspace(0.975, 1, 12)] + [(20, 0.9)],
               "11 tasks p=.95 n=100 + 2 tasks p=.3 n=5": [(100, 0.95)] * 11 + [(5, 0.3)] * 2,
               "13 tasks p=.3-.99 n=20": [(20, p) for p in np.linspace(0.3, 0.99, 13)],
               "13 tasks p=.99 n=50": [(50, 0.99)] * 13}
    for name, tasks in unequal.items():
        out.append(Design("length 0/1: " + name, "unequal n",
                          lambda rng, tasks=tasks: ("strata", [binary(rng, n, p) for n, p in tasks], None),
                          float(np.mean([p for _, p in tasks]))))
    for draws, p in ((10, 0.95), (20, 0.98), (10, 0.98), (20, 0.95), (5, 0.9)):
        out.append(Design(f"clustered 0/1 cell: {draws} draws x {DEPTHS} depths, ICC .3, p={p}", "clustered 0/1",
                          lambda rng, d=draws, p=p: ("cell", *clustered_binary(rng, d, p, 0.3)), p))
    for g in (3, 5, 10):
        out.append(Design(f"skewed continuous clustered cell: {g} clusters x 10, mean .85", "clustered continuous",
                          lambda rng, g=g: ("cell", *clustered_skewed(rng, g, 10, 0.85, 3.0, 4.0)), 0.85))
    for n in (30, 50, 100, 200):
        for p in (0.98, 0.99, 0.995):
            out.append(Design(f"binomial cell: n={n}, p={p}", "binomial grid",
                              cell(lambda rng, n=n, p=p: binary(rng, n, p)), p))
    for n in (10, 30):
        out.append(Design(f"ordinary continuous cell: Beta(3.2, 0.8), n={n}", "ordinary",
                          cell(lambda rng, n=n: rng.beta(3.2, 0.8, n)), 0.8))
    out.append(Design("ordinary length: 13 continuous tasks Beta(mean .5-.9, κ 4), n=20", "ordinary",
                      lambda rng: ("strata", [rng.beta(4 * m, 4 * (1 - m), 20) for m in np.linspace(0.5, 0.9, 13)], None),
                      0.7))
    return out


# ---------------------------------------------------------------- measuring
@dataclass(frozen=True)
class Result:
    design: Design
    coverage: float
    median_width: float
    inverted: int  # intervals with lo > mean or mean > hi, or outside [0, 1]
    method: str  # the most frequent one


def measure(design: Design, mean_interval, stratified_interval, reps: int, seed: int) -> Result:
    rng = np.random.default_rng([seed, sum(map(ord, design.name))])
    hits, widths, bad, methods = 0, [], 0, Counter()
    for _ in range(reps):
        kind, data, clusters = design.draw(rng)
        if kind == "cell":
            kw = {"clusters": clusters} if clusters is not None else {}
            iv = mean_interval(data, rng=rng, **kw)
        else:
            iv = stratified_interval(data, rng=rng)
        methods[iv.method] += 1
        if not math.isfinite(iv.lo):
            continue  # "n too small": no interval shown (counts as not covering)
        hits += iv.lo <= design.truth <= iv.hi
        widths.append(iv.hi - iv.lo)
        bad += not (0 <= iv.lo <= iv.mean + 1e-12 and iv.mean - 1e-12 <= iv.hi <= 1)
    return Result(design, hits / reps, float(np.median(widths)) if widths else math.nan, bad,
                  methods.most_common(1)[0][0])


def load(impl: str, file: str | None):
    if file:
        spec = importlib.util.spec_from_file_location("stats_under_test", file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(impl)


def table(results: list[Result], reps: int) -> str:
    lines = ["| design | truth | coverage | median width | bad | method |", "|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.design.name} | {r.design.truth:.4f} | {r.coverage:.3f} | {r.median_width:.3f} | "
                     f"{r.inverted} | {r.method} |")
    band = 1.96 * math.sqrt(0.05 * 0.95 / reps)
    lines.append(f"\n{reps} replicates per design (binomial 95% band around 0.95: ±{band:.3f}); "
                 "bad: intervals not inside [0, 1] or not around their mean.")
    return "\n".join(lines)


def run(reps: int, *, seed: int = 31, groups: tuple[str, ...] | None = None, impl: str = "ctxbench.leaderboard.stats",
        file: str | None = None, only: str | None = None) -> list[Result]:
    code = load(impl, file)
    chosen = [d for d in designs() if (groups is None or d.group in groups) and (only is None or only in d.name)]
    return [measure(d, code.mean_interval, code.stratified_interval, reps, seed) for d in chosen]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000, help="replicates per design")
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--groups", nargs="*", default=None, help="piled, 'unequal n', 'clustered 0/1', "
                    "'clustered continuous', 'binomial grid', ordinary")
    ap.add_argument("--only", default=None, help="designs whose name contains this text")
    ap.add_argument("--impl", default="ctxbench.leaderboard.stats", help="module holding mean_interval, stratified_interval")
    ap.add_argument("--file", default=None, help="a stats.py file to test instead of --impl")
    args = ap.parse_args()
    start = time.perf_counter()
    results = run(args.reps, seed=args.seed, groups=tuple(args.groups) if args.groups else None, impl=args.impl,
                  file=args.file, only=args.only)
    print(table(results, args.reps))
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
