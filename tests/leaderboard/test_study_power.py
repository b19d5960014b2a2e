"""Issue 31 item 7: a study against one untrained run is valid but weak, and its report says how weak: beside
each such verdict, the difference the design detects at the stated power, the power for the observed size, and
the seeds that would detect it. The statement is checked by simulation (slow here; numbers in
benchmarks/study_power.py and docs/studies.md)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats as sps

from ctxbench.leaderboard import studies as st
from ctxbench.leaderboard import study_power as sp


def _delta(effect: float, *, seeds: int = 3, reference_seeds: int = 1, seed: int = 0, **design) -> st.Delta:
    rng = np.random.default_rng(seed)
    a, b, codes, n_cells, strata = st.simulate_arms(effect=effect, seeds=seeds, reference_seeds=reference_seeds,
                                                    rng=rng, **design)
    return st.compare_arms(a, b, codes, n_cells, strata, level=0.95, n_boot=200, rng=rng, exact=False)


def test_the_statement_against_one_run():
    d = _delta(0.06, sd_seed=0.05, sd_sample=0.05, sd_noise=0.05)
    assert d.method == st.SINGLE_SEED_METHOD
    p = sp.single_run_power(d, target=0.06)
    assert 0 < p.power_at_target < 0.8 < 1 and p.detectable > 0.06  # three seeds cannot see six points reliably
    seed_var = d.var_seed * 3 * 2 / float(sps.chi2.ppf(0.5, 2))
    k = p.seeds_for_target
    assert k is not None and k > 3
    assert sp._single_run_mdd(seed_var, d.var_sample, k, d.level, 0.8) <= 0.06 < \
        sp._single_run_mdd(seed_var, d.var_sample, k - 1, d.level, 0.8)  # the fewest seeds that reach it
    assert sp.single_run_power(_delta(0.06, reference_seeds=3)) is None  # seeds on both sides: not this statement


def test_no_seed_count_is_suggested_where_the_sample_level_alone_is_too_wide():
    d = _delta(0.068, binary=True)  # issue 31's +6.8 on 90 binary samples: the reference run's own noise dominates
    p = sp.single_run_power(d, target=0.068)
    assert p.seeds_for_target is None and p.power_at_target < 0.2
    note = sp.power_note(d)
    assert "no number of seeds up to 100" in note and "score more samples" in note


def test_the_verdict_and_the_printed_line_carry_it():
    from ctxbench.harness.commands.study import _power
    from ctxbench.harness.studies.report import _delta_json, _verdicts

    d = _delta(0.06, sd_seed=0.05, sd_sample=0.05, sd_noise=0.05)
    study = SimpleNamespace(stats=SimpleNamespace(alpha=0.05, power=0.8), reference="A")
    section = _verdicts(study, [("task score", False, d)], 1)
    (line,) = [x for x in section.paragraphs if x.startswith("task score:")]
    assert "Power: with 3 seeds against one B run this test detects a true difference of" in line, line
    assert "seeds would detect it 80% of the time" in line
    printed = _power({**_delta_json(d, 0.8)})
    assert printed.startswith("; detects ") and "seeds would reach 80%" in printed, printed


@pytest.mark.slow  # ~30 s; its fast counterparts above check the formula, this checks it against simulated studies
def test_the_statement_holds_in_simulation():
    r = sp.check({"sd_seed": 0.05, "sd_sample": 0.1, "sd_noise": 0.1}, effect=0.1, reps=300, seed=5)
    assert 0.7 <= r["detected_at_stated_mdd"] <= 0.92, r  # the stated 80%
    assert r["detected_with_3"] < 0.5 and 0.7 <= r["power_at_suggested"] <= 0.95, r
