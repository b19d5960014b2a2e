"""The fast generation path is safe: never over budget, prompt_tokens real, even with an adversarial tokenizer.

The adversarial tokenizer is a byte-level BPE trained here on the essays with no pre-tokenizer, on chunks that
keep their newlines, so its merges cross word and line boundaries ("of the", ".\\nThe"): piece counts do not add
up. The additivity check must refuse it the fast path; every sample must still be exact and within budget in both
modes, and fill at least 99% at 16K. Without the check (a state forced to trust the estimate) samples go wrong,
which shows that the check is what protects them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.fitting import FitState
from ctxbench.harness.core.prompting import PromptRenderer

TASKS = [
    "niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2", "niah_multikey_3",
    "niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe", "qa_1", "qa_2",
]


@pytest.fixture(scope="module")
def cross_word_bpe(data_dir):
    """A BPE whose merges cross word and line boundaries, trained on the essays in a few seconds."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    text = "\n\n".join(p.read_text(encoding="utf-8") for p in sorted((data_dir / "pg_essays").glob("*.txt")))
    lines = text.split("\n")
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)  # no word splitting
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2048, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(["\n".join(lines[i:i + 16]) for i in range(0, len(lines), 16)], trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk)
    pieces = ["The sky is blue.", " Here we go."]
    assert len(tok(pieces[0] + pieces[1])["input_ids"]) != sum(len(tok(p)["input_ids"]) for p in pieces)  # really cross-word
    return tok


def ctx_for(tok, data_dir: Path, verify: str) -> GenContext:
    return GenContext(tok, PromptRenderer(tok, "plain"), data_dir=data_dir, verify=verify)


def real_tokens(tok, s) -> int:
    return len(tok(s.prompt, add_special_tokens=s.add_special_tokens)["input_ids"])


def test_cross_word_bpe_is_refused_the_fast_path(cross_word_bpe, data_dir):
    ctx = ctx_for(cross_word_bpe, data_dir, "fast")
    for name in ("niah_single_1", "niah_single_2", "niah_multikey_2", "vt", "cwe", "fwe"):
        verdict = registry.get("task", f"ruler/{name}")().additivity(ctx)
        assert not verdict.additive and verdict.failed_kinds(), name


@pytest.mark.parametrize("verify", ["fast", "full"])
@pytest.mark.parametrize("name", TASKS)
def test_never_over_budget_and_counts_are_real(cross_word_bpe, data_dir, name, verify):
    ctx = ctx_for(cross_word_bpe, data_dir, verify)
    task = registry.get("task", f"ruler/{name}")()
    length = 16384
    for i in range(4):
        s = task.generate(length=length, index=i, seed=7, ctx=ctx)
        tokens = real_tokens(cross_word_bpe, s)
        assert s.prompt_tokens == tokens, (name, i)
        assert tokens + s.max_new_tokens <= length, (name, i)
        assert tokens + s.max_new_tokens >= 0.99 * length, (name, i, tokens)  # in-context unit caps: no underfill


def test_without_the_check_the_fast_path_would_overshoot(cross_word_bpe, data_dir):
    """Forcing trust (as a one-sample exactness check alone could) gives wrong counts with this tokenizer."""
    ctx = ctx_for(cross_word_bpe, data_dir, "fast")
    task = registry.get("task", "ruler/niah_single_2")()
    length = 16384
    state = task.fit_state(ctx, length)
    assert not state.additive
    state.additive, state.exact = True, True  # what the check refuses
    wrong = 0
    for i in range(6):
        s = task.generate(length=length, index=i, seed=7, ctx=ctx)
        wrong += s.prompt_tokens != real_tokens(cross_word_bpe, s)
    assert wrong >= 1


def test_real_tokenizer_takes_the_fast_path_with_identical_samples(smol_tokenizer, data_dir):
    """SmolLM2 (byte-level BPE) passes every task's probes: one full tokenization per task and length, and the
    samples equal those of verify=full."""
    fast, full = (GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=data_dir, verify=v) for v in ("fast", "full"))
    for name in TASKS:
        task = registry.get("task", f"ruler/{name}")()
        verdict = task.additivity(fast)
        assert verdict.additive, (name, {k: v["example"] for k, v in verdict.kinds.items() if v["failures"]})
        before = fast.full_tokenizations
        a = [task.generate(length=8192, index=i, seed=3, ctx=fast).to_json() for i in range(4)]
        assert fast.full_tokenizations - before == 1, name
        b = [task.generate(length=8192, index=i, seed=3, ctx=full).to_json() for i in range(4)]
        assert a == b, name


def test_untrusted_state_never_skips_a_count():
    state = FitState(verify="fast", additive=False, exact=True)
    assert not state.trusted
    assert not FitState(verify="full", additive=True, exact=True).trusted
    assert FitState(verify="fast", additive=True, exact=True).trusted


def test_uuid_costs_by_table_equal_real_counts(smol_tokenizer, data_dir):
    """niah_multikey_3's haystack is costed from tables (no tokenization): the sums equal real counts."""
    import uuid

    import numpy as np

    from ctxbench.tasks.ruler import uuid_costs

    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=data_dir)
    ids = uuid_costs.draw(np.random.default_rng(11), 4000)
    texts = uuid_costs.texts(ids)
    assert all(uuid.UUID(t).version == 4 and str(uuid.UUID(t)) == t for t in texts)
    real = ctx.piece_counts([" " + t for t in texts])
    assert (uuid_costs.UuidCosts(ctx)(ids) == real).all()
