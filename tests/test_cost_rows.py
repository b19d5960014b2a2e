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


def test_the_servers_usage_wins_and_says_so() -> None:
    """usage's cached and reasoning tokens are read (hidden reasoning too); an answer cut to its budget here is counted,
    not the server's."""
    from ctxbench.harness.backends.openai_replies import parse_completion, token_account, within_budget
    from ctxbench.harness.core.models import load_tokenizer

    usage = {"prompt_tokens": 900, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 512},
             "completion_tokens_details": {"reasoning_tokens": 5}}
    sent = parse_completion({"choices": [{"text": "ok"}], "usage": usage}, "completions")
    assert token_account(sent, sent) == {"cached_tokens": 512, "token_source": "server", "reasoning_tokens": 5}
    bare = parse_completion({"choices": [{"text": "ok"}]}, "completions")
    assert token_account(bare, bare) == {"cached_tokens": None, "token_source": "counted", "reasoning_tokens": None}
    long = parse_completion({"choices": [{"text": "word " * 50}], "usage": {**usage, "completion_tokens": 50}}, "completions")
    cut = within_budget(long, 4, load_tokenizer("smollm2-135m", light=True))
    assert cut.over_budget and token_account(long, cut)["token_source"] == "counted"


def test_hidden_reasoning_a_server_reports_is_counted_in_thinking_mode() -> None:
    """--thinking on with a model whose reasoning the server hides (billed, never shown): the row's reasoning tokens
    are the server's count, not 0; a counted backend's row without reasoning stays at 0."""
    from ctxbench.harness.core.config import TaskSpec, build_task
    from ctxbench.harness.core.types import Generation

    task = build_task(TaskSpec(task="ruler/niah_single_1"))
    s = Sample(task=task.name, length=1024, index=0, prompt="Question?", answers=("42",), prompt_tokens=10,
               max_new_tokens=8)
    hidden = Prediction(s.id, "The answer is 42.", 10, 50, 0.1, reasoning_tokens=40, token_source="server")
    row = sample_row(task, s, hidden, Generation(thinking="on"), tokenizer=None)
    assert row.reasoning_tokens == 40 and row.extra["answer_tokens"] == 10 and row.score == 1.0
    counted = Prediction(s.id, "The answer is 42.", 10, 50, 0.1, reasoning_tokens=40, token_source="counted")
    assert sample_row(task, s, counted, Generation(thinking="on"), tokenizer=None).reasoning_tokens == 0
