"""Token counts do not depend on what the tokenizer was asked before: transformers leaves a padded or truncating
call's settings on its Rust tokenizer, and the counting fast path reads that tokenizer directly. Under pytest -n 2 a
padded call that happened to run first made ruler/cwe and ruler/fwe fit differently through transformers than through
the light tokenizer (tests/test_light_tokenizer.py), in one order of the tests and not the other; the fingerprint
hashed the same settings, so it changed too."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from ctxbench.harness.core.models import load_tokenizer, tokenizer_fingerprint  # noqa: E402
from ctxbench.harness.core.prompting import token_counts  # noqa: E402

PIECES = [" 1.", " hello", " a longer piece of text than the others", "\n", " ünï"]


def _samples(tok, task: str, data_dir, cache, monkeypatch) -> list[dict]:
    from ctxbench.harness.core import datasets
    from ctxbench.harness.core.config import TaskSpec, build_task
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.prompting import PromptRenderer

    monkeypatch.setenv("CTXBENCH_CACHE", str(cache))
    ctx = GenContext(tok, PromptRenderer(tok), data_dir=data_dir, verify="full")
    task_ = build_task(TaskSpec(task=task))
    return [s.to_json() for s in datasets.generate(task_, length=1024, indices=range(1), seed=3, ctx=ctx)]


@pytest.fixture(scope="module")
def full():
    return load_tokenizer("smollm2-135m")


@pytest.mark.parametrize("earlier", [{"padding": True}, {"truncation": True, "max_length": 2},
                                     {"padding": "max_length", "max_length": 64}])
def test_counts_and_fingerprint_are_the_same_after_a_padded_or_truncating_call(full, earlier):
    before, fingerprint = token_counts(full, PIECES, add_special_tokens=False), tokenizer_fingerprint(full)
    full(["a b", "c d e f g"], **earlier)
    assert tokenizer_fingerprint(full) == fingerprint  # the sample cache's key and a run's identity
    assert token_counts(full, PIECES, add_special_tokens=False) == before
    assert before == [len(full.encode(p, add_special_tokens=False)) for p in PIECES]


def test_either_order_in_one_process_gives_the_same_samples(full, data_dir, tmp_path, monkeypatch):
    """The samples through transformers before and after a padded call (the two orders of the light-tokenizer tests)
    are the light tokenizer's. ruler/fwe, the cheaper of the two tasks that failed (both fit from batched piece
    counts)."""
    task = "ruler/fwe"
    light = load_tokenizer("smollm2-135m", light=True)
    first = _samples(full, task, data_dir, tmp_path / "first", monkeypatch)
    full(["a b", "c"], padding=True)  # what test_what_it_does_not_reproduce_goes_to_transformers asks
    after = _samples(full, task, data_dir, tmp_path / "after", monkeypatch)
    assert first == after == _samples(light, task, data_dir, tmp_path / "light", monkeypatch)


@pytest.mark.parametrize("earlier", [{"padding": True}, {"truncation": True, "max_length": 2}])
def test_the_packers_text_encoder_drops_a_padded_or_truncating_calls_settings(full, earlier):
    """The packer's copy of the Rust tokenizer (trainers/data/token_cache.py) took whatever padding or truncation a
    transformers call had left on it: every document of a batch came out as long as the longest, or cut to 2 tokens."""
    from ctxbench.trainers.data import token_cache

    token_cache._ENCODERS.clear()
    full(["a b", "c d e f g"], **earlier)
    try:
        enc = token_cache._text_encoder(full)
        ids = [e.ids for e in enc.encode_batch_fast(PIECES, add_special_tokens=False)]
    finally:
        full(["a"])  # a plain call resets the settings for the module's other tests
        token_cache._ENCODERS.clear()
    assert ids == [full.encode(p, add_special_tokens=False) for p in PIECES]
