"""Sequential runs that refuse what they cannot guarantee, or guarantee it (issue 31 items 4-5 and the sequential
seam, issue 32 Medium 3 and 7, Low "another --alpha"), through the CLI in this process with the echo backend.

- tasks with unequal N at one length bet only on the rounds every task has, then score the rest at fixed N;
- clustered tasks (a depth grid's shared haystack) are refused in one line;
- --vs refuses the run itself, other task arguments and other prompts;
- a failed sample keeps its length open, and the rerun retries it;
- a resume with another --alpha is refused;
- the anytime interval is shown only on the task set the sequential run averaged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbench.harness.backends.echo import EchoBackend
from ctxbench.harness.core.types import Prediction

ECHO = ["score", "--backend", "echo"]


@pytest.fixture
def cli(ctxbench, tmp_path, monkeypatch, data_dir):
    """`ctxbench score ...` in tmp_path with the shared test data."""
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> tuple[int, str, str]:
        extra = ["--data-dir", str(data_dir)] if args[0] == "score" else []
        return ctxbench(*args, *extra)

    return run


def runs(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "runs"
    return {p.name: p for p in root.iterdir() if (p / "record.json").is_file()} if root.is_dir() else {}


def state(run: Path) -> dict:
    return json.loads((run / "adaptive.json").read_text())


def rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines() if line.strip()]


def one_line_refusal(code: int, err: str, start: str) -> None:
    lines = [x for x in err.strip().splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {start}"), err


MIXED = """name: mixed
lengths: [512]
samples: 20
tasks:
  - ruler/niah_single_1
  - {task: kv/retrieval, args: {num_pairs: 3, positions: 3, samples_per_position: 2}}
"""


def test_unequal_n_bets_on_the_smallest_n_then_scores_the_rest_at_fixed_n(cli, tmp_path):
    (tmp_path / "mixed.yaml").write_text(MIXED)  # 20 samples of niah beside 6 of kv at one length
    code, out, err = cli(*ECHO, "--suite", "mixed.yaml", "--backend-arg", "accuracy=0.5", "--until", "effective-length")
    assert code == 0, err
    (run,) = runs(tmp_path).values()
    at = state(run)["lengths"]["512"]
    assert (at["n"], at["n_max"], at["stopped"], at["rounds"]) == (6, 20, "reached N", 6), at  # rounds stop at 6
    assert at["lo"] <= at["hi"]
    assert len(rows(run)) == 26  # then niah's other 14 samples at fixed N, not as rounds of niah alone
    assert "at fixed N" in out
    again = cli(*ECHO, "--suite", "mixed.yaml", "--backend-arg", "accuracy=0.5", "--until", "effective-length")
    assert again[0] == 0 and len(rows(run)) == 26


def test_a_depth_grid_is_refused_in_one_line_before_anything_is_written(cli, tmp_path):
    code, _, err = cli(*ECHO, "--tasks", "niah/single", "--lengths", "512", "--until", "effective-length")
    one_line_refusal(code, err, "--until: niah/single's samples share a haystack")
    assert not runs(tmp_path)


def test_vs_refuses_itself_other_task_arguments_and_other_prompts(cli, tmp_path):
    base = [*ECHO, "--lengths", "512", "--samples", "40", "--backend-arg", "accuracy=0.0"]
    assert cli(*base, "--tasks", "ruler/niah_single_1", "--label", "a", "--until", "effective-length")[0] == 0
    (earlier,) = runs(tmp_path).values()  # stopped early: the same command with --vs for --until is this run
    code, _, err = cli(*base, "--tasks", "ruler/niah_single_1", "--label", "a", "--vs", f"runs/{earlier.name}")
    one_line_refusal(code, err, f"--vs: {earlier.name} is this run itself")

    (tmp_path / "other.yaml").write_text("name: other\nlengths: [512]\nsamples: 3\ntasks:\n"
                                         "  - {task: ruler/niah_single_1, args: {value_type: words}}\n")
    code, _, err = cli(*ECHO, "--suite", "other.yaml", "--label", "b", "--vs", f"runs/{earlier.name}")
    one_line_refusal(code, err, f"--vs: {earlier.name} scored ruler/niah_single_1 with other task arguments (value_type)")

    lines = (earlier / "samples.jsonl").read_text().splitlines()
    (earlier / "samples.jsonl").write_text("\n".join(line.replace('"prompt_hash": "', '"prompt_hash": "0') for line in lines)
                                           + "\n")  # the earlier run's prompts are not this run's
    code, _, err = cli(*base, "--tasks", "ruler/niah_single_1", "--label", "c", "--vs", f"runs/{earlier.name}")
    one_line_refusal(code, err, f"--vs: {earlier.name}'s prompt for ruler/niah_single_1@512#0 differs")
    assert sorted(runs(tmp_path)) == [earlier.name]  # nothing written for a refused run


def test_a_resume_with_another_alpha_is_refused(cli, tmp_path):
    command = [*ECHO, "--tasks", "ruler/niah_single_1,ruler/niah_single_2", "--lengths", "512", "--samples", "40",
               "--backend-arg", "accuracy=0.0", "--until", "effective-length"]
    assert cli(*command)[0] == 0
    (run,) = runs(tmp_path).values()
    before = (run / "samples.jsonl").read_text()
    code, _, err = cli(*command, "--alpha", "0.2")
    one_line_refusal(code, err, "--alpha: this run's verdicts were computed at alpha 0.05")
    assert (run / "samples.jsonl").read_text() == before


def test_a_failed_sample_past_the_stop_keeps_the_length_open_and_the_rerun_retries_it(cli, tmp_path, monkeypatch):
    """Eight rounds per turn; the length settles below after 4, while round 6 of one task failed: it must not stop
    for good (the rerun would say "every length has stopped" and retry nothing)."""
    flaky = "ruler/niah_single_2@512#6"
    healthy = EchoBackend.generate

    def failing(self, requests):
        return [Prediction(r.sample_id, "", 0, 0, 0.0, error="server: 503") if r.sample_id == flaky else p
                for r, p in zip(requests, healthy(self, requests))]

    command = [*ECHO, "--tasks", "ruler/niah_single_1,ruler/niah_single_2", "--lengths", "512", "--samples", "40",
               "--backend-arg", "accuracy=0.0", "--backend-arg", "batch_size=16", "--until", "effective-length"]
    monkeypatch.setattr(EchoBackend, "generate", failing)
    code, out, err = cli(*command)
    assert code != 0 and "failed" in err, err
    (run,) = runs(tmp_path).values()
    at = state(run)["lengths"]["512"]
    assert (at["stopped"], at["settled"]) == ("failed samples", False), at
    assert "rerun the same command to retry them" in out

    monkeypatch.setattr(EchoBackend, "generate", healthy)
    code, out, err = cli(*command)
    assert code == 0 and "every length has stopped" not in err, err
    at = state(run)["lengths"]["512"]
    assert (at["stopped"], at["decision"]) == ("settled", "below"), at
    latest = {r["id"]: r for r in rows(run)}
    assert latest[flaky].get("score") is not None and not latest[flaky].get("error")
    assert "every length has stopped" in cli(*command)[2]


def test_the_anytime_interval_is_shown_only_on_the_sequential_runs_task_set(cli, tmp_path):
    from ctxbench.leaderboard.aggregate import SEQUENTIAL, length_averages
    from ctxbench.leaderboard.store_frame import load_store

    two = "ruler/niah_single_1,ruler/niah_single_2"
    assert cli(*ECHO, "--tasks", two, "--lengths", "512", "--samples", "40", "--label", "m",
               "--backend-arg", "accuracy=0.0", "--until", "effective-length")[0] == 0
    frames = load_store(tmp_path / "runs")
    (alone,) = length_averages(frames.scores, frames.cells, n_boot=50).itertuples()
    assert alone.method == SEQUENTIAL  # the sequential run on its own: its anytime interval

    assert cli(*ECHO, "--tasks", f"{two},ruler/niah_single_3", "--lengths", "512", "--samples", "6", "--label", "m",
               "--backend-arg", "accuracy=0.0")[0] == 0  # a full run of three tasks beside it
    frames = load_store(tmp_path / "runs")
    (both,) = length_averages(frames.scores, frames.cells, n_boot=50).itertuples()
    assert both.n_tasks == 3 and both.method != SEQUENTIAL and both.lo <= both.mean <= both.hi, both
