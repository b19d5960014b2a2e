"""Resumable synthesis: a run killed after N shards and rerun equals an uninterrupted run, shard for shard."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import numpy as np
import pytest

from ctxbench.harness.core.errors import ConfigError
from ctxbench.trainers.data.corpus import CorpusConfig
from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize
from ctxbench.trainers.data.shards import iter_sequences, read_manifest

SRC = Path(sysconfig.get_paths()["stdlib"]) / "email"


class Killed(Exception):
    pass


def config(out: Path, cache: Path, method: str, args: dict, mix: float) -> SynthesisConfig:
    return SynthesisConfig(corpus=CorpusConfig(path=str(SRC), max_doc_tokens=384), method=method, method_args=args,
                           seq_len=512, budget_tokens=22 * 512, mix_ratio=mix, tokenizer="smollm2-135m",
                           out_dir=str(out), shard_size=3, cache_dir=str(cache), seed=5)


def kill_after(n_shards: int):
    calls = []

    def progress(done, total):
        calls.append(done)
        if len(calls) == n_shards:
            raise Killed

    return progress


@pytest.mark.parametrize("method,args,mix", [("splice", {"retriever": "bm25", "order": "shuffle"}, 0.5),
                                             ("quest", {}, 0.0), ("iclm", {"embedder": "hash"}, 0.0)])
def test_interrupted_run_resumes_to_the_same_shards(tmp_path, smol_tokenizer, method, args, mix):
    cache = tmp_path / "cache"
    whole = synthesize(config(tmp_path / "a", cache, method, args, mix), tokenizer=smol_tokenizer)
    cfg = config(tmp_path / "b", cache, method, args, mix)
    with pytest.raises(Killed):
        synthesize(cfg, progress=kill_after(3), tokenizer=smol_tokenizer)
    partial = read_manifest(tmp_path / "b")
    assert len(partial.shards) == 3 and not partial.complete
    (tmp_path / "b" / "shard-00003.npy").write_bytes(b"half-written")  # debris of a crash mid-shard
    resumed = synthesize(cfg, tokenizer=smol_tokenizer)
    assert resumed.complete and resumed.shards == whole.shards and resumed.tokens == whole.tokens == 22 * 512
    for name in whole.shards:
        assert np.array_equal(np.load(tmp_path / "a" / name), np.load(tmp_path / "b" / name))
        a, b = (np.load(tmp_path / d / name.replace(".npy", ".docs.npz")) for d in ("a", "b"))
        assert all(np.array_equal(a[k], b[k]) for k in a.files)
    files = sorted(p.name for p in (tmp_path / "b").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "a").iterdir())  # no duplicate or stray shards, one state
    assert sum(1 for _ in iter_sequences(tmp_path / "b")) == 22
    assert resumed.stats["methods"] == whole.stats["methods"]


def test_finished_run_returns_immediately_and_config_is_checked(tmp_path, smol_tokenizer):
    cfg = config(tmp_path / "a", tmp_path / "cache", "standard", {}, 0.0)
    first = synthesize(cfg, tokenizer=smol_tokenizer)
    stamp = (tmp_path / "a" / "manifest.json").stat().st_mtime_ns
    again = synthesize(cfg, tokenizer=smol_tokenizer)
    assert again.shards == first.shards and (tmp_path / "a" / "manifest.json").stat().st_mtime_ns == stamp
    other = cfg.model_copy(update={"seed": 6})
    with pytest.raises(ConfigError, match="out_dir"):
        synthesize(other, tokenizer=smol_tokenizer)
