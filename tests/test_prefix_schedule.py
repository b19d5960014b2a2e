"""Shared-context scheduling (issue 35 item 1): the schedule orders samples so that those sharing a context are back
to back and declares on each the characters it shares with the one before it (harness/run/prefix.py); full runs and
sequential rounds both hand the declaration to the backend on every request."""

from __future__ import annotations

import random

import pytest

from ctxbench.harness.core.types import Sample
from ctxbench.harness.run.batch import request
from ctxbench.harness.run.prefix import common_chars, share_asks, share_prefixes


def naive(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@pytest.mark.parametrize("shared", [0, 1, 255, 256, 257, 5000, 70000, 200001])
def test_common_chars_equals_a_char_by_char_walk(shared):
    rng = random.Random(shared)
    head = "".join(rng.choice("ab") for _ in range(shared))
    for a, b in [(head + "x" + "tail", head + "y"), (head, head + "more"), (head, head), (head + "zz", head[:-1] + "q")]:
        assert common_chars(a, b) == naive(a, b)


def sample(index: int, prompt: str) -> Sample:
    return Sample(task="t", length=64, index=index, prompt=prompt, answers=("a",), prompt_tokens=len(prompt.split()),
                  max_new_tokens=4)


def test_share_prefixes_orders_by_context_and_declares_the_shared_characters():
    doc_a, doc_b = "A " * 300, "B " * 300
    samples = [sample(0, doc_b + "Q1"), sample(1, doc_a + "Q2"), sample(2, doc_b + "Q3"), sample(3, doc_a + "Q1"),
               sample(4, "short")]
    out = share_prefixes(samples)
    assert [s.index for s in out] == [3, 1, 0, 2, 4]  # each document's questions back to back
    assert [s.shared_prefix for s in out] == [0, len(doc_a) + 1, 0, len(doc_b) + 1, 0]
    assert all(s.shared_prefix == naive(p.prompt, s.prompt) for p, s in zip(out, out[1:]))
    assert [s.prompt for s in out] == sorted(s.prompt for s in samples)  # nothing but the order and the declaration


def test_the_declaration_is_scheduling_not_content():
    s = share_prefixes([sample(0, "xx a"), sample(1, "xx b")])[1]
    assert s.shared_prefix == 3 and s == sample(1, "xx b")  # equal to the undeclared sample
    assert "shared_prefix" not in s.to_json()  # never written to the sample cache
    assert Sample.from_json(s.to_json()).shared_prefix == 0
    assert request(s).shared_prefix == 3 and request(s, repeat=1).shared_prefix == 3


def test_share_asks_keeps_repeats_together():
    a, b = sample(0, "doc q2"), sample(1, "doc q1")
    asks = share_asks([("t", a, 0), ("t", a, 1), ("t", b, 0), ("t", b, 1)])
    assert [(s.index, r, s.shared_prefix) for _, s, r in asks] == [(1, 0, 0), (1, 1, 0), (0, 0, 5), (0, 1, 5)]


class Recording:
    """The echo backend, keeping every request it is asked."""

    def __init__(self, batch_size: int = 8):
        from ctxbench.harness.backends.echo import EchoBackend

        self.inner = EchoBackend(model="smollm2-135m", batch_size=batch_size)
        self.calls: list[list] = []

    def generate(self, requests):
        self.calls.append(list(requests))
        return self.inner.generate(requests)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def check_declared(requests) -> None:
    """Requests in prompt order, each declaring exactly what it shares with the one before it in the call."""
    assert [r.prompt for r in requests] == sorted(r.prompt for r in requests)
    assert [r.shared_prefix for r in requests[1:]] == [naive(p.prompt, r.prompt) for p, r in zip(requests, requests[1:])]


def test_full_run_sends_a_depth_grid_ordered_and_declared(tmp_path, data_dir):
    from ctxbench.harness.core.config import Suite
    from ctxbench.harness.run.planning import RunPlan
    from ctxbench.harness.run.runner import run

    suite = Suite(name="grid", lengths=[512], samples=1, tasks=[
        {"task": "niah/single", "args": {"depths": 5, "samples_per_cell": 2}}])
    backend = Recording(batch_size=16)
    run(RunPlan(suite, "smollm2-135m", "echo", {}, tmp_path, data_dir), backend=backend)
    (sent,) = backend.calls
    assert len(sent) == 10
    check_declared(sent)
    # two haystacks: each one's five depths back to back, every one but its first sharing the haystack's start
    assert sum(r.shared_prefix > 200 for r in sent) >= 8


def test_sequential_round_keeps_shared_prefixes_together(tmp_path, data_dir):
    """--until: each turn's samples (several rounds of two tasks) arrive sorted, shared contexts adjacent, declared."""
    from ctxbench.harness.core.config import Suite
    from ctxbench.harness.run.planning import RunPlan
    from ctxbench.harness.run.runner import run
    from ctxbench.harness.run.until import Until

    suite = Suite(name="seq", lengths=[512], samples=8, tasks=[
        {"task": "ruler/niah_single_1"}, {"task": "ruler/niah_single_2"}])
    backend = Recording(batch_size=8)
    run(RunPlan(suite, "smollm2-135m", "echo", {}, tmp_path, data_dir, until=Until("width", width=1.0)), backend=backend)
    assert backend.calls and all(len(c) == 8 for c in backend.calls)
    for sent in backend.calls:
        check_declared(sent)
        tasks = [r.sample_id.split("@")[0] for r in sent]
        assert tasks == sorted(tasks, key=tasks.index) and len(set(tasks)) == 2  # each task's samples adjacent
        assert sum(r.shared_prefix > 200 for r in sent) >= 3  # the noise haystack up to each needle, reused
