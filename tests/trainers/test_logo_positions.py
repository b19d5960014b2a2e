"""Synthetic positions (Eq. 4, App. D): structure, uniform biases, full coverage of the window, the 9:1 mix."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from ctxbench.trainers.logo.positions import Layout, choose_mode, prefix_positions, response_positions, slack

LAYOUT = Layout(head=4, chunks=(6, 6, 6, 5), tail=3, answers=(2, 4, 1))  # k = 4 + 23 + 3 + 4 = 34


def spans(layout: Layout):
    """Index ranges of each chunk inside the prefix."""
    start = layout.head
    for n in layout.chunks:
        yield start, start + n
        start += n


def test_real_length_and_slack():
    assert LAYOUT.real_length == 34 and LAYOUT.prefix == 30
    assert slack(LAYOUT, 200) == (200 - 34) // 4


@pytest.mark.parametrize("window", [200, 203])  # (K - k) divisible by N, and not
def test_continuous_positions_keep_chunks_whole_and_answers_aligned(window):
    rng = np.random.default_rng(0)
    delta = slack(LAYOUT, window)
    for _ in range(200):
        pre = prefix_positions(LAYOUT, window, "continuous", rng)
        assert len(pre) == LAYOUT.prefix and np.all(np.diff(pre) > 0)
        assert pre[:LAYOUT.head].tolist() == list(range(LAYOUT.head))  # template keeps 0..s-1
        offset = LAYOUT.head
        for c, (a, b) in enumerate(spans(LAYOUT)):
            assert np.all(np.diff(pre[a:b]) == 1)  # +1 inside a chunk
            slot_start = offset + c * delta
            slot_end = slot_start + (b - a) + delta + (window - LAYOUT.real_length - delta * 4 if c == 3 else 0)
            assert slot_start <= pre[a] and pre[b - 1] < slot_end  # chunk c in slot c
            offset += b - a
        tail = pre[-LAYOUT.tail:]
        assert tail[0] == pre[-LAYOUT.tail - 1] + 1 and np.all(np.diff(tail) == 1)  # question follows the last chunk
        full = [response_positions(pre, n) for n in LAYOUT.answers]
        starts = {int(p[LAYOUT.prefix]) for p in full}
        assert starts == {int(pre[-1]) + 1}  # every response's answer starts at the same position
        assert max(int(p.max()) for p in full) < window


def test_continuous_biases_are_uniform():
    """u_c ~ U{0..Δ}: chi-square over 6000 draws of a middle chunk's offset within its slot."""
    rng = np.random.default_rng(1)
    window = 34 + 4 * 9  # Δ = 9, no remainder
    first = LAYOUT.head + 6  # chunk 1's real start
    u = [int(prefix_positions(LAYOUT, window, "continuous", rng)[first]) - (first + 1 * 9) for _ in range(6000)]
    counts = np.bincount(u, minlength=10)
    assert len(counts) == 10 and counts.min() > 0
    assert chisquare(counts).pvalue > 1e-3


def test_every_position_below_the_window_is_used():
    rng = np.random.default_rng(2)
    window = 203  # with a remainder: the last slot takes it
    used = np.zeros(window, dtype=bool)
    for _ in range(10_000):
        used[response_positions(prefix_positions(LAYOUT, window, "continuous", rng), max(LAYOUT.answers))] = True
    assert used.all(), np.flatnonzero(~used)[:10]


def test_sparse_positions_increase_inside_their_slot():
    rng = np.random.default_rng(3)
    window, delta = 200, slack(LAYOUT, 200)
    gaps = 0
    for _ in range(200):
        pre = prefix_positions(LAYOUT, window, "sparse", rng)
        assert np.all(np.diff(pre) > 0) and pre.max() + max(LAYOUT.answers) < window
        offset = LAYOUT.head
        for c, (a, b) in enumerate(spans(LAYOUT)):
            slot_end = offset + c * delta + (b - a) + delta + (window - LAYOUT.real_length - delta * 4 if c == 3 else 0)
            assert offset + c * delta <= pre[a] and pre[b - 1] < slot_end
            gaps += int(np.any(np.diff(pre[a:b]) > 1))
            offset += b - a
    assert gaps > 0  # sparse really spreads tokens inside the slot


def test_a_window_too_small_for_the_chunks_is_refused():
    with pytest.raises(ValueError, match="Δ"):
        prefix_positions(LAYOUT, LAYOUT.real_length + 3, "continuous", np.random.default_rng(0))  # Δ = 0 for 4 chunks


def test_nine_to_one_mix():
    rng = np.random.default_rng(4)
    n = 20_000
    sparse = sum(choose_mode(rng, 0.1) == "sparse" for _ in range(n))
    assert abs(sparse / n - 0.1) < 4 * np.sqrt(0.1 * 0.9 / n)
