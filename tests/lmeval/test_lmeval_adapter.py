"""lm-eval over ctxbench backends, without a model: the LM adapter, MMLU rows and categories, aggregates, board."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("lm_eval")


def test_rolling_windows_are_lm_evals():
    from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

    from ctxbench.harness.backends.hf_loglik import rolling_windows

    for n in (0, 1, 5, 16, 17, 40, 100):
        toks = list(range(100, 100 + n))
        for max_len in (1, 4, 16, 64):
            want = [make_disjoint_window(w) for w in get_rolling_token_windows(toks, 7, max_len, 1)]
            assert rolling_windows(toks, 7, max_len) == want, (n, max_len)


def test_generate_until_cuts_at_stop_sequences(make_stub):
    from lm_eval.api.instance import Instance

    from ctxbench.tasks.lmeval.adapter import CtxbenchLM

    backend = make_stub(lambda prompt: " 42\n\nQuestion: next")
    lm = CtxbenchLM(backend)
    reqs = [Instance("generate_until", {}, ("Q: 6*7?\nA:", {"until": ["\n\n", "Question:"], "max_gen_toks": 12}), 0),
            Instance("generate_until", {}, ("Q: 6*7?\nA:", {"until": "Question:"}), 1)]
    assert lm.generate_until(reqs) == [" 42", " 42\n\n"]
    assert [r.max_new_tokens for r in backend.generated] == [12, 256]  # lm-eval's default budget
    assert backend.generated[0].prompt == "Q: 6*7?\nA:"


def test_loglikelihood_needs_a_scoring_backend(make_stub, smol_tokenizer):
    from lm_eval.api.instance import Instance

    from ctxbench.harness.core.errors import ConfigError
    from ctxbench.tasks.lmeval.adapter import CtxbenchLM

    req = [Instance("loglikelihood", {}, ("Answer:", " A"), 0)]
    assert CtxbenchLM(make_stub()).loglikelihood(req) == [(0.0, True)]

    class GenerateOnly:  # e.g. a chat-completion API
        name = "api"
        tokenizer = smol_tokenizer

    with pytest.raises(ConfigError, match="'api': cannot compute log-likelihoods"):
        CtxbenchLM(GenerateOnly()).loglikelihood(req)


def test_lmeval_tasks_are_registered_with_strict_args():
    from ctxbench.harness.core.config import TaskSpec, build_task
    from ctxbench.harness.core.errors import ConfigError

    t = build_task(TaskSpec(task="lmeval/mmlu", args={"num_fewshot": 5, "limit": 3}))
    assert t.external and t.lmeval_tasks() == ["mmlu"] and t.args.num_fewshot == 5
    with pytest.raises(ConfigError, match="num_fewshots"):
        build_task(TaskSpec(task="lmeval/mmlu", args={"num_fewshots": 5}))
    with pytest.raises(ConfigError, match="args.tasks: required"):
        build_task(TaskSpec(task="lmeval/custom")).lmeval_tasks()
    assert build_task(TaskSpec(task="lmeval/custom", args={"tasks": ["arc_easy"]})).lmeval_tasks() == ["arc_easy"]


def test_unknown_lmeval_task_is_a_config_error(make_stub, tiny_mmlu):
    from ctxbench.harness.core.errors import ConfigError
    from ctxbench.tasks.lmeval.adapter import evaluate

    with pytest.raises(ConfigError, match="mmlu_astronomy"):
        evaluate(make_stub(), ["mmlu_astronomyy"], include_path=str(tiny_mmlu), include_defaults=False)


def test_tiny_mmlu_rows_categories_and_stderr(make_stub, tiny_mmlu_paths, tmp_path):
    """lm-eval's real MMLU groups over local subjects; the stub always answers A."""
    from ctxbench.tasks.lmeval.results import read_aggregates, write_aggregates
    from ctxbench.tasks.lmeval.task import LMEvalArgs, LMEvalTask

    task = LMEvalTask("lmeval/mmlu", LMEvalArgs(include_path=tiny_mmlu_paths, builtin_tasks=False))
    rows = task.run_external(backend=make_stub(), renderer=None, limit=None, seed=1, console=None)
    assert len(rows) == 9 and len({r["id"] for r in rows}) == 9
    by = {r["id"]: r for r in rows}
    r = by["lmeval/mmlu_astronomy@0#2"]  # gold A
    assert (r["task"], r["category"], r["length"], r["index"], r["metric"], r["score"]) == (
        "lmeval/mmlu_astronomy", "STEM", 0, 2, "acc", 1.0)
    assert r["prediction"] == "A" and r["answers"] == ["A"] and r["error"] is None and r["prompt_tokens"] > 10
    assert by["lmeval/mmlu_astronomy@0#0"]["score"] == 0.0 and by["lmeval/mmlu_astronomy@0#0"]["answers"] == ["B"]
    assert {r["category"] for r in rows} == {"STEM", "humanities", "social sciences", "other"}
    assert {r["task"]: r["category"] for r in rows}["lmeval/mmlu_world_religions"] == "humanities"

    path = task.write_aggregates(tmp_path, task.last_results)
    agg = read_aggregates(tmp_path)["tasks"]["lmeval/mmlu"]
    assert path.name == "lmeval_results.json"
    mmlu = agg["groups"]["mmlu"]["metrics"]["acc,none"]
    assert mmlu["value"] == pytest.approx(3 / 9)  # weighted by subject size, as lm-eval does
    assert mmlu["stderr"] > 0  # lm-eval's own stderr
    cats = {c: v["acc,none"]["value"] for c, v in agg["mmlu_categories"].items()}
    assert cats == pytest.approx({"STEM": 1 / 3, "humanities": 0.5, "social sciences": 0.0, "other": 0.5})
    assert agg["tasks"]["mmlu_astronomy"]["metrics"]["acc,none"]["stderr"] == pytest.approx((1 / 3 * 2 / 3 / 2) ** 0.5)
    assert "mmlu" not in agg["tasks"]  # groups are not tasks
    write_aggregates(tmp_path, {**agg, "name": "lmeval/other"})  # a second task is merged, not overwriting
    assert set(read_aggregates(tmp_path)["tasks"]) == {"lmeval/mmlu", "lmeval/other"}
    json.loads(path.read_text())  # strict JSON (no NaN)


def test_lmeval_run_is_a_normal_run_on_the_board(make_stub, tiny_mmlu_paths, tmp_path):
    import pandas as pd
    from typer.testing import CliRunner

    from ctxbench.harness.cli import app
    from ctxbench.harness.commands.lmeval import run_lmeval

    store = run_lmeval(model="stub-model", tasks=["mmlu"], out_dir=tmp_path / "runs", backend=make_stub(),
                       task_args={"include_path": tiny_mmlu_paths, "builtin_tasks": False, "bootstrap_iters": 0})
    rec = json.loads(store.record_path.read_text())
    assert rec["suite"] == "lmeval" and rec["model"] == "stub-model" and rec["versions"]["lm_eval"]
    assert (store.dir / "lmeval_results.json").exists() and len(list(store.rows())) == 9
    again = run_lmeval(model="stub-model", tasks=["mmlu"], out_dir=tmp_path / "runs", backend=make_stub(),
                       task_args={"include_path": tiny_mmlu_paths, "builtin_tasks": False, "bootstrap_iters": 0})
    assert again.dir == store.dir and len(list(store.rows())) == 9  # done tasks are not rerun

    res = CliRunner().invoke(app, ["board", "build", "--store", str(tmp_path / "runs"), "--out", str(tmp_path / "board")])
    assert res.exit_code == 0, res.output
    csv = pd.read_csv(tmp_path / "board" / "results.csv")
    # short-context rows stay off the length axis: one row per task at length 0, no per-length "avg"
    assert set(csv["length"]) == {0} and "avg" not in set(csv["task"])
    scores = dict(zip(csv["task"], csv["score"]))
    assert sum(scores.values()) / 4 == pytest.approx(100 * (1 / 3 + 0 + 0.5 + 0.5) / 4, abs=1e-3)
    board = json.loads((tmp_path / "board" / "results.json").read_text())
    assert {t["task"] for t in board["short_context"]["tasks"]} == {
        "lmeval/mmlu_astronomy", "lmeval/mmlu_high_school_geography", "lmeval/mmlu_nutrition", "lmeval/mmlu_world_religions"}
    # the board averages task means (each subject weighs equally), lm-eval weighs subjects by size
    cats = {c["category"]: c["mean"] for c in board["short_context"]["categories"]}
    assert cats == pytest.approx({"STEM": 100 / 3, "humanities": 50.0, "social sciences": 0.0, "other": 50.0})
    assert "lmeval/mmlu_astronomy" in (tmp_path / "board" / "leaderboard.md").read_text().replace("\\_", "_")
