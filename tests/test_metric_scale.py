"""Metrics declare their scale and direction (issue 23); the board keeps a metric that is not a fraction where higher is
better off its percent table (never ×100, never ranked backwards)."""

from __future__ import annotations

from ctxbench.harness.core import registry
from ctxbench.harness.core.metrics import MetricScale, metric_scale
from ctxbench.leaderboard.store_frame import loss_tasks


def test_declared_scales():
    assert metric_scale("perplexity") == MetricScale(scale="raw", higher_is_better=False)
    assert metric_scale("string_match_all") == MetricScale()  # undeclared: a fraction, higher better
    assert metric_scale("helmet/ndcg@10").on_percent_board  # a task's own metric name: a fraction


def test_a_lower_is_better_metric_stays_off_the_percent_board(monkeypatch):
    monkeypatch.setitem(registry._INFO, ("metric", "test/error_rate"), {"higher_is_better": False})
    metric_scale.cache_clear()
    try:
        latest = {"a": {"task": "t/err", "metric": "test/error_rate"}, "b": {"task": "t/ok", "metric": "string_match_all"},
                  "c": {"task": "ppl/full", "metric": "perplexity"}}
        assert loss_tasks({}, latest) == {"t/err", "ppl/full"}
    finally:
        metric_scale.cache_clear()
