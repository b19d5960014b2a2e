"""Calibration of ctxbench's intervals and tests against an independent data model (issue 24, part A).

The simulator below is written from scratch (it imports nothing from ctxbench): logistic outcomes with task
heterogeneity, per-sample difficulty shared by the models (pairing), haystacks shared by several samples (clusters),
model x sample interaction, seed effects and seed x task interaction. Each design states the truth it targets
(computed by Gauss-Hermite quadrature, not by simulation), calls the code under test once per replicate, and
reports the share of intervals that cover the truth, or of true nulls that are rejected, beside the nominal.

    python benchmarks/stats_calibration.py --reps 10000        # the published table
    python benchmarks/stats_calibration.py --reps 2000 --impl lbold --path /tmp/old   # another copy of the code

tests/leaderboard/test_calibration_independent.py runs the same designs (2,000 replicates; 10,000 in the slow tier).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import optimize

GH_X, GH_W = np.polynomial.hermite_e.hermegauss(80)  # nodes for E[f(Z)], Z ~ N(0, 1)
GH_W = GH_W / GH_W.sum()


def expit(x):
    return 1.0 / (1.0 + np.exp(-x))


def mean_p(logit: float, sd: float) -> float:
    """E[expit(logit + sd Z)]: a task's true accuracy over its population of samples."""
    return float((GH_W * expit(logit + sd * GH_X)).sum())


def logit_for(p: float, sd: float) -> float:
    return optimize.brentq(lambda x: mean_p(x, sd) - p, -30, 30)


@dataclass(frozen=True)
class Row:
    design: str
    what: str  # "coverage" or "level"
    nominal: float
    measured: float
    method: str

    def ok(self, margin: float) -> bool:
        if self.nominal == 1.0:  # agreement holds by construction: any disagreement is a failure
            return self.measured >= 1.0 - 1e-9
        return self.measured >= self.nominal - margin if self.what == "coverage" else self.measured <= self.nominal + margin


# ---------------------------------------------------------------- the data model
def draw_cell(rng, reps: int, n: int, p: float, *, sd_item: float = 0.5, haystack: int = 1, sd_haystack: float = 0.0,
              continuous: bool = False, kappa: float = 4.0) -> tuple[np.ndarray, np.ndarray]:
    """reps x n scores of one task whose true mean is p; samples come in haystacks of `haystack` sharing an effect."""
    sd = math.hypot(sd_item, sd_haystack)
    base = logit_for(p, sd)
    groups = np.arange(n) // haystack
    eta = base + rng.normal(0, sd_item, (reps, n)) + rng.normal(0, sd_haystack, (reps, groups.max() + 1))[:, groups]
    q = expit(eta)
    y = rng.beta(kappa * q, kappa * (1 - q)) if continuous else (rng.random(q.shape) < q).astype(float)
    return y, groups


def draw_pairs(rng, reps: int, cells: int, n: int, *, shift: float = 0.0, haystack: int = 1, sd_haystack: float = 0.0,
               sd_model_haystack: float = 0.0, sd_item: float = 1.0, sd_model_item: float = 0.5
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Two models scored on the same samples of `cells` tasks: shared difficulty and haystack, model x sample and
    model x haystack interaction; model A is `shift` logits better. Returns A (reps, N), B, each sample's cell,
    true A − B."""
    task_logit = np.linspace(-1.5, 2.5, cells)
    cell = np.repeat(np.arange(cells), n)
    groups = np.arange(cells * n) // haystack
    shared = task_logit[cell] + rng.normal(0, sd_item, (reps, cells * n)) \
        + rng.normal(0, sd_haystack, (reps, groups.max() + 1))[:, groups]
    def own() -> np.ndarray:
        return rng.normal(0, sd_model_item, shared.shape) + rng.normal(0, sd_model_haystack, (reps, groups.max() + 1))[:, groups]

    a = (rng.random(shared.shape) < expit(shared + shift + own())).astype(float)
    b = (rng.random(shared.shape) < expit(shared + own())).astype(float)
    sd = math.sqrt(sd_item ** 2 + sd_haystack ** 2 + sd_model_item ** 2 + sd_model_haystack ** 2)
    truth = float(np.mean([mean_p(t + shift, sd) - mean_p(t, sd) for t in task_logit]))
    return a, b, cell, truth


@dataclass(frozen=True)
class Study:
    seeds: int = 3
    reference_seeds: int = 3  # 1: B is one fixed run (an untrained model), no seed effects
    tasks: int = 3
    lengths: int = 2
    n: int = 30
    sd_seed: float = 0.3
    sd_seed_task: float = 0.2
    sd_item: float = 1.0
    sd_model_item: float = 0.4
    haystack: int = 1
    sd_haystack: float = 0.0
    sd_model_haystack: float = 0.0


def draw_study(rng, s: Study, effect: float = 0.0):
    """One study: (A scores seeds x N, B scores, cell of each sample, cluster of each sample, true A − B)."""
    cells = s.tasks * s.lengths
    task_logit = np.linspace(-1.0, 2.0, s.tasks)
    cell = np.repeat(np.arange(cells), s.n)
    task = cell % s.tasks
    groups = np.arange(cells * s.n) // s.haystack
    shared = task_logit[task] - 0.3 * (cell // s.tasks) + rng.normal(0, s.sd_item, cells * s.n) \
        + rng.normal(0, s.sd_haystack, groups.max() + 1)[groups]
    sd_b = math.sqrt(s.sd_item ** 2 + s.sd_haystack ** 2 + s.sd_model_item ** 2 + s.sd_model_haystack ** 2)
    sd_a = math.sqrt(sd_b ** 2 + s.sd_seed ** 2 + s.sd_seed_task ** 2)
    cell_logit = [task_logit[c % s.tasks] - 0.3 * (c // s.tasks) for c in range(cells)]
    shift_b = 0.0
    if s.reference_seeds == 1:  # a fixed run: shift it so that the null holds on the average over cells
        target = np.mean([mean_p(x, sd_a) for x in cell_logit])
        shift_b = optimize.brentq(lambda z: np.mean([mean_p(x + z, sd_b) for x in cell_logit]) - target, -5, 5)
    truth = float(np.mean([mean_p(x + effect, sd_a) for x in cell_logit])
                  - np.mean([mean_p(x + shift_b, sd_b if s.reference_seeds == 1 else sd_a) for x in cell_logit]))

    def arm(runs: int, fixed: bool, shift: float) -> np.ndarray:
        own = shared + shift + rng.normal(0, s.sd_model_item, cells * s.n) \
            + rng.normal(0, s.sd_model_haystack, groups.max() + 1)[groups]
        if fixed:
            eta = own[None, :]
        else:
            eta = own + rng.normal(0, s.sd_seed, (runs, 1)) + rng.normal(0, s.sd_seed_task, (runs, s.tasks))[:, task]
        return (rng.random(eta.shape) < expit(eta)).astype(float)

    return (arm(s.seeds, False, effect), arm(s.reference_seeds, s.reference_seeds == 1, shift_b), cell, groups, truth)


# ---------------------------------------------------------------- the designs, each calling the code under test
def _kw(fn: Callable, **kwargs):
    """Only the keyword arguments fn takes (an older copy of the code has no `clusters`)."""
    names = inspect.signature(fn).parameters
    return {k: v for k, v in kwargs.items() if k in names}


def _share(hits) -> float:
    return float(np.mean(hits))


def cell_designs(impl, rng, reps: int, quick: bool) -> list[Row]:
    st = impl.stats
    rows = []
    for n, p in ((50, 0.99),) if quick else ((30, 0.98), (50, 0.99), (100, 0.995), (200, 0.99)):
        y, _ = draw_cell(rng, reps, n, p)
        ivs = [st.mean_interval(v) for v in y]
        rows.append(Row(f"cell 0/1, n={n}, p={p}", "coverage", 0.95, _share([i.lo <= p <= i.hi for i in ivs]), ivs[0].method))
    for n in (10,) if quick else (10, 15, 30):
        y, _ = draw_cell(rng, reps, n, 0.8, continuous=True)
        ivs = [st.mean_interval(v, n_boot=1000, rng=rng) for v in y]
        rows.append(Row(f"cell continuous (skewed), n={n}", "coverage", 0.95, _share([i.lo <= 0.8 <= i.hi for i in ivs]),
                        ivs[0].method))
    y, groups = draw_cell(rng, reps, 100, 0.7, haystack=10, sd_haystack=1.5)
    ivs = [st.mean_interval(v, **_kw(st.mean_interval, clusters=groups)) for v in y]
    rows.append(Row("cell 0/1, n=100 in 10 shared haystacks", "coverage", 0.95, _share([i.lo <= 0.7 <= i.hi for i in ivs]),
                    ivs[0].method))
    return rows


def stratified_designs(impl, rng, reps: int, quick: bool) -> list[Row]:
    st = impl.stats
    designs = {"per-length 0/1, 11 tasks n=100 (p .95) + 2 tasks n=5 (p .3)": [(100, 0.95)] * 11 + [(5, 0.3)] * 2,
               "per-length 0/1, 12 tasks n=50 (p .9) + 1 task n=5 (p .2)": [(50, 0.9)] * 12 + [(5, 0.2)],
               "per-length 0/1, 13 tasks n=20 (p .3-.99)": [(20, p) for p in np.linspace(0.3, 0.99, 13)]}
    rows = []
    for name, tasks in list(designs.items())[:1 if quick else None]:
        truth = float(np.mean([p for _, p in tasks]))
        draws = [draw_cell(rng, reps, n, p)[0] for n, p in tasks]
        ivs = [st.stratified_interval([d[r] for d in draws]) for r in range(reps)]
        rows.append(Row(name, "coverage", 0.95, _share([i.lo <= truth <= i.hi for i in ivs]), ivs[0].method))
    ps = np.linspace(0.5, 0.9, 6)
    draws = [draw_cell(rng, reps, 60, p, haystack=10, sd_haystack=1.5) for p in ps]
    clusters = [g for _, g in draws]
    ivs = [st.stratified_interval([d[r] for d, _ in draws], **_kw(st.stratified_interval, clusters=clusters))
           for r in range(reps)]
    rows.append(Row("per-length 0/1, 6 tasks n=60 in shared haystacks of 10", "coverage", 0.95,
                    _share([i.lo <= ps.mean() <= i.hi for i in ivs]), ivs[0].method))
    return rows


def paired_designs(impl, rng, reps: int, quick: bool) -> list[Row]:
    import pandas as pd

    st, agg = impl.stats, impl.aggregate
    rows = []
    designs = (("paired, 6 cells x 40, null", 0.0, 1, 0.0), ("paired, 6 cells x 40, A better by 0.5 logit", 0.5, 1, 0.0),
               ("paired, 6 cells x 40 in shared haystacks of 10, null", 0.0, 10, 1.0))
    for name, shift, haystack, sd_h in designs[::2] if quick else designs:
        a, b, cell, truth = draw_pairs(rng, reps, 6, 40, shift=shift, haystack=haystack, sd_haystack=sd_h,
                                       sd_model_haystack=sd_h)
        index = pd.MultiIndex.from_arrays([cell, np.full(cell.size, 4096), np.arange(cell.size)],
                                          names=["task", "length", "index"])
        clusters = (np.arange(cell.size) // haystack).tolist() if haystack > 1 else None
        rejected, covered, agree = [], [], []
        for r in range(reps):
            t = st.paired_test(a[r], b[r], strata=list(cell), **_kw(st.paired_test, clusters=clusters, rng=rng))
            ci, _ = agg.paired_interval(pd.DataFrame({"a": a[r], "b": b[r]}, index=index), n_discordant=t.n_discordant,
                                        **_kw(agg.paired_interval, p_value=t.p_value, clusters=clusters, rng=rng))
            rejected.append(t.p_value < 0.05)
            if ci is not None:
                covered.append(ci[0] <= truth <= ci[1])
                agree.append((ci[0] > 0 or ci[1] < 0) == (t.p_value < 0.05))
        if shift == 0:
            rows.append(Row(name + ": test rejects", "level", 0.05, _share(rejected), t.method))
        rows.append(Row(name + ": interval covers Δ", "coverage", 0.95, _share(covered), f"{len(covered)} of {reps} given"))
        rows.append(Row(name + ": interval agrees with test", "coverage", 1.0, _share(agree), ""))
    return rows


STUDIES = {"study 3 vs 3 seeds, null": Study(),
           "study 3 seeds vs one untrained run, null": Study(reference_seeds=1),
           "study 3 vs 3, large seed effects, null": Study(sd_seed=0.6, sd_seed_task=0.3),
           "study 3 vs 3, shared haystacks of 5, null": Study(haystack=5, sd_haystack=1.0, sd_model_haystack=0.8),
           "study 3 vs 3, no seed effects, null": Study(sd_seed=0.0, sd_seed_task=0.0),
           "study 5 vs 5 seeds, null": Study(seeds=5, reference_seeds=5)}


def study_designs(impl, rng, reps: int, quick: bool) -> list[Row]:
    sd = impl.studies
    rows = []
    for name, design in [kv for i, kv in enumerate(STUDIES.items()) if not quick or i in (0, 1, 3)]:
        rejected, covered = [], []
        for _ in range(reps):
            a, b, cell, groups, truth = draw_study(rng, design)
            arms = sd.Arm("A", a, tuple(range(a.shape[0]))), sd.Arm("B", b, tuple(range(b.shape[0])))
            clusters = groups.astype(str) if design.haystack > 1 else None
            d = sd.compare_arms(*arms, cell, int(cell.max()) + 1, list(cell), level=0.95, n_boot=2000, rng=rng,
                                **_kw(sd.compare_arms, exact=False, clusters=clusters))
            rejected.append(d.p < 0.05)
            covered.append(d.lo <= truth <= d.hi if math.isfinite(d.lo) else d.p >= 0.05)
        rows.append(Row(name + ": rejects", "level", 0.05, _share(rejected), d.method))
    return rows


GROUPS = {"cells": cell_designs, "per-length": stratified_designs, "paired": paired_designs, "studies": study_designs}


def load(impl: str, path: str | None):
    if path:
        sys.path.insert(0, path)
    return argparse.Namespace(**{m: importlib.import_module(f"{impl}.{m}") for m in ("stats", "aggregate", "studies")})


def run(reps: int, *, seed: int = 2024, groups=tuple(GROUPS), impl: str = "ctxbench.leaderboard", path: str | None = None,
        flips: int = 2000, quick: bool = False) -> list[Row]:
    """Every design of the named groups at `reps` replicates (quick: one or two per group, the default test tier).
    Monte Carlo sign-flip tests use `flips` draws (their p-value (hits + 1)/(draws + 1) is valid at any number of
    draws; the board uses 20,000)."""
    code = load(impl, path)
    code.stats.MONTE_CARLO_FLIPS = flips
    rng = np.random.default_rng(seed)
    return [row for g in groups for row in GROUPS[g](code, rng, reps, quick)]


def table(rows: list[Row], reps: int) -> str:
    lines = ["| design | checks | nominal | measured | method |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.design} | {r.what} | {r.nominal:.2f} | {r.measured:.3f} | {r.method} |")
    band = 1.96 * math.sqrt(0.05 * 0.95 / reps)
    lines.append(f"\n{reps} replicates per design; binomial 95% band of a measured share around 0.95 or 0.05: ±{band:.3f}.")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000, help="replicates per design")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--only", nargs="*", choices=list(GROUPS), default=list(GROUPS))
    ap.add_argument("--impl", default="ctxbench.leaderboard", help="package holding stats, aggregate, studies")
    ap.add_argument("--path", default=None, help="directory to put first on sys.path (for --impl)")
    args = ap.parse_args()
    start = time.perf_counter()
    rows = run(args.reps, seed=args.seed, groups=args.only, impl=args.impl, path=args.path)
    print(table(rows, args.reps))
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
