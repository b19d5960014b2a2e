"""The full-N schedule's batches (harness/run/full.py): a backend that decodes batches together from prompts
prefilled alone (`batches_across_cells`, hf on CPU) gets one length's samples across the suite's cells, never two
lengths in a batch and never a perplexity cell mixed in; any other backend keeps one cell per batch."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ctxbench.harness.core.types import Sample
from ctxbench.harness.run import full
from ctxbench.harness.run.planning import Cell


class FakeTask:
    def __init__(self, name: str, needs: str = "generate"):
        self.name, self.needs = name, needs


def cells() -> list[Cell]:
    tasks = [FakeTask("a"), FakeTask("b"), FakeTask("c"), FakeTask("ppl", needs="prompt_logprobs")]
    return [Cell(t, length, planned=3, indices=(0, 1, 2)) for length in (512, 1024) for t in tasks]


@pytest.fixture(autouse=True)
def fake_samples(monkeypatch):
    def iter_samples(task, *, length, indices, seed, ctx, **_):
        for j in indices:
            yield Sample(task.name, length, j, f"{task.name} {length} {j}", ("x",), 10, 4)

    monkeypatch.setattr(full.datasets, "iter_samples", iter_samples)


def batches(backend, done=()) -> list[list[tuple[str, int]]]:
    ready = SimpleNamespace(plan=SimpleNamespace(label=None, model="m", suite=SimpleNamespace(seed=0)), ctx=None)
    schedule = full.FullSchedule(cells(), set(done), backend, ready)
    out = []
    while (turn := schedule.next()) is not None:
        out += [[(task.name, s.length) for task, s, _ in b.asks] for b in turn.batches]
    return out


def test_one_lengths_cells_share_batches():
    got = batches(SimpleNamespace(batch_size=8, batches_across_cells=True))
    generating = [b for b in got if b[0][0] != "ppl"]
    assert [len(b) for b in generating] == [8, 1, 8, 1]  # 9 samples of a, b and c at each length, 8 per batch
    assert all(len({length for _, length in b}) == 1 for b in got)  # never two lengths in one batch
    assert {name for name, _ in generating[0]} == {"a", "b", "c"}
    assert all({name for name, _ in b} == {"ppl"} for b in got if ("ppl", 512) in b or ("ppl", 1024) in b)
    assert sorted(x for b in got for x in b) == sorted((t, n) for t in ("a", "b", "c", "ppl") for n in (512, 1024)
                                                       for _ in range(3))  # every sample once


def test_other_backends_keep_one_cell_per_batch():
    for backend in (SimpleNamespace(batch_size=8), SimpleNamespace(batch_size=1, batches_across_cells=True)):
        got = batches(backend)
        assert all(len({x for x in b}) == 1 for b in got) and sum(len(b) for b in got) == 24


def test_done_samples_are_skipped_across_cells():
    done = {f"{t}@512#{j}" for t in "ab" for j in range(3)} | {"c@512#0"}
    got = batches(SimpleNamespace(batch_size=8, batches_across_cells=True), done)
    at_512 = [x for b in got for x in b if x[1] == 512 and x[0] != "ppl"]
    assert at_512 == [("c", 512), ("c", 512)]
