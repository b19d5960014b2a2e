"""The fitter on synthetic token counts: never over budget, maximal, independent of earlier samples."""

import random

import pytest

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.fitting import FitState, fit_units


def make(costs, fixed, boundary_noise=0):
    """A fake prompt: `fixed` tokens plus the first n unit costs, +/- a deterministic boundary effect."""
    cum = [0]
    for c in costs:
        cum.append(cum[-1] + c)

    def build(n):
        return n, None

    def count(n):
        return fixed + cum[n] + (boundary_noise if n % 3 == 0 else 0)

    return build, count, (lambda n: float(cum[n]))


@pytest.mark.parametrize("budget", [100, 1000, 4000, 131072])
def test_exact_estimate_takes_one_tokenization_and_is_maximal(budget):
    rng = random.Random(budget)
    costs = [rng.randint(1, 30) for _ in range(20000)]
    build, count, est = make(costs, fixed=37)
    state = FitState()
    f = fit_units(budget=budget, build=build, estimate=est, count=count, count_short=count, state=state, max_units=len(costs))
    assert f.tokens <= budget
    assert f.n == len(costs) or count(f.n + 1) > budget  # maximal
    assert state.tokenizations == 1


def test_noisy_estimate_still_never_exceeds_and_is_order_independent():
    costs = [5 + (i * 7919) % 11 for i in range(5000)]
    build, count, est = make(costs, fixed=50, boundary_noise=3)
    a = fit_units(budget=9000, build=build, estimate=est, count=count, count_short=count, state=FitState(), max_units=5000)
    warmed = FitState()
    for b in (500, 7000, 9000):
        fit_units(budget=b, build=build, estimate=est, count=count, count_short=count, state=warmed, max_units=5000)
    b = fit_units(budget=9000, build=build, estimate=est, count=count, count_short=count, state=warmed, max_units=5000)
    assert a.tokens <= 9000 and a == b


def test_too_short_is_a_clear_error():
    build, count, est = make([10] * 10, fixed=500)
    with pytest.raises(ConfigError, match="too short"):
        fit_units(budget=100, build=build, estimate=est, count=count, state=FitState(), max_units=10)


def test_a_scale_error_is_learned_and_the_budget_held():
    """Units cost 0.9x what the estimate says (merges across units): a few counts find the maximal n."""
    costs = [10] * 20000
    build, _, est = make(costs, fixed=40)

    def count(n):
        return 40 + (9 * n) + (n % 7 == 0)  # the real cost: 9 per unit, plus a boundary effect

    for budget in (4000, 60000, 131000):
        state = FitState(verify="full")
        f = fit_units(budget=budget, build=build, estimate=est, count=count, count_short=count, state=state, max_units=len(costs))
        assert f.tokens == count(f.n) <= budget
        assert count(f.n + 1) > budget or count(f.n + 2) > budget  # maximal up to the boundary effect
        assert state.tokenizations <= 6


def test_a_trusted_state_counts_nothing_more():
    rng = random.Random(3)
    costs = [rng.randint(1, 30) for _ in range(5000)]
    build, count, est = make(costs, fixed=37)
    calls = []
    state = FitState(verify="fast", additive=True)
    first = fit_units(budget=3000, build=build, estimate=est, count=lambda n: calls.append(n) or count(n), count_short=count,
                      state=state, max_units=len(costs))
    assert state.exact and state.trusted and len(calls) == 1
    second = fit_units(budget=3000, build=build, estimate=est, count=lambda n: calls.append(n) or count(n), count_short=count,
                       state=state, max_units=len(costs))
    assert len(calls) == 1 and second.tokens == count(second.n) == first.tokens


def test_additivity_check_detects_splits_and_is_cached(smol_tokenizer, tmp_path, monkeypatch):
    from ctxbench.harness.core.additivity import check
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.prompting import PromptRenderer

    monkeypatch.setenv("CTXBENCH_CACHE", str(tmp_path))
    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer))
    words = [[" the", " cat", " sat", " on", " the", " mat."]]
    assert check(ctx, {"words": words}).additive
    split = check(ctx, {"words": words, "inside a word": [[" extra", "ordinary"]]})
    assert not split.additive and split.failed_kinds() == ["inside a word"]
    assert check(ctx, {"in place": [[" the", ["\n", " mat", "\n"]]]}).additive  # a piece costed between separators
    ctx2 = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer))
    monkeypatch.setattr(ctx2, "piece_counts", lambda pieces: (_ for _ in ()).throw(AssertionError("not cached")))
    assert not check(ctx2, {"words": words, "inside a word": [[" extra", "ordinary"]]}).additive  # from the disk cache


def test_piece_counts_in_bounded_batches_equal_single_counts(gen_ctx, monkeypatch):
    """Many pieces are counted in several tokenizer calls (bounded memory): the counts are those of each piece alone."""
    from ctxbench.harness.core import context

    pieces = [" alpha", " beta-gamma", "\n\nThe essay", " 1234567", ".", " uuid 3f2a-9c"] * 5
    expected = [len(gen_ctx.tokenizer(p, add_special_tokens=False)["input_ids"]) for p in pieces]
    monkeypatch.setattr(context, "PIECE_BATCH", 4)
    assert gen_ctx.piece_counts(pieces).tolist() == expected


def test_auto_takes_the_fast_path_only_where_enough_samples_amortise_its_check():
    from ctxbench.harness.core.config import Suite
    from ctxbench.harness.core.fitting import FAST_PATH_MIN_SAMPLES, resolve_mode

    assert resolve_mode("auto", FAST_PATH_MIN_SAMPLES - 1) == "full"
    assert resolve_mode("auto", FAST_PATH_MIN_SAMPLES) == "fast"
    assert resolve_mode("fast", 1) == "fast" and resolve_mode("full", 500) == "full" and resolve_mode("first", 1) == "fast"
    suite = Suite(name="s", lengths=[1024], samples=2, tasks=[{"task": "ruler/niah_single_1"}])
    assert suite.verify == "auto"
    with pytest.raises(ValueError, match="auto"):
        Suite(name="s", lengths=[1024], samples=2, verify="sometimes", tasks=[{"task": "ruler/niah_single_1"}])
