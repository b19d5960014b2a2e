"""External tasks (lm-eval) are a schedule of the one loop (issue 33): the loop appends and counts the rows their
harness returns, and the schedule says what to score next, what it saw and whether it is done. No lm-eval here: a
fake external task with the same contract (run_external / is_complete / write_aggregates)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from rich.console import Console

from ctxbench.harness.core.rows import Row
from ctxbench.harness.core.store import RunStore
from ctxbench.harness.run.external import ExternalSchedule
from ctxbench.harness.run.loop import RunOutcome, drive


class FakeExternal:
    """Two rows per run (one without a score, as a perplexity metric's); complete once its aggregates are written."""

    external = True

    def __init__(self, name: str):
        self.name, self.runs = name, 0

    def is_complete(self, run_dir) -> bool:
        return (run_dir / f"{self.name.replace('/', '_')}.json").exists()

    def run_external(self, *, backend, renderer=None, limit=None, seed=42, console=None):
        self.runs += 1
        return [Row(id=f"{self.name}@0#{i}", task=self.name, length=0, index=i, metric="acc",
                    score=None if i else 1.0).to_json() for i in range(2)]

    def write_aggregates(self, run_dir):
        (run_dir / f"{self.name.replace('/', '_')}.json").write_text(json.dumps({"seed": self.runs}))


def _drive(tasks, store):
    ready = SimpleNamespace(renderer=None, plan=SimpleNamespace(suite=SimpleNamespace(seed=1)))
    schedule = ExternalSchedule(tasks, store.dir)
    outcome = RunOutcome(store, planned=0)
    if not schedule.done:
        drive(schedule, backend=object(), ready=ready, store=store, outcome=outcome, console=Console(quiet=True))
    return schedule, outcome


def test_the_loop_appends_and_counts_external_rows_then_the_schedule_is_done(tmp_path):
    store = RunStore(tmp_path, "run")
    store.dir.mkdir(parents=True)
    tasks = [FakeExternal("lmeval/a"), FakeExternal("lmeval/b")]
    schedule, outcome = _drive(tasks, store)
    assert schedule.done and schedule.rows_seen == 4
    assert (outcome.planned, outcome.done, outcome.failed) == (4, 4, 0)  # a row without a score is not a failure
    assert [r["id"] for r in store.rows()] == ["lmeval/a@0#0", "lmeval/a@0#1", "lmeval/b@0#0", "lmeval/b@0#1"]
    assert all(t.is_complete(store.dir) for t in tasks)


def test_a_rerun_skips_complete_tasks(tmp_path):
    store = RunStore(tmp_path, "run")
    store.dir.mkdir(parents=True)
    done, todo = FakeExternal("lmeval/a"), FakeExternal("lmeval/b")
    done.write_aggregates(store.dir)
    schedule, outcome = _drive([done, todo], store)
    assert (done.runs, todo.runs, outcome.done) == (0, 1, 2)
    again, outcome = _drive([done, todo], store)
    assert again.done and again.next() is None and outcome.done == 0 and todo.runs == 1
