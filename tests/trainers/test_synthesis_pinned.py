"""Synthesis moves behaviour, not results: every data method's output files on tiny inputs are pinned by sha256.

The pins were recorded on the code before the one-synthesis-core refactor (tests/trainers/data/synthesis_pins.json).
Shards and side files must stay byte-identical; the manifest and the generator call cache may change (schema field,
cache keys), so they are not pinned. An .npz is pinned by its arrays (a zip member carries a write time).
To re-record after an intended change of results: CTXBENCH_RECORD_PINS=1 python3 -m pytest -q this file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

PINS = Path(__file__).parent / "data" / "synthesis_pins.json"
RECORD = os.environ.get("CTXBENCH_RECORD_PINS") == "1"
SEQ = 512
PACKINGS = {
    "standard": {},
    "within_domain": {},
    "splice-bm25": {"retriever": "bm25", "k": 1, "order": "identity"},
    "splice-repo": {"retriever": "repo", "k": 1, "order": "shuffle"},
    "splice-dense": {"retriever": "dense", "embedder": "hash", "k": 2, "order": "reverse"},
    "quest": {"split_ratio": 0.3},
    "knn": {"retriever": "dense", "embedder": "hash"},
    "iclm": {"retriever": "bm25", "knn_k": 4, "cluster_size": 5},
}
UNPINNED = {"manifest.json", "generations.jsonl"}


def file_digest(path: Path) -> str:
    if path.suffix != ".npz":
        return hashlib.sha256(path.read_bytes()).hexdigest()
    h = hashlib.sha256()
    with np.load(path) as z:
        for key in sorted(z.files):
            h.update(key.encode() + z[key].tobytes() + str(z[key].dtype).encode())
    return h.hexdigest()


def digests(out: Path) -> dict[str, str]:
    return {f.name: file_digest(f) for f in sorted(out.iterdir())
            if f.is_file() and f.name not in UNPINNED and not f.name.startswith(".")}


def check(name: str, got: dict[str, str]) -> None:
    pins = json.loads(PINS.read_text()) if PINS.exists() else {}
    if RECORD:
        pins[name] = got
        PINS.parent.mkdir(parents=True, exist_ok=True)
        PINS.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
        return
    assert name in pins, f"no pins for {name}; record them with CTXBENCH_RECORD_PINS=1"
    assert got == pins[name]


@pytest.fixture(scope="module")
def essays_repo(tmp_path_factory, data_dir) -> Path:
    """24 essays in three top-level folders: a small repository with domains (fixed contents, sorted paths)."""
    root = tmp_path_factory.mktemp("essays")
    for i, f in enumerate(sorted((data_dir / "pg_essays").glob("*.txt"))[:24]):
        (root / f"part{i % 3}").mkdir(exist_ok=True)
        shutil.copyfile(f, root / f"part{i % 3}" / f.name)
    return root


@pytest.mark.parametrize("name", sorted(PACKINGS))
def test_packing_outputs_are_pinned(tmp_path, smol_tokenizer, essays_repo, name):
    from ctxbench.trainers.data.corpus import CorpusConfig
    from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize

    method = name.split("-")[0]
    cfg = SynthesisConfig(corpus=CorpusConfig(path=str(essays_repo), format="repo", include=["*.txt"], max_doc_tokens=384),
                          method=method, method_args=PACKINGS[name], seq_len=SEQ, budget_tokens=7 * SEQ,
                          mix_ratio=0.5 if name == "splice-bm25" else 0.0, tokenizer="smollm2-135m",
                          out_dir=str(tmp_path / "out"), shard_size=3, cache_dir=str(tmp_path / "cache"))
    m = synthesize(cfg, tokenizer=smol_tokenizer)
    assert m.complete and len(m.shards) == 3
    check(f"pack/{name}", digests(tmp_path / "out"))


def test_hqa_outputs_are_pinned(tmp_path, smol_tokenizer, data_dir):
    from ctxbench.trainers.data.synthesis import synthesize
    from tests.trainers.test_hqa_data import stub_generator, tiny_data

    cfg = tiny_data(tmp_path, data_dir)
    m = synthesize("hqa", cfg, generator=stub_generator(cfg, smol_tokenizer))
    assert m["complete"] and m["samples"] == 3
    check("hqa", digests(tmp_path / "out"))


def test_logo_outputs_are_pinned(tmp_path, logo_config):
    from ctxbench.trainers.data.synthesis import synthesize
    from ctxbench.trainers.logo.data import LogoDataConfig

    m = synthesize("logo", LogoDataConfig(**logo_config(tmp_path / "out", max_samples=12)))
    assert m["complete"] and m["samples"] >= 8
    check("logo", digests(tmp_path / "out"))
