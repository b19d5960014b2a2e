"""Journey: a user scores long-document QA with an LLM judge (judge/qa). Without --judge-budget the paid run is
refused in one line before anything is written; with one it says what it will spend, and the finished rerun
makes no judge call. The judge is a local fake OpenAI-compatible server that counts its calls."""

from __future__ import annotations

import json

import pytest

from tests.test_judge import FakeJudge, suite_yaml


@pytest.mark.slow  # ~17 s; tests/test_judge.py runs the same refusal, resume and cache in process (default tier)
def test_judge_budget_then_no_repeated_call(user):
    judge = FakeJudge()
    try:
        suite = suite_yaml(user.cwd, judge.url)
        command = f"ctxbench score --suite {suite} --backend echo --store runs"
        refused = user.run(command)
        assert refused.code == 2 and refused.last_err_line.startswith("error: --judge-budget: this run makes paid judge calls (3 calls")
        assert "runs" not in user.files() and judge.calls == 0

        scored = user.run(f"{command} --judge-budget calls=3,tokens=100k")
        assert scored.code == 0, scored.err[-2000:]
        assert "judge: 3 paid calls planned" in scored.err and judge.calls == 3
        row = json.loads(next((user.cwd / "runs").rglob("samples.jsonl")).read_text().splitlines()[0])
        assert row["judge"]["model"] == row["judge"]["version"] and row["judge"]["verdicts"] == [{"fluency": 1, "correctness": 3}]
        assert "judge/qa/longbench/narrativeqa" in scored.out and "100.0" in scored.out

        again = user.run(f"{command} --judge-budget 3")
        assert again.code == 0 and "scored already" in again.err and judge.calls == 3
    finally:
        judge.close()
