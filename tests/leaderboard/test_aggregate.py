"""Aggregation math on small hand-checked inputs, and bootstrap CI coverage."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from ctxbench.leaderboard.aggregate import (
    category_table,
    depth_length_matrix,
    length_averages,
    paired_comparison,
    position_curve,
    task_length_table,
)
from ctxbench.leaderboard.ranking import effective_length, resolve_threshold, weighted_averages


def frame(rows: list[tuple], columns=("model", "task", "length", "index", "score")) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(columns))


@pytest.fixture
def small() -> pd.DataFrame:
    # M at 4K: t1 = [1, 1, 1, 0] (0.75), t2 = [0, 0] (0.0); at 8K: t1 = [1, 0], t2 = [1, 1].
    rows = [("M", "t1", 4096, i, s) for i, s in enumerate([1, 1, 1, 0])]
    rows += [("M", "t2", 4096, i, s) for i, s in enumerate([0, 0])]
    rows += [("M", "t1", 8192, i, s) for i, s in enumerate([1, 0])]
    rows += [("M", "t2", 8192, i, s) for i, s in enumerate([1, 1])]
    df = frame(rows)
    df["category"] = df["task"].map({"t1": "retrieval", "t2": "aggregation"})
    return df


def test_task_length_table_means_and_counts(small: pd.DataFrame) -> None:
    table = task_length_table(small, n_boot=200).set_index(["task", "length"])
    assert table.loc[("t1", 4096), "mean"] == pytest.approx(0.75)
    assert table.loc[("t1", 4096), "n"] == 4
    # 0 of 2 and 2 of 2 are not certainties: the exact interval's open end is 1 - 0.025^(1/2) away
    assert table.loc[("t2", 4096), ["mean", "lo"]].tolist() == [0.0, 0.0]
    assert table.loc[("t2", 4096), "hi"] == pytest.approx(1 - 0.025 ** 0.5)
    assert table.loc[("t2", 8192), "lo"] == pytest.approx(0.025 ** 0.5) and table.loc[("t2", 8192), "hi"] == 1.0
    t1 = table.loc[("t1", 4096)]
    assert 0 <= t1["lo"] <= t1["mean"] <= t1["hi"] <= 1 and t1["method"] == "clopper-pearson"
    assert (table["planned"] == table["n"]).all() and (table["status"] == "complete").all()  # no plan given: n is the plan


def test_length_average_weighs_tasks_equally(small: pd.DataFrame) -> None:
    avgs = length_averages(small, n_boot=200).set_index("length")
    # Mean of task means (0.75 + 0.0) / 2, not the pooled 3/6 = 0.5.
    assert avgs.loc[4096, "mean"] == pytest.approx(0.375)
    assert avgs.loc[8192, "mean"] == pytest.approx(0.75)
    assert avgs.loc[4096, "n_tasks"] == 2 and avgs.loc[4096, "n"] == 6
    # The mean of task means gets the exact interval at its effective sample size: n_eff = 2² / (1/4 + 1/2).
    n_eff = 4 / (1 / 4 + 1 / 2)
    k = 0.375 * n_eff
    lo, hi = avgs.loc[4096, ["lo", "hi"]]
    assert lo == pytest.approx(sps.beta.ppf(0.025, k, n_eff - k + 1))
    assert hi == pytest.approx(sps.beta.ppf(0.975, k + 1, n_eff - k))
    assert avgs.loc[4096, "task_set"] == "all" and avgs.loc[4096, "status"] == "complete"


def test_bootstrap_is_deterministic_and_cell_local(small: pd.DataFrame) -> None:
    one = task_length_table(small, n_boot=300, seed=7)
    other = small.assign(model="N", score=1 - small["score"])
    both = task_length_table(pd.concat([small, other]), n_boot=300, seed=7)
    pd.testing.assert_frame_equal(one, both[both["model"] == "M"].reset_index(drop=True))
    noisy = frame([("M", "t", 4096, i, s) for i, s in enumerate(np.linspace(0, 1, 37))])
    seven, eight = (task_length_table(noisy, n_boot=300, seed=s) for s in (7, 8))
    assert seven["lo"][0] != eight["lo"][0] or seven["hi"][0] != eight["hi"][0]


def test_reported_avg_rows_pass_through() -> None:
    rep = frame([("P", "avg", 4096, 0, 0.9), ("P", "avg", 8192, 0, 0.8)]).assign(source="reported")
    avgs = length_averages(rep)
    assert avgs["mean"].tolist() == pytest.approx([0.9, 0.8])
    assert avgs["lo"].isna().all() and avgs["hi"].isna().all()
    assert set(avgs["source"]) == {"reported"}


def test_reported_name_clash_is_kept_apart() -> None:
    measured = frame([("M", "t", 4096, 0, 1.0)])
    rep = frame([("M", "avg", 4096, 0, 0.5)]).assign(source="reported")
    avgs = length_averages(pd.concat([measured, rep])).set_index("model")
    assert avgs.loc["M", "mean"] == 1.0 and avgs.loc["M (reported)", "mean"] == 0.5


def test_scores_must_be_on_unit_scale() -> None:
    with pytest.raises(ValueError, match="0..1 scale"):
        length_averages(frame([("M", "t", 4096, 0, 85.0)]))


def test_cell_interval_coverage() -> None:
    """Over 200 simulated datasets the 95% interval should cover the true mean ~95% of the time."""
    rng = np.random.default_rng(2024)
    p, n, datasets = 0.7, 80, 200
    scores = (rng.random((datasets, n)) < p).astype(float)
    df = pd.DataFrame(
        {
            "model": np.repeat([f"m{i}" for i in range(datasets)], n),
            "task": "t",
            "length": 4096,
            "index": np.tile(np.arange(n), datasets),
            "score": scores.ravel(),
        }
    )
    table = task_length_table(df, n_boot=1000)
    covered = ((table["lo"] <= p) & (p <= table["hi"])).mean()
    assert 0.88 <= covered <= 0.99


def test_length_average_interval_coverage() -> None:
    rng = np.random.default_rng(11)
    ps, n, datasets = (0.9, 0.4), 60, 200
    parts = []
    for task, p in zip(("a", "b"), ps, strict=True):
        scores = (rng.random((datasets, n)) < p).astype(float)
        parts.append(
            pd.DataFrame(
                {
                    "model": np.repeat([f"m{i}" for i in range(datasets)], n),
                    "task": task,
                    "length": 4096,
                    "index": np.tile(np.arange(n), datasets),
                    "score": scores.ravel(),
                }
            )
        )
    avgs = length_averages(pd.concat(parts), n_boot=1000)
    truth = np.mean(ps)
    covered = ((avgs["lo"] <= truth) & (truth <= avgs["hi"])).mean()
    assert 0.88 <= covered <= 0.995


def test_length_averages_use_one_task_set_at_every_length() -> None:
    """A run stopped early: t2 ran only at 4K. Averaging what ran would compare t1+t2 at 4K with t1 alone at 8K."""
    rows = [("M", "t1", L, i, s) for L in (4096, 8192) for i, s in enumerate([1, 0, 1, 0])]
    rows += [("M", "t2", 4096, i, 0) for i in range(4)]
    avgs = length_averages(frame(rows)).set_index("length")
    assert avgs["mean"].tolist() == [0.5, 0.5]  # t1 only, at both lengths
    assert (avgs["n_tasks"] == 1).all() and (avgs["n_tasks_all"] == 2).all()
    assert avgs.loc[4096, "task_set"].startswith("1 of 2 tasks")
    # nothing in common: withheld, with the reason
    split = length_averages(frame([("M", "a", 4096, 0, 1.0), ("M", "b", 8192, 0, 1.0)]))
    assert split["mean"].isna().all() and split["note"].str.startswith("withheld").all()


def test_category_table(small: pd.DataFrame) -> None:
    extra = frame([("M", "t3", 4096, 0, 1.0), ("M", "t3", 8192, 0, 0.0)]).assign(
        category="retrieval"
    )
    cats = category_table(pd.concat([small, extra]))
    # retrieval at 4K: mean(t1 = 0.75, t3 = 1.0) = 0.875; at 8K: mean(0.5, 0.0) = 0.25.
    assert cats.loc[("M", "retrieval"), 4096] == pytest.approx(0.875)
    assert cats.loc[("M", "retrieval"), 8192] == pytest.approx(0.25)
    assert cats.loc[("M", "retrieval"), "avg"] == pytest.approx((0.875 + 0.25) / 2)
    assert cats.loc[("M", "aggregation"), "avg"] == pytest.approx((0.0 + 1.0) / 2)


def _avgs(
    model: str, lengths: list[int], means: list[float], lo: list[float] | None = None
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model": model,
            "length": lengths,
            "mean": means,
            "lo": lo if lo is not None else np.nan,
            "hi": np.nan,
            "run_ids": "r-" + model,
        }
    )


LENGTHS = [4096, 8192, 16384, 32768]


def test_effective_length_threshold_edges() -> None:
    avgs = pd.concat(
        [
            _avgs("equal", LENGTHS, [0.95, 0.856, 0.95, 0.95]),  # exactly 85.6 is not above
            _avgs("dip", LENGTHS, [0.95, 0.90, 0.80, 0.99]),  # recovery after a dip is ignored
            _avgs("none", LENGTHS, [0.85, 0.99, 0.99, 0.99]),  # shortest fails
            _avgs(
                "all", LENGTHS, [0.90, 0.90, 0.90, 0.86], lo=[0.88, 0.86, 0.85, 0.80]
            ),  # all pass; CI supports 8K
        ]
    )
    eff = effective_length(avgs, threshold=85.6, rule="contiguous").set_index("model")
    assert eff.loc["equal", "effective_length"] == 4096
    assert eff.loc["dip", "effective_length"] == 8192
    assert pd.isna(eff.loc["none", "effective_length"])
    assert eff.loc["all", "effective_length"] == 32768 and eff.loc["all", "passes_all"]
    assert eff.loc["all", "effective_length_lower"] == 8192
    assert not eff.loc["dip", "lower_known"] and pd.isna(eff.loc["dip", "effective_length_lower"])
    default = effective_length(avgs, threshold=85.6).set_index("model")  # the paper's rule: max length above
    assert default.loc["dip", "effective_length"] == 32768
    assert default.loc["equal", "effective_length"] == 32768  # 8K fails at exactly 85.6, longer lengths pass
    assert pd.isna(default.loc["none", "effective_length"]) is False and default.loc["none", "effective_length"] == 32768


def test_resolve_threshold_specs() -> None:
    avgs = pd.concat([_avgs("Llama@2=7B", [4096, 8192], [0.856, 0.5]), _avgs("X", [4096], [0.9])])
    assert resolve_threshold(avgs, 85.6) == 85.6
    assert resolve_threshold(avgs, "70") == 70.0
    assert resolve_threshold(avgs, "model=Llama@2=7B@4096") == pytest.approx(85.6)
    assert resolve_threshold(avgs, "model=Llama@2=7B@8K") == pytest.approx(50.0)
    assert resolve_threshold(avgs, "run=r-X@4K") == pytest.approx(90.0)
    with pytest.raises(ValueError, match="no model named 'Nope'"):
        resolve_threshold(avgs, "model=Nope@4K")
    with pytest.raises(ValueError, match="has no score at 16384"):
        resolve_threshold(avgs, "model=X@16K")
    with pytest.raises(ValueError, match="0..100"):
        resolve_threshold(avgs, 185)
    with pytest.raises(ValueError, match="expected a number"):
        resolve_threshold(avgs, "Llama")


def test_weighted_averages_non_contiguous_lengths_and_ties() -> None:
    lengths = [4096, 16384, 131072]  # weights 1, 2, 3 however far apart the lengths are
    avgs = pd.concat(
        [
            _avgs("A", lengths, [0.9, 0.6, 0.3]),
            _avgs("B", lengths, [0.9, 0.6, 0.3]),
            _avgs("C", lengths, [0.5, 0.5, 0.5]),
            _avgs("short", [4096], [1.0]),
        ]
    )
    w = weighted_averages(avgs).set_index("model")
    assert w.loc["A", "avg"] == pytest.approx(0.6)
    assert w.loc["A", "wavg_inc"] == pytest.approx((1 * 0.9 + 2 * 0.6 + 3 * 0.3) / 6)  # 0.5
    assert w.loc["A", "wavg_dec"] == pytest.approx((3 * 0.9 + 2 * 0.6 + 1 * 0.3) / 6)  # 0.7
    # inc: C (0.5) ties A and B (0.5): all rank 1. dec: A = B = 0.7 rank 1, C ranks 3rd.
    assert w.loc[["A", "B", "C"], "rank_inc"].tolist() == [1, 1, 1]
    assert w.loc[["A", "B", "C"], "rank_dec"].tolist() == [1, 1, 3]
    assert w.loc[["A", "B", "C"], "rank_avg"].tolist() == [1, 1, 3]
    assert not w.loc["short", "ranked"] and pd.isna(w.loc["short", "rank_dec"])


def test_depth_length_matrix_snaps_to_bins() -> None:
    df = frame(
        [
            ("M", "niah/g", 4096, 0, 1.0, 10.2),
            ("M", "niah/g", 4096, 1, 0.0, 9.8),
            ("M", "niah/g", 4096, 2, 1.0, 50.1),
            ("M", "niah/g", 8192, 0, 0.0, 49.9),
            ("M", "other", 4096, 0, 0.0, 10.0),
        ],
        columns=("model", "task", "length", "index", "score", "depth"),
    )
    m = depth_length_matrix(df, "niah/g", bins=[10, 50, 90])
    assert m.loc[("M", 10.0), 4096] == pytest.approx(0.5)
    assert m.loc[("M", 50.0), 4096] == 1.0 and m.loc[("M", 50.0), 8192] == 0.0
    assert pd.isna(m.loc[("M", 10.0), 8192])
    assert depth_length_matrix(df, "niah/g").index.get_level_values("depth").tolist() == [
        10.0,
        50.0,
    ]


def test_position_curve() -> None:
    df = frame(
        [
            ("M", "kv", 4096, i, s, pos)
            for i, (s, pos) in enumerate([(1, 0), (1, 0), (0, 1), (1, 1), (0, 2)])
        ],
        columns=("model", "task", "length", "index", "score", "position"),
    )
    curve = position_curve(df, "kv", n_boot=200).set_index("position")
    assert curve["mean"].tolist() == [1.0, 0.5, 0.0]
    assert curve["n"].tolist() == [2, 2, 1]
    assert curve.loc[0, "hi"] == 1.0 and curve.loc[0, "lo"] == pytest.approx(0.025 ** 0.5)


def test_paired_comparison_matches_and_counts() -> None:
    a = [("A", "t", 4096, i, s) for i, s in enumerate([1, 1, 0, 1, 1])]  # index 4 unmatched
    b = [("B", "t", 4096, i, s) for i, s in enumerate([0, 1, 0, 0])]
    b.append(("B", "t", 4096, 9, 1))  # index 9 unmatched
    a += [("A", "u", 8192, i, 1) for i in range(3)]
    b += [("B", "u", 8192, i, 1) for i in range(3)]
    comp = paired_comparison(frame(a + b), model_a="A", model_b="B")
    cells = comp.cells.set_index(["task", "length"])
    # t@4K: differences over matched indices 0..3 = [1, 0, 0, 1] -> 0.5; two discordant pairs, both for A
    assert cells.loc[("t", 4096), "diff"] == pytest.approx(0.5)
    assert cells.loc[("t", 4096), ["n", "n_discordant"]].tolist() == [4, 2]
    assert cells.loc[("t", 4096), "p"] == pytest.approx(sps.binomtest(2, 2, 0.5).pvalue)  # exact sign test: 0.5
    assert cells.loc[("u", 8192), ["diff", "n_discordant", "p"]].tolist() == [0.0, 0, 1.0]
    assert comp.overall == pytest.approx(0.25)  # cells weigh equally: (0.5 + 0) / 2
    assert (comp.n_pairs, comp.n_discordant, comp.n_unmatched_a, comp.n_unmatched_b) == (7, 2, 1, 1)
    assert comp.by_length.set_index("length").loc[4096, "diff"] == pytest.approx(0.5)
    assert comp.p_value > 0.05 and comp.verdict.startswith("no significant difference between A and B")


def test_pairs_never_cross_seeds() -> None:
    """Index 0 under seed 1 and index 0 under seed 2 are different samples (different needles)."""
    a = frame([("A", "t", 4096, 0, 1.0)]).assign(seed=1)
    b = frame([("B", "t", 4096, 0, 0.0)]).assign(seed=2)
    with pytest.raises(ValueError, match="share no"):
        paired_comparison(pd.concat([a, b]), model_a="A", model_b="B")
    same = paired_comparison(pd.concat([a, b.assign(seed=1)]), model_a="A", model_b="B")
    assert same.n_pairs == 1


def test_paired_comparison_needs_samples() -> None:
    df = pd.concat(
        [
            frame([("A", "t", 4096, 0, 1.0)]),
            frame([("P", "avg", 4096, 0, 0.5)]).assign(source="reported"),
        ]
    )
    with pytest.raises(ValueError, match="only reported rows"):
        paired_comparison(df, model_a="A", model_b="P")
    with pytest.raises(ValueError, match="no rows for model 'Z'"):
        paired_comparison(df, model_a="A", model_b="Z")


def test_paired_interval_covers_the_difference_and_is_withheld_when_few_pairs_differ() -> None:
    """The overall Δ gets the 95% interval inverted from its sign-flip test; with few differing pairs it gets none."""
    rng = np.random.default_rng(7)
    rows = []
    for task, p_a, p_b in (("t", 0.8, 0.4), ("u", 0.6, 0.5)):
        for i in range(60):
            rows += [("A", task, 4096, i, float(rng.random() < p_a)), ("B", task, 4096, i, float(rng.random() < p_b))]
    comp = paired_comparison(frame(rows), model_a="A", model_b="B")
    assert comp.ci is not None and comp.n_discordant >= 10
    lo, hi = comp.ci
    assert lo < comp.overall < hi and hi - lo > 0
    # the interval's width is that of a mean of two cell means of 60 paired differences each: about 2 x 1.96 x SE
    diffs = frame(rows).pivot_table(index=["task", "index"], columns="model", values="score")
    d = (diffs["A"] - diffs["B"]).groupby(level="task")
    se = np.sqrt(sum(g.var(ddof=0) / len(g) for _, g in d)) / 2
    assert (hi - lo) == pytest.approx(2 * 1.96 * se, rel=0.2)

    few = [("A", "t", 4096, i, 1.0) for i in range(20)] + [("B", "t", 4096, i, 1.0 if i > 2 else 0.0) for i in range(20)]
    comp = paired_comparison(frame(few), model_a="A", model_b="B")
    assert comp.ci is None and "3 of the pairs differ" in comp.ci_note


@pytest.mark.slow  # 400 Monte-Carlo replicates (~40 s loaded); the paired calibration check stays in the default tier
def test_paired_interval_keeps_its_coverage_with_two_pairs_per_cell() -> None:
    """Small runs score 1-4 samples per cell; the interval must still cover the true Δ about 95% of the time
    (a bootstrap within cells covers ~85% here: it is too narrow by √((n-1)/n))."""
    from ctxbench.leaderboard.aggregate import paired_interval

    rng = np.random.default_rng(11)
    cells, per_cell, true_delta, covered, reps = 24, 2, 0.1, 0, 400
    index = pd.MultiIndex.from_tuples([(f"t{c}", 1024, i) for c in range(cells) for i in range(per_cell)],
                                      names=["task", "length", "index"])
    for _ in range(reps):
        b = rng.normal(0, 1, len(index))
        a = b + true_delta + rng.normal(0, 1, len(index))
        (lo, hi), _ = paired_interval(pd.DataFrame({"a": a, "b": b}, index=index), n_discordant=len(index))
        covered += lo <= true_delta <= hi
    assert 0.92 <= covered / reps <= 0.98
