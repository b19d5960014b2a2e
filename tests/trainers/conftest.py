"""LOGO fixtures: a model-free generator backend (replies derived from the prompt) and small synthesized data."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Prediction

WORDS = ("paris", "the river", "1923", "a novelist", "yes", "no", "Scott", "an American film")


@register("backend", "logo-fake")
class FakeGenerator:
    """Answers with a few words picked by hashing the prompt: different prompts almost always differ."""

    name = "logo-fake"
    capabilities = frozenset({"generate"})
    batch_size = 8
    context_length = 1 << 20
    calls = 0  # requests answered, across instances
    fail_after: int | None = None  # raise once this many requests have been answered (an interrupted run)
    refuse: str | None = None  # answer prompts containing this text with an error instead (a failing backend call)

    def __init__(self, *, model: str, **_):
        from ctxbench.harness.core.models import load_tokenizer

        self.tokenizer = load_tokenizer(model)

    def generate(self, requests):
        out = []
        for r in requests:
            if FakeGenerator.fail_after is not None and FakeGenerator.calls >= FakeGenerator.fail_after:
                raise RuntimeError("simulated crash")
            FakeGenerator.calls += 1
            if FakeGenerator.refuse and FakeGenerator.refuse in r.prompt:
                out.append(Prediction(r.sample_id, "", 0, 0, 0.0, error="BackendError: refused"))
                continue
            h = hashlib.sha256(r.prompt.encode()).digest()
            ids = self.tokenizer(" " + " ".join(WORDS[b % len(WORDS)] for b in h[: 1 + h[-1] % 4]),
                                 add_special_tokens=False)["input_ids"][: r.max_new_tokens]  # as a real backend stops
            out.append(Prediction(r.sample_id, self.tokenizer.decode(ids), r.prompt_tokens or 0, len(ids), 0.0))
        return out


def logo_data_config(out_dir: Path, data_dir: Path, **kw) -> dict:
    cfg = {"data_file": str(data_dir / "hotpotqa" / "hotpot_dev_distractor_sample100.json"), "max_samples": 24,
           "chunk_tokens": 64, "num_chunks": 6, "threshold": 2, "num_rejected": 2, "target_window": 4096,
           "generator": {"model": "smollm2-135m", "backend": "logo-fake", "max_new_tokens": 12},
           "seed": 0, "out_dir": str(out_dir), "shard_size": 10}
    for key, value in kw.items():
        cfg[key] = {**cfg[key], **value} if isinstance(value, dict) and isinstance(cfg.get(key), dict) else value
    return cfg


@pytest.fixture
def logo_config(data_dir):
    """make(out_dir, **changes) -> raw LOGO data config (dicts merge into dicts, e.g. generator={...})."""
    return lambda out_dir, **kw: logo_data_config(out_dir, data_dir, **kw)


@pytest.fixture(scope="session")
def logo_data(tmp_path_factory, data_dir) -> Path:
    """24 HotpotQA questions -> LOGO data (6 chunks of 64 tokens, M = 2, K = 4096) in 3 shards."""
    from ctxbench.trainers.data.synthesis import synthesize
    from ctxbench.trainers.logo.data import LogoDataConfig

    out = tmp_path_factory.mktemp("logo") / "data"
    m = synthesize("logo", LogoDataConfig(**logo_data_config(out, data_dir)))
    assert m["complete"] and m["samples"] >= 20
    return out
