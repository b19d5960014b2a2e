"""Issue 32 Low: a kill -9 during `data pack` between listing a shard and deleting the previous packer state left
an orphan state-N.npz that no resume removed. The resume now removes every state before the last listed shard's."""

from __future__ import annotations

import pytest

from ctxbench.trainers.data import pipeline
from ctxbench.trainers.data.pipeline import synthesize
from ctxbench.trainers.data.shards import read_manifest

from .test_pack_resume import Killed, config


def test_a_kill_between_listing_and_deleting_the_old_state_leaves_no_orphan(tmp_path, smol_tokenizer, monkeypatch):
    cache = tmp_path / "cache"
    synthesize(config(tmp_path / "a", cache, "standard", {}, 0.0), tokenizer=smol_tokenizer)
    cfg = config(tmp_path / "b", cache, "standard", {}, 0.0)
    listed = pipeline._listed
    calls = []

    def killed_before_the_unlink(out, n, *args):
        calls.append(n)
        if len(calls) == 3:
            raise Killed  # as kill -9 here: shard 3 is listed, state-00002.npz not yet deleted
        listed(out, n, *args)

    monkeypatch.setattr(pipeline, "_listed", killed_before_the_unlink)
    with pytest.raises(Killed):
        synthesize(cfg, tokenizer=smol_tokenizer)
    assert len(read_manifest(tmp_path / "b").shards) == 3
    assert (tmp_path / "b" / "state-00002.npz").exists() and (tmp_path / "b" / "state-00003.npz").exists()
    monkeypatch.setattr(pipeline, "_listed", listed)

    resumed = synthesize(cfg, tokenizer=smol_tokenizer)
    assert resumed.complete
    files = sorted(p.name for p in (tmp_path / "b").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "a").iterdir())  # one state, as an uninterrupted run leaves
