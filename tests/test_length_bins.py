"""Length bins are a partition: every token count is scored at most at one length of a suite, for any set of lengths
(tasks/length_bins.py). Fixed bins (never moved by a suite's other lengths) partition the powers of two exactly,
MRCR's first bin [4096, 8192] included; lengths whose bins would overlap are refused in one line."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbench.harness.core.errors import ConfigError
from ctxbench.tasks.length_bins import FIRST_CLOSED, bin_edges, check_disjoint, in_bin, items_in_bin

POWERS = [1 << k for k in range(6, 21)]  # 64 ... 1M


def bins_holding(size: int, lengths) -> list[int]:
    return [n for n in lengths if in_bin(size, n)]


def probes(lengths) -> set[int]:
    """Every bin edge of the set, each ±1, and a point inside each bin."""
    out: set[int] = set()
    for n in lengths:
        low, high = bin_edges(n)
        out |= {low - 1, low, low + 1, high - 1, high, high + 1, (low + high) // 2}
    return {p for p in out if p > 0}


def test_an_item_of_exactly_4096_tokens_has_one_bin():
    assert bins_holding(4096, POWERS) == [FIRST_CLOSED]  # MRCR's first bin is closed below; the 4K bin yields it
    assert bin_edges(4096) == (2049, 4095) and bin_edges(8192) == (4096, 8192) and bin_edges(16384) == (8193, 16384)


@given(st.sets(st.sampled_from(POWERS), min_size=1))
@settings(max_examples=200, deadline=None)
def test_powers_of_two_are_never_refused_and_never_overlap(lengths):
    check_disjoint(lengths, "t")
    for size in probes(lengths):
        assert len(bins_holding(size, lengths)) <= 1, size


def test_the_powers_of_two_tile_the_token_axis():
    for size in probes(POWERS) | set(range(33, 5000)):
        if 32 < size <= POWERS[-1]:
            assert len(bins_holding(size, POWERS)) == 1, size


@given(st.sets(st.integers(64, 1 << 20), min_size=1, max_size=8))
@settings(max_examples=300, deadline=None)
def test_any_set_is_a_partition_or_refused(lengths):
    try:
        check_disjoint(lengths, "t")
    except ConfigError as refused:
        assert "lengths:" in str(refused) and "\n" not in str(refused) and "factor of 2" in str(refused)
        return
    for size in probes(lengths):
        assert len(bins_holding(size, lengths)) <= 1, (size, sorted(lengths))


def test_overlapping_bins_in_one_run_are_refused():
    """A run asks the bins of one item set with one context: a second length whose bin overlaps is refused."""
    ctx = SimpleNamespace(memo={})
    chars, size = [100 * (i + 1) for i in range(40)], lambda i: 25 * (i + 1)
    assert items_in_bin(ctx, ("mrcr", "args"), 512, chars, size) == list(range(10, 20))
    assert items_in_bin(ctx, ("mrcr", "args"), 1024, chars, size) == list(range(20, 40))
    with pytest.raises(ConfigError, match=r"lengths: 512 and 700 overlap as length bins of mrcr \(257-512 and 351-700"):
        items_in_bin(ctx, ("mrcr", "args"), 700, chars, size)
    assert items_in_bin(ctx, ("other", "args"), 700, chars, size) == list(range(14, 28))  # another item set


def test_plan_refuses_overlapping_lengths_of_a_binned_task(smol_tokenizer, tmp_path, monkeypatch):
    from ctxbench.harness.core.config import Suite
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.prompting import PromptRenderer
    from ctxbench.harness.run.planning import plan_cells

    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    path = tmp_path / "lb2.jsonl"
    path.write_text("\n".join(json.dumps({"_id": f"id{i}", "domain": "d", "sub_domain": "s", "difficulty": "easy",
                                          "length": "short", "question": "Q?", "choice_A": "a", "choice_B": "b",
                                          "choice_C": "c", "choice_D": "d", "answer": "A",
                                          "context": "Word. " * (100 * i)}) for i in range(1, 6)))
    def ctx():
        return GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer, "plain"), data_dir=tmp_path)

    suite = Suite(name="b", lengths=[3000, 4096], samples=5,
                  tasks=[{"task": "longbench2", "args": {"data_file": str(path), "binned": True}}])
    with pytest.raises(ConfigError, match="lengths: 3000 and 4096 overlap as length bins of longbench2"):
        plan_cells(suite, ctx())
    plan_cells(suite.model_copy(update={"lengths": [2048, 4096]}), ctx())
