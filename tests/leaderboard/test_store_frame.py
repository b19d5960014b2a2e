"""The store as the board reads it: each cell's plan, one count per sample, one model per fingerprint, one reader."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from ctxbench.harness.core.store import RunStore
from ctxbench.harness.core.types import RunRecord
from ctxbench.leaderboard.report import build_report
from ctxbench.leaderboard.store_frame import load_store


def make_run(root, run_id, *, label="M", fp="dir:aaaa1111", seed=42, plan=None, rows=(), created="2026-01-01T00:00:00"):
    store = RunStore(root, run_id)
    rec = RunRecord(run_id=run_id, created=created, suite="s", suite_config={}, model=f"/models/{label}", backend="echo",
                    backend_args={}, tokenizer="t", tokenizer_fingerprint="tok", template="chat", seed=seed,
                    truncation="refuse", versions={"ctxbench": "0.1.0", "ctxbench_commit": "abc123"}, command=["ctxbench"],
                    label=label, model_fingerprint=fp, plan=plan or {}, sessions=[{"started": created}])
    store.dir.mkdir(parents=True, exist_ok=True)
    store.record_path.write_text(json.dumps(dataclasses.asdict(rec)))
    store.append([row(*r) for r in rows])
    return store


def row(task, length, index, score, prompt_hash="p", error=None):
    return {"id": f"{task}@{length}#{index}", "task": task, "length": length, "index": index, "score": score,
            "prompt_hash": f"{prompt_hash}{index}", "error": error, "prediction": "", "answers": ["x"], "empty": False}


def cell(frames, model, task, length):
    c = frames.cells.set_index(["model", "task", "length"]).loc[(model, task, length)]
    return int(c["planned"]), int(c["done"]), int(c["errored"]), int(c["pending"])


def test_a_sample_scored_in_two_runs_of_one_model_counts_once(tmp_path):
    plan = {"t": {"512": 2}}
    make_run(tmp_path, "r1", plan=plan, rows=[("t", 512, 0, 1.0), ("t", 512, 1, 0.0)])
    make_run(tmp_path, "r2", plan=plan, rows=[("t", 512, 0, 1.0)], created="2026-01-02T00:00:00")
    frames = load_store(tmp_path)
    assert len(frames.scores) == 2  # not 3
    assert cell(frames, "M", "t", 512) == (2, 2, 0, 0)
    assert any("counts once" in n for n in frames.notes)


def test_plan_gives_the_denominator_and_failures_are_counted(tmp_path):
    make_run(tmp_path, "r1", plan={"t": {"512": 5}, "u": {"512": 2}},
             rows=[("t", 512, 0, 1.0), ("t", 512, 1, None, "p", "HTTP 503: busy"), ("t", 512, 2, 0.0)])
    frames = load_store(tmp_path)
    assert cell(frames, "M", "t", 512) == (5, 2, 1, 2)
    assert cell(frames, "M", "u", 512) == (2, 0, 0, 2)  # planned, never run: still on the board
    errors = frames.cells.set_index("task").loc["t", "errors"]
    assert errors == "HTTP 503: 1"


def test_a_rerun_that_fixes_a_failure_replaces_it(tmp_path):
    store = make_run(tmp_path, "r1", plan={"t": {"512": 1}}, rows=[("t", 512, 0, None, "p", "timeout")])
    store.append([row("t", 512, 0, 1.0)])
    assert cell(load_store(tmp_path), "M", "t", 512) == (1, 1, 0, 0)


def test_different_seeds_are_different_samples(tmp_path):
    make_run(tmp_path, "r1", seed=1, plan={"t": {"512": 1}}, rows=[("t", 512, 0, 1.0, "a")])
    make_run(tmp_path, "r2", seed=2, plan={"t": {"512": 1}}, rows=[("t", 512, 0, 0.0, "b")])
    frames = load_store(tmp_path)
    assert cell(frames, "M", "t", 512) == (2, 2, 0, 0)
    assert sorted(frames.scores["seed"]) == [1, 2]


def test_one_label_with_two_weights_is_two_models(tmp_path):
    make_run(tmp_path, "r1", fp="dir:aaaa1111", plan={"t": {"512": 1}}, rows=[("t", 512, 0, 1.0)])
    make_run(tmp_path, "r2", fp="dir:bbbb2222", plan={"t": {"512": 1}}, rows=[("t", 512, 0, 0.0)])
    frames = load_store(tmp_path)
    assert sorted(frames.scores["model"]) == ["M [aaaa1111]", "M [bbbb2222]"]
    assert any("2 different models" in n for n in frames.notes)


def test_corrupt_lines_are_skipped_named_and_counted(tmp_path):
    store = make_run(tmp_path, "r1", plan={"t": {"512": 3}}, rows=[("t", 512, 0, 1.0)])
    with open(store.samples_path, "ab") as f:
        f.write(b"garbage{\n" + json.dumps({"task": "t", "score": 1.0}).encode() + b"\n")
    store.append([row("t", 512, 2, 0.0)])
    with pytest.warns(UserWarning) as warned:
        frames = load_store(tmp_path)
    messages = [str(w.message) for w in warned]
    assert any("samples.jsonl:2: skipped a corrupt line" in m for m in messages)
    assert any("samples.jsonl:3: skipped a corrupt line (without id)" in m for m in messages)
    assert [w.rsplit(":", 1)[1] for w in frames.skipped] == ["2", "3"]  # garbage, and a row without an id
    assert cell(frames, "M", "t", 512) == (3, 2, 0, 1)


def test_board_marks_partial_and_failed_cells_and_keeps_task_sets_equal(tmp_path):
    """The issue's interrupted run: a board that averaged what ran would show a rise with length."""
    plan = {"a": {"1024": 4, "2048": 4}, "b": {"1024": 4, "2048": 4}}
    make_run(tmp_path, "r1", label="Half", plan=plan, rows=[
        *[("a", 1024, i, 0.0) for i in range(4)], *[("b", 1024, i, 0.0) for i in range(4)],
        *[("b", 2048, i, 1.0) for i in range(3)], ("b", 2048, 3, None, "p", "timeout")])
    make_run(tmp_path, "r2", label="Full", fp="dir:ffff", plan=plan,
             rows=[(t, L, i, 1.0) for t in "ab" for L in (1024, 2048) for i in range(4)])
    frames = load_store(tmp_path)
    report = build_report(frames.scores, out_dir=tmp_path / "board", cells=frames.cells, runs=frames.runs, n_boot=50)
    lengths = pd.DataFrame(json.loads(report.json.read_text())["lengths"]).set_index(["model", "length"])
    # Half's average uses task b only, at both lengths (a never ran at 2K), and says so
    assert lengths.loc[("Half", 1024), "mean"] == pytest.approx(0.0) and lengths.loc[("Half", 2048), "mean"] == pytest.approx(100.0)
    assert lengths.loc[("Half", 1024), "task_set"].startswith("1 of 2 tasks")
    assert lengths.loc[("Half", 2048), "status"] == "errored" and lengths.loc[("Half", 2048), "errored"] == 1
    models = {m["model"]: m for m in json.loads(report.json.read_text())["models"]}
    assert models["Half"]["rank_avg"] is None and models["Full"]["rank_avg"] is None  # never ranked on other tasks
    md = report.markdown.read_text()
    assert "n=3/4 ! 1 failed" in md and "— n=0/4 \\*" in md  # failed (not run again yet); never run
    assert "incomplete: fewer samples scored than planned" in md and "No ranks" in md
    csv = pd.read_csv(report.csv)
    a2k = csv[(csv["model"] == "Half") & (csv["task"] == "a") & (csv["length"] == 2048)].iloc[0]
    assert (a2k["n"], a2k["planned"], a2k["status"]) == (0, 4, "incomplete")
    avg = csv[(csv["model"] == "Half") & (csv["task"] == "avg")].set_index("length")
    assert avg.loc[2048, ["n", "planned", "errored", "n_tasks", "n_tasks_all"]].tolist() == [3, 4, 1, 1, 2]
    assert avg.loc[2048, "status"] == "errored" and avg.loc[2048, "task_set"].startswith("1 of 2 tasks")
    summary = (tmp_path / "board" / "summary" / "Half" / "2048" / "summary.csv").read_text().splitlines()
    assert summary[0] == "0,1,2" and summary[1] == "Tasks,a,b" and summary[4] == "Samples,0/4,3/4" and summary[5] == "Failed,0,1"
    # the provenance header names the runs, the fingerprints and the ctxbench commit that made them
    for text in ("r1", "r2", "dir:ffff", "abc123", "samples per cell: 4", "seeds: 42"):
        assert text in md, text


def test_the_terminal_table_shows_n_marks_and_one_task_set(tmp_path):
    from rich.console import Console

    from ctxbench.harness.summary import table

    plan = {"a": {"1024": 2, "2048": 2}, "b": {"1024": 2, "2048": 2}}
    store = make_run(tmp_path, "r1", plan=plan, rows=[("a", 1024, 0, 1.0), ("a", 1024, 1, 1.0), ("b", 1024, 0, 0.0),
                                                      ("b", 1024, 1, None, "p", "HTTP 503: x"), ("b", 2048, 0, 1.0)])
    console = Console(record=True, width=200)
    console.print(table(store, title="t"))
    text = console.export_text()
    assert "n=2 " in text or "n=2\n" in text or "n=2 │" in text  # a complete cell
    assert "n=1/2 ! 1 failed" in text and "n=0/2 *" in text and "n=1/2 *" in text
    assert "average (1 of 2 tasks (those scored at every length))" in text  # b only: a never ran at 2K
    assert "incomplete: fewer samples scored than planned" in text and "failed samples are not in the score" in text


def test_the_board_shows_what_trained_each_checkpoint(tmp_path):
    """Issue 13 §8: answer-token counts and generator drop rates stand beside the scores, read from the run records."""
    plan = {"t": {"512": 2}}
    rows = [("t", 512, 0, 1.0), ("t", 512, 1, 0.0)]
    trained = make_run(tmp_path / "runs", "r-trained", label="S2", fp="dir:bbbb2222", plan=plan, rows=rows)
    make_run(tmp_path / "runs", "r-base", label="base", plan=plan, rows=rows)
    summary = {"answer_tokens": 1234, "unit": "QA", "requested": 14, "kept": 2, "drops": {"diverse:no_object": 7,
                                                                                         "hierarchical:no_object": 5}}
    training = {"trainer": "hqa_sft", "run_id": "train-hqa-1", "base_model": "/ck/s1", "steps": 3, "data_hash": "d1",
                "data_summary": summary}
    rec = json.loads(trained.record_path.read_text())
    trained.record_path.write_text(json.dumps({**rec, "training": training}))
    frames = load_store(tmp_path / "runs")
    report = build_report(frames.scores, out_dir=tmp_path / "board", cells=frames.cells, runs=frames.runs, n_boot=50)
    md = report.markdown.read_text().replace("\\_", "_")  # markdown escapes underscores
    section = md[md.index("## Training"):]
    (line,) = [ln for ln in section.splitlines() if ln.startswith("| S2 |")]
    dropped = summary["requested"] - summary["kept"]
    assert "| hqa_sft | train-hqa-1 | /ck/s1 | 3 | d1 | 1,234 |" in line
    assert f"{dropped} of 14 QAs ({round(100 * dropped / 14)}%)" in line and "diverse:no_object 7" in line
    assert not any(ln.startswith("| base |") for ln in section.split("## ", 2)[1].splitlines())  # untrained: no row
    assert "Training" in report.html.read_text()


def test_a_planned_perplexity_task_that_never_ran_is_not_pending_on_the_board(tmp_path):
    """The record names its loss-scored tasks: with no perplexity row at all, the board still leaves ppl/* out."""
    store = make_run(tmp_path, "r1", plan={"t": {"512": 2}, "ppl/full": {"512": 3}}, rows=[("t", 512, 0, 1.0)])
    rec = json.loads(store.record_path.read_text())
    frames = load_store(tmp_path)
    assert "ppl/full" in set(frames.cells["task"])  # without the record's word it looks like a pending task
    store.record_path.write_text(json.dumps({**rec, "losses": ["ppl/full"]}))
    frames = load_store(tmp_path)
    assert "ppl/full" not in set(frames.cells["task"])
    assert cell(frames, "M", "t", 512) == (2, 1, 0, 1)
    (run,) = frames.runs.itertuples()
    assert (run.planned, run.done, run.errored) == (2, 1, 0)
