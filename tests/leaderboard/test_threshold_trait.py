"""The effective-length threshold is a trait a task declares when it registers (effective_length="ruler"); the board
asks the registry. RULER's threshold (85.6, Llama-2-7B at 4K) grades ruler/*, the NIAH grids and KV retrieval; a task
that declares none (MRCR, GraphWalks, Oolong, AA-LCR, LongBench Pro, RULER v2, and every family on its own scale)
gets no effective length and the board says why."""

from __future__ import annotations

import pandas as pd
import pytest

from ctxbench.harness.core import registry
from ctxbench.leaderboard.aggregate import length_averages
from ctxbench.leaderboard.ranking import NO_THRESHOLD, effective_length, has_threshold, task_threshold
from ctxbench.leaderboard.report import build_report

GRADED = ("ruler/niah_single_1", "ruler/vt", "niah/single", "niah/multi", "kv/retrieval")
# RULER v2's official scoring (NeMo-Skills chsieh/ruler2 991a7432, ruler2_score.py) is a plain mean of its 12 tasks:
# it defines no threshold or effective length, so AUC@L (and --relative-effective) cover it.
UNGRADED = ("mrcr", "mrcr/2needle", "graphwalks/bfs", "oolong/synth", "aalcr", "longbenchpro/single-hop-fact-qa",
            "ruler2/mk_niah_basic", "longbench2", "judge/qa", "babilong/qa1", "helmet/rag_nq", "nolima/needles",
            "icl/banking77", "infinitebench/passkey", "lmeval/mmlu")


@pytest.mark.parametrize("task", GRADED)
def test_ruler_niah_and_kv_declare_rulers_threshold(task):
    assert registry.task_traits(task).effective_length == "ruler" and has_threshold(task)


@pytest.mark.parametrize("task", UNGRADED)
def test_tasks_on_their_own_scale_declare_none(task):
    assert registry.task_traits(task).effective_length is None and not has_threshold(task)


def test_a_task_set_needs_every_task_graded_and_unknown_names_get_none():
    assert has_threshold("ruler/vt,niah/single,kv/retrieval") and not has_threshold("ruler/vt,mrcr/2needle")
    assert task_threshold("ruler/old_name") == "ruler"  # an unregistered name of a family that agrees: the family's
    assert task_threshold("longbench:few-shot") is None  # a paper's per-task row of a family on its own scale
    assert task_threshold("uninstalled_plugin/needle") is None and task_threshold("hqa/table") is None
    assert has_threshold("reported")  # a paper's own averages are graded as published (RULER's Table 3)


def _scores(model: str, task: str, means: dict[int, float], n: int = 10) -> pd.DataFrame:
    rows = [(model, task, length, i, float(i < round(p * n))) for length, p in means.items() for i in range(n)]
    return pd.DataFrame(rows, columns=["model", "task", "length", "index", "score"])


def test_an_mrcr_only_board_has_no_effective_length_and_says_why(tmp_path):
    df = pd.concat([_scores("MRCR model", "mrcr/2needle", {4096: 1.0, 8192: 0.9}),
                    _scores("RULER model", "ruler/vt", {4096: 1.0, 8192: 0.9})])
    eff = effective_length(length_averages(df, n_boot=50), threshold=85.6).set_index("model")
    assert pd.isna(eff.loc["MRCR model", "effective_length"]) and eff.loc["MRCR model", "withheld"] == NO_THRESHOLD
    assert eff.loc["RULER model", "effective_length"] == 8192
    md = build_report(df, out_dir=tmp_path / "board", n_boot=50).markdown.read_text()
    mrcr_row = next(line for line in md.splitlines() if line.startswith("| MRCR model |"))
    assert f"— ({NO_THRESHOLD})" in mrcr_row
    assert "8K" in next(line for line in md.splitlines() if line.startswith("| RULER model |")).split(" | ")[2]


@pytest.fixture
def plugin_task():
    """A task registered as a plugin registers it (outside ctxbench's packages), taken out again afterwards."""
    name = "threshold_plugin/needle"
    registry.names("task")  # ctxbench's own tasks are in before the plugin's, as when a plugin loads
    registry.register("task", name, effective_length="ruler")(lambda **kw: None)
    yield name
    registry._REGISTRY["task"].pop(name, None)
    registry._INFO.pop(("task", name), None)


def test_a_plugin_task_declaring_the_trait_gets_an_effective_length(plugin_task):
    df = _scores("M", plugin_task, {4096: 1.0, 8192: 1.0, 16384: 0.5})
    eff = effective_length(length_averages(df, n_boot=50), threshold=85.6).set_index("model")
    assert eff.loc["M", "effective_length"] == 8192 and eff.loc["M", "withheld"] == ""
    unloaded = effective_length(length_averages(df.assign(task="other_plugin/needle"), n_boot=50), threshold=85.6)
    assert unloaded["withheld"][0] == NO_THRESHOLD  # the same rows from a plugin that is not installed: no threshold


def test_an_unknown_threshold_is_refused_at_registration():
    with pytest.raises(ValueError, match="effective_length='ruler2'"):
        registry.register("task", "threshold_plugin/bad", effective_length="ruler2")
