"""--samples on fixed-item tasks (issue 32, Medium 5): LongBench and judge/qa over it score their first N items in the
task's fixed order (it was silently ignored), so the judge budget's advice "score fewer samples (--samples ...)"
works when followed."""

from __future__ import annotations

import json

import pytest

from tests.test_judge import FakeJudge, suite_yaml


@pytest.fixture()
def judge():
    fake = FakeJudge()
    yield fake
    fake.close()


def test_judge_budget_advice_works_when_followed(ctxbench, tmp_path, judge):
    suite, store = suite_yaml(tmp_path, judge.url), tmp_path / "runs"  # 3 LongBench items, one length
    score = ("score", "--suite", suite, "--backend", "echo", "--store", str(store))
    code, _, err = ctxbench(*score, "--judge-budget", "2")
    assert code == 2 and "calls 3 > 2" in err and "--samples" in err and not store.exists(), err
    code, _, err = ctxbench(*score, "--judge-budget", "2", "--samples", "2")  # the advice, followed
    assert code == 0, err[-2000:]
    assert judge.calls == 2
    (samples,) = store.rglob("samples.jsonl")
    rows = [json.loads(x) for x in samples.read_text().splitlines() if x.strip()]
    assert sorted(r["index"] for r in rows) == [0, 1]  # the first two items, in the task's order


def test_samples_cap_records_but_not_a_grid_or_generated_tasks():
    from ctxbench.harness.core.config import adhoc_suite
    from ctxbench.harness.run.planning import plan_cells

    suite = adhoc_suite("kv/retrieval,ruler/niah_single_1", samples=2, lengths=[1024])
    capped, _ = plan_cells(suite, None, cap=2)
    assert {c.task.name: c.planned for c in capped} == {"kv/retrieval": 5, "ruler/niah_single_1": 2}  # the grid whole
