"""The token account of a row (row version 3): an older row reads as "not recorded", never as 0 tokens or 0 cost."""

from __future__ import annotations

from ctxbench.harness.core.rows import ROW_VERSION, Row
from ctxbench.harness.core.types import Prediction, Sample
from ctxbench.harness.run.batch import sample_row


def test_a_row_before_version_3_has_no_token_account() -> None:
    old = {"id": "t@1024#0", "task": "t", "length": 1024, "index": 0, "prompt_tokens": 900, "generated_tokens": 5}
    row = Row.from_json(old)
    assert ROW_VERSION >= 3
    assert (row.cached_tokens, row.reasoning_tokens, row.gpu_seconds, row.cost_usd, row.token_source) == (None, None, None, None, "")
    assert Row.upgrade(old)["cost_usd"] is None


def test_the_token_account_round_trips_and_comes_from_the_prediction() -> None:
    class Task:
        category = "c"

        def score_row(self, answer, sample):
            return 1.0, {}, None

    s = Sample(task="t", length=1024, index=0, prompt="p", answers=("a",), prompt_tokens=10, max_new_tokens=4)
    p = Prediction(s.id, "a", 12, 3, 0.5, cached_tokens=8, token_source="server", gpu_seconds=0.25, reasoning_tokens=2)
    row = sample_row(Task(), s, p)
    assert (row.prompt_tokens, row.cached_tokens, row.reasoning_tokens, row.token_source, row.gpu_seconds) == (12, 8, 2, "server", 0.25)
    back = Row.from_json(row.to_json())
    assert back == row and "reasoning_tokens" not in back.extra
