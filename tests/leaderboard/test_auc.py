"""AUC@L beside effective length (issue 34, item 4): its definition against Context Arena's published numbers, what
happens past the longest scored length, one task set per AUC, its interval's coverage, and its place on the board
and in results.csv."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ctxbench.leaderboard.aggregate import length_averages
from ctxbench.leaderboard.auc import (
    auc_summary,
    auc_weights,
    default_auc_lengths,
    parse_auc,
    weighted_interval,
)
from ctxbench.leaderboard.report import build_report

K, M = 1024, 1024 ** 2
ARENA_LENGTHS = tuple(8 * K * 2 ** i for i in range(8))  # Context Arena's MRCR bins, 8K .. 1M


@pytest.mark.parametrize("scores, auc128, auc1m", [
    # contextarena.ai (showExtra), MRCR rows as published: per-length % from 8K to 1M, then AUC@128k and AUC@1M
    ((98.7, 94.3, 89.0, 88.9, 84.1, 81.1, 72.7, 60.1), 88.5, 73.7),  # google/gemini-2.5-pro-preview-03-25
    ((99.5, 97.1, 94.4, 93.9, 84.3, 83.7, 71.0, 54.1), 91.9, 72.5),  # google/gemini-2.5-pro-preview
    ((87.6, 68.0, 70.4, 57.5, 55.5, 57.1, 55.6, 42.1), 61.6, 53.2),  # openai/gpt-4.1
])
def test_auc_reproduces_context_arena(scores, auc128, auc1m):
    """The default scale is Context Arena's: its own AUC columns follow from its per-length columns to 0.1."""
    s = np.array(scores)
    assert round(float(auc_weights(ARENA_LENGTHS, 128 * K) @ s), 1) == auc128
    assert round(float(auc_weights(ARENA_LENGTHS, M) @ s), 1) == auc1m


def test_log2_scale_weighs_every_doubling_the_same():
    w = auc_weights(ARENA_LENGTHS, 128 * K, "log2")
    assert w.tolist() == [0.125, 0.25, 0.25, 0.25, 0.125, 0, 0, 0]
    assert auc_weights([4 * K, 8 * K, 32 * K], 16 * K).sum() == pytest.approx(1.0)  # interpolated inside a segment
    # an L between two scored lengths reads the straight line between them: a linear curve integrates exactly
    lengths = [4 * K, 8 * K, 32 * K]
    line = np.array([1.0 - x / (64 * K) for x in lengths])
    assert float(auc_weights(lengths, 16 * K) @ line) == pytest.approx(1.0 - (4 + 16) / 2 / 64)


def test_no_extrapolation_past_the_longest_length():
    with pytest.raises(ValueError, match="needs scores up to 1M"):
        auc_weights([4 * K, 128 * K], M)
    with pytest.raises(ValueError, match="needs a score below 4K"):
        auc_weights([4 * K, 8 * K], 4 * K)


def test_parse_and_default_lengths():
    assert parse_auc("128K, 1M") == (128 * K, M)
    for bad in ("12X", "0", "", "128K,,1M"):
        with pytest.raises(ValueError, match="is not a length"):
            parse_auc(bad)
    assert default_auc_lengths([4 * K, 64 * K]) == ()
    assert default_auc_lengths([4 * K, 128 * K]) == (128 * K,)
    assert default_auc_lengths([4 * K, 128 * K, M]) == (M,)  # the largest reached
    assert default_auc_lengths([4 * K, 128 * K], asked=[16 * K, 128 * K]) == (16 * K, 128 * K)


def _frame(models: dict[str, float], lengths=(4 * K, 32 * K, 128 * K), tasks=("ruler/a", "ruler/b"), n=30, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for model, top in models.items():
        for j, length in enumerate(lengths):
            for task in tasks:
                p = top - 0.1 * j
                rows += [dict(model=model, run_id=f"r-{model}", task=task, length=length, index=i,
                              score=float(rng.random() < p)) for i in range(n)]
    return pd.DataFrame(rows)


def test_auc_is_over_the_common_task_set_only():
    """A task scored at some lengths only is left out of every length of the AUC, as of the averages."""
    df = _frame({"m": 0.9})
    extra = pd.DataFrame([dict(model="m", run_id="r-m", task="ruler/c", length=4 * K, index=i, score=0.0)
                          for i in range(30)])
    both = pd.concat([df, extra], ignore_index=True)
    avgs = length_averages(both, n_boot=50)
    got = auc_summary(both, avgs, [128 * K])
    plain = auc_summary(df, length_averages(df, n_boot=50), [128 * K])
    assert got["auc_128k"].iat[0] == pytest.approx(plain["auc_128k"].iat[0])
    assert got["auc_128k_lo"].iat[0] == pytest.approx(plain["auc_128k_lo"].iat[0])


def test_a_reported_table_gets_its_auc_without_an_interval():
    df = pd.DataFrame([dict(model="paper", task="avg", length=L, score=v, source="reported")
                       for L, v in zip((4 * K, 32 * K, 128 * K), (0.9, 0.8, 0.7))])
    got = auc_summary(df, length_averages(df, n_boot=20), [128 * K], scale="log2").iloc[0]
    assert got["auc_128k"] == pytest.approx((3 * 0.85 + 2 * 0.75) / 5)  # log2: 12 -> 15 -> 17
    assert math.isnan(got["auc_128k_lo"]) and got["auc_128k_note"] == "reported"


def test_auc_is_withheld_while_a_cell_is_incomplete():
    df = _frame({"m": 0.9})
    cells = df.groupby(["model", "task", "length"]).size().rename("done").reset_index()
    cells["planned"], cells["errored"], cells["pending"], cells["stopped"] = 40, 0, 10, 0
    avgs = length_averages(df, cells, n_boot=50)
    got = auc_summary(df, avgs, [128 * K])
    assert math.isnan(got["auc_128k"].iat[0]) and got["auc_128k_note"].iat[0] == "incomplete"


def test_a_sequential_stop_inside_the_range_leaves_the_auc_without_an_interval():
    """A length a sequential run stopped has a data-dependent n: no fixed-n interval may cover the AUC over it."""
    df = _frame({"m": 0.9})
    avgs = length_averages(df, n_boot=50)
    avgs.loc[avgs["length"] == 32 * K, "stopped"] = 5
    got = auc_summary(df, avgs, [128 * K]).iloc[0]
    assert got["auc_128k"] > 0 and math.isnan(got["auc_128k_lo"])
    assert got["auc_128k_note"] == "sequential: no fixed-n interval"


def test_interval_holds_the_point_and_widens_with_fewer_samples():
    rng = np.random.default_rng(1)
    big = [(rng.random(200) < 0.8).astype(float) for _ in range(4)]
    small = [c[:20] for c in big]
    w = [0.1, 0.4, 0.4, 0.1]
    a, b = weighted_interval(big, w), weighted_interval(small, w)
    assert a.lo <= a.mean <= a.hi and b.lo <= b.mean <= b.hi
    assert (b.hi - b.lo) > 2 * (a.hi - a.lo)
    perfect = weighted_interval([np.ones(20)] * 3, [0.25, 0.5, 0.25])
    assert perfect.hi == 1.0 and 0.8 < perfect.lo < 1.0  # all correct: a one-sided bound, not a point


def test_clusters_shared_across_lengths_widen_the_interval():
    """The same documents at every length: the cells are not independent, and the interval says so."""
    rng = np.random.default_rng(2)
    docs = rng.random(6)
    cells, ids = [], []
    for shift in (0.0, 0.1, 0.2):
        p = np.clip(docs - shift, 0, 1)
        doc = np.arange(60) % 6
        cells.append((rng.random(60) < p[doc]).astype(float))
        ids.append([f"doc{d}" for d in doc])
    w = [0.25, 0.5, 0.25]
    shared = weighted_interval(cells, w, clusters=ids)
    apart = weighted_interval(cells, w, clusters=[[f"{i}:{x}" for x in c] for i, c in enumerate(ids)])
    assert shared.hi - shared.lo > apart.hi - apart.lo


def _rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_the_board_shows_auc_beside_effective_and_results_csv_has_it(tmp_path):
    df = _frame({"good": 0.95, "short": 0.9}, lengths=(4 * K, 32 * K, 128 * K))
    df = df[~((df["model"] == "short") & (df["length"] == 128 * K))]  # "short" stops at 32K
    report = build_report(df, out_dir=tmp_path / "board", n_boot=50, auc=[16 * K])
    md = report.markdown.read_text()
    header = next(line for line in md.splitlines() if line.startswith("| Model"))
    assert "| Effective (CI lower) | AUC@16K | AUC@128K | 4K |" in header, header
    good = next(line for line in md.splitlines() if line.startswith("| good"))
    assert "needs scores" not in good and good.count("\\[") >= 2, good  # both AUCs, with intervals
    short = next(line for line in md.splitlines() if line.startswith("| short"))
    assert "— (needs scores up to 128K)" in short, short
    assert "AUC@16K, AUC@128K: the area under" in md
    rows = [r for r in _rows(report.csv.read_text()) if r["task"] == "avg"]
    g = next(r for r in rows if r["model"] == "good")
    assert float(g["auc_128k_lo"]) <= float(g["auc_128k"]) <= float(g["auc_128k_hi"])
    assert 50 < float(g["auc_128k"]) <= 100  # percent, as the other columns
    s = next(r for r in rows if r["model"] == "short")
    assert s["auc_128k"] == "" and s["auc_128k_note"] == "needs scores up to 128K" and s["auc_16k"] != ""
    html = report.html.read_text()
    assert "AUC@128K" in html
    models = {m["model"]: m for m in json.loads(report.json.read_text())["models"]}
    assert models["good"]["auc_128k"] == pytest.approx(float(g["auc_128k"]), abs=1e-4)  # percent there too
    assert models["short"]["auc_128k"] is None and models["short"]["auc_128k_note"] == "needs scores up to 128K"


def test_models_whose_auc_starts_elsewhere_say_where(tmp_path):
    """An AUC from 8K covers another range than one from 4K: in one table, each AUC then names its start."""
    df = _frame({"from4k": 0.95, "from8k": 0.95}, lengths=(4 * K, 8 * K, 32 * K, 128 * K))
    df = df[~((df["model"] == "from8k") & (df["length"] == 4 * K))]
    md = build_report(df, out_dir=tmp_path / "b", n_boot=50).markdown.read_text()
    row8 = next(line for line in md.splitlines() if line.startswith("| from8k"))
    row4 = next(line for line in md.splitlines() if line.startswith("| from4k"))
    assert "(from 8K)" in row8 and "(from 4K)" in row4, (row8, row4)
    same = build_report(df[df["model"] == "from4k"], out_dir=tmp_path / "c", n_boot=50).markdown.read_text()
    assert "(from 4K)" not in same  # one start: nothing to say


@pytest.mark.slow
def test_auc_interval_coverage_on_an_independent_simulator():
    """At least 93% at nominal 95% on every design of benchmarks/auc_coverage.py (heterogeneous n, saturated
    short lengths, small n, continuous scores piled at 1, clusters within and across cells)."""
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    import auc_coverage

    for i, design in enumerate(auc_coverage.DESIGNS):
        cov, _ = auc_coverage.coverage(design, 1000, seed=100 + i)
        assert cov >= 0.93, (design.name, cov)
