"""Sequential scoring's bookkeeping (harness/run/until.py): the rule as typed, round means, the complete prefix,
and adaptive.json (the journeys in tests/journeys/test_until.py run it end to end)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.run import until as adaptive


def parse(until=None, **kw):
    opts = {"alpha": None, "threshold": None, "vs": None, "shard": (0, 1), "repeats": 1, **kw}
    return adaptive.parse_until(until, **opts)


def test_the_rule_as_typed():
    assert parse() is None
    rule = parse("effective-length", alpha=0.01, threshold=80)
    assert rule.settings() == {"until": "effective-length", "alpha": 0.01, "threshold": 80}
    stop = rule.rule(lengths=6)
    assert (stop.kind, stop.threshold, stop.looks) == ("effective-length", 0.8, 6)
    narrow = parse("width=10")
    assert narrow.settings() == {"until": "width", "alpha": 0.05, "width": 10.0} and narrow.rule(6).width == 0.1
    assert narrow.rule(6).looks == 1


@pytest.mark.parametrize("until, kw, line", [
    ("effective-length", {"repeats": 3}, "--until: scores one generation per sample; drop --repeats"),
    ("width=ten", {}, "--until: 'width=ten' has no number after width="),
    ("width=5", {"threshold": 90}, "--threshold: only with --until effective-length"),
    ("effective-length", {"threshold": 100}, "--threshold: a score between 0 and 100"),
    (None, {"alpha": 0.1}, "--alpha: only with --until or --vs"),
    ("effective-length", {"vs": Path("x")}, "--vs: is its own stopping rule"),
])
def test_bad_values_are_one_line(until, kw, line):
    with pytest.raises(ConfigError) as e:
        parse(until, **kw)
    assert str(e.value).startswith(line)


def test_round_means_and_the_complete_prefix():
    tasks = {"a": 3, "b": 2}  # b has fewer samples: round 2 is a alone
    scores = {("a", 0): 1.0, ("b", 0): 0.0, ("a", 1): 1.0, ("b", 1): 1.0, ("a", 2): 0.5}
    assert adaptive.round_means(scores, tasks, 3) == [0.5, 1.0, 0.5]
    assert adaptive.complete_rounds(scores, tasks, 3) == 3
    del scores[("b", 1)]  # a failed or missing sample ends the prefix
    assert adaptive.complete_rounds(scores, tasks, 3) == 1


def test_adaptive_json_keeps_an_earlier_rule_and_names_the_stopped_cells(tmp_path):
    lengths = {512: {"rounds": 12, "n": 50, "settled": True, "stopped": "settled", "decision": "above", "lo": 0.9, "hi": 1.0},
               1024: {"rounds": 7, "n": 50, "settled": False, "stopped": "running", "decision": "undecided",
                      "lo": 0.2, "hi": 0.9}}
    cells = {"t": {"512": 12, "1024": 7}}
    first = adaptive.write_state(tmp_path, parse("width=10"), lengths, cells, {})
    state = adaptive.write_state(tmp_path, parse("effective-length"), lengths, cells, first)
    assert adaptive.read_state(tmp_path) == state
    assert state["history"] == [{"until": "width", "alpha": 0.05, "width": 10.0}]
    assert adaptive.stopped_samples(state) == {("t", 512): 12}  # a running length's later samples are pending
    words = adaptive.summary_lines(state)
    assert words[0] == "512: settled above [90.0, 100.0] after 12 of 50 rounds"
    assert words[1].startswith("1024: not settled yet")


def test_adaptive_json_names_each_lengths_task_set_and_says_what_a_rerun_does(tmp_path):
    """The board shows a length's anytime interval only on the task set its rounds average: a file written before
    `tasks` existed gets it from its cells. A length with failed samples says the rerun retries them; one whose
    tasks have unequal N says the rest goes on at fixed N."""
    lengths = {512: {"rounds": 6, "n": 6, "n_max": 20, "settled": False, "stopped": "reached N", "decision": "undecided",
                     "lo": 0.2, "hi": 0.8},
               1024: {"rounds": 4, "n": 20, "settled": False, "stopped": "failed samples", "decision": "below",
                      "lo": 0.0, "hi": 0.5}}
    adaptive.write_state(tmp_path, parse("effective-length"), lengths, {"a": {"512": 20, "1024": 4}, "b": {"512": 6}}, {})
    state = adaptive.read_state(tmp_path)
    assert state["lengths"]["512"]["tasks"] == ["a", "b"] and state["lengths"]["1024"]["tasks"] == ["a"]
    words = adaptive.summary_lines(state)
    assert words[0].endswith("the tasks with more samples go on to theirs at fixed N)")
    assert "failed samples stand" in words[1] and words[1].endswith("rerun the same command to retry them")
    assert adaptive.stopped_samples(state) == {("a", 512): 20, ("b", 512): 6}  # 1024 is not final: nothing stopped
