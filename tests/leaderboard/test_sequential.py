"""The sequential core: its interval against the published betting CS, its decisions, and batch/single agreement."""

import math

import numpy as np
import pytest

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.stats.sequential import StopRule, confidence_sequence, first_settled, interval_path, verdict


def confseq_hedged_reference(x, alpha, breaks=1000):
    """confseq 0.0.11's betting_cs defaults, transcribed loop by loop (lambda_predmix_eb with alpha·θ, bets
    truncated at ½/m and ½/(1-m), max(½K⁺, ½K⁻), grid of `breaks`, endpoints widened by one step), with the
    running intersection."""
    t = np.arange(1, len(x) + 1)
    mu = (0.5 + np.cumsum(x)) / (t + 1)
    sigma2 = (0.25 + np.cumsum((x - mu) ** 2)) / (t + 1)
    sigma2_prev = np.append(0.25, sigma2[:-1])
    lam = np.sqrt(2 * np.log(1 / (alpha / 2)) / (t * np.log(1 + t) * sigma2_prev))
    los, his = [], []
    grid = np.arange(0, 1 + 1 / breaks, 1 / breaks)
    inside = np.zeros((grid.size, len(x)), dtype=bool)
    for i, m in enumerate(grid):
        plus = np.cumprod(1 + np.minimum(lam, 0.5 / m if m > 0 else math.inf) * (x - m))
        minus = np.cumprod(1 - np.minimum(lam, 0.5 / (1 - m) if m < 1 else math.inf) * (x - m))
        inside[i] = np.maximum(0.5 * plus, 0.5 * minus) <= 1 / alpha
    for j in range(len(x)):
        where = np.flatnonzero(inside[:, j])
        los.append(max(0.0, grid[where[0]] - 1 / breaks) if where.size else 0.0)
        his.append(min(1.0, grid[where[-1]] + 1 / breaks) if where.size else 1.0)
    return np.maximum.accumulate(los), np.minimum.accumulate(his)


@pytest.mark.parametrize("seed,mean", [(0, 0.3), (1, 0.9), (2, 0.55)])
def test_interval_matches_the_published_betting_cs(seed, mean):
    rng = np.random.default_rng(seed)
    x = np.clip(rng.beta(mean * 8, (1 - mean) * 8, 80), 0, 1)
    ref_lo, ref_hi = confseq_hedged_reference(x, 0.05)
    lo, hi = interval_path(x, alpha=0.05)
    # both are conservative grid readings of the same exclusion set: they agree within two grid steps
    assert np.max(np.abs(lo - ref_lo)) <= 0.0021
    assert np.max(np.abs(hi - ref_hi)) <= 0.0021
    single = confidence_sequence(x, alpha=0.05)
    assert single[0] == pytest.approx(lo[-1], abs=6e-4) and single[1] == pytest.approx(hi[-1], abs=6e-4)


def test_rounds_of_tasks_narrow_the_interval_and_keep_the_mean():
    rng = np.random.default_rng(3)
    rounds = rng.binomial(13, 0.9, 60) / 13
    wide = confidence_sequence(rounds, alpha=0.05)
    narrow = confidence_sequence(rounds, alpha=0.05, per_round=13)
    assert narrow[0] < rounds.mean() < narrow[1]
    assert narrow[1] - narrow[0] < 0.6 * (wide[1] - wide[0])


def test_rounds_as_sample_lists_match_means_for_0_1_and_count_ties_as_nothing():
    rng = np.random.default_rng(5)
    correct = (rng.random((80, 13)) < 0.9).astype(float)
    assert confidence_sequence(correct.tolist(), alpha=0.05) == confidence_sequence(correct.mean(axis=1), alpha=0.05,
                                                                                     per_round=13)
    diffs = (rng.random((200, 13)) < 0.6).astype(float) - (rng.random((200, 13)) < 0.5)
    listed = confidence_sequence(diffs.tolist(), alpha=0.05, lower=-1, upper=1)
    averaged = confidence_sequence(diffs.mean(axis=1), alpha=0.05, lower=-1, upper=1, per_round=13)
    assert averaged[0] < listed[0] < diffs.mean() < listed[1] < averaged[1]


def test_interval_scales_to_other_bounds():
    diffs = [0.2, 0.4, 0.0, 0.6, 0.2] * 8
    lo, hi = confidence_sequence(diffs, alpha=0.05, lower=-1.0, upper=1.0)
    lo01, hi01 = confidence_sequence([(d + 1) / 2 for d in diffs], alpha=0.05)
    assert (lo, hi) == pytest.approx((2 * lo01 - 1, 2 * hi01 - 1), abs=1e-9)


def test_verdicts_settle_only_when_the_interval_clears_the_point():
    rule = StopRule("effective-length", looks=6)
    assert verdict(rule, []).decision == "undecided"
    assert verdict(rule, [1.0] * 3, per_round=13).decision == "undecided"  # 3 perfect rounds are not enough
    high = verdict(rule, [1.0] * 40, per_round=13)
    assert (high.settled, high.decision, high.rounds) == (True, "above", 40) and high.lo >= 0.856
    low = verdict(rule, [0.5] * 40, per_round=13)
    assert (low.decision, low.settled) == ("below", True) and low.hi <= 0.856
    close = verdict(rule, [0.86] * 40, per_round=13)
    assert close.decision == "undecided" and close.lo < 0.856 < close.hi
    assert verdict(StopRule("vs"), [0.3] * 60, per_round=13).decision == "positive"
    assert verdict(StopRule("vs"), [-0.3] * 60, per_round=13).decision == "negative"
    assert verdict(StopRule("width", width=0.1), [0.9] * 300, per_round=13).decision == "narrow"


def test_batch_and_single_verdicts_agree_round_by_round():
    rng = np.random.default_rng(4)
    rule = StopRule("effective-length", looks=3)
    values = rng.binomial(13, [[0.93], [0.78], [0.87]], (3, 120)) / 13
    stops, decisions = first_settled(rule, values, per_round=13)
    for row, stop, decision in zip(values, stops, decisions):
        assert verdict(rule, row[:stop], per_round=13).decision == decision
        if decision != "undecided":
            assert not verdict(rule, row[:stop - 1], per_round=13).settled
            assert verdict(rule, row, per_round=13).decision == decision  # a settled length stays settled


def test_width_rule_stops_at_the_first_narrow_round():
    rng = np.random.default_rng(6)
    rule = StopRule("width", width=0.1)
    values = rng.binomial(13, [[0.9], [0.7]], (2, 400)) / 13
    stops, decisions = first_settled(rule, values, per_round=13)
    for row, stop, decision in zip(values, stops, decisions):
        assert decision == "narrow"
        assert verdict(rule, row[:stop], per_round=13).settled and not verdict(rule, row[:stop - 1], per_round=13).settled


@pytest.mark.parametrize("kwargs,message", [
    ({"kind": "effective-length", "alpha": 0}, "alpha: 0"),
    ({"kind": "effective-length", "threshold": 85.6}, "threshold: 85.6"),
    ({"kind": "width"}, "width: None"),
    ({"kind": "soon"}, "until: unknown rule 'soon'"),
    ({"kind": "vs", "looks": 0}, "looks: 0"),
])
def test_bad_rules_are_refused_in_one_line(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        StopRule(**kwargs)
