"""A synthesis method, `example_sentences`: training samples of sentences drawn across a folder of .txt documents.

It runs through ctxbench's one synthesis skeleton (`ctxbench data pack --method example_sentences --config FILE`):
the skeleton computes the identity, reuses a finished identical out_dir, refuses a different one in one line, and
holds the out_dir's lock; this module says what the identity is made of and writes the shards (list_shard) and the
manifest (envelope, finish). It reads its documents through ctxbench's one corpus reader (open_corpus).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

# --8<-- [start:synthesis]
from ctxbench.harness.core.errors import ConfigError
from ctxbench.trainers.data import synthesis
from ctxbench.trainers.data.corpus import Corpus, open_corpus


class SentencesConfig(BaseModel):
    """The method's config file: every key is listed by `ctxbench data methods`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    documents: str = Field(description="a directory of .txt documents")
    sentences_per_sample: int = Field(4, ge=1, description="sentences drawn into each sample")
    min_words: int = Field(3, ge=1, description="shorter sentences are dropped (counted as sentences:too_short)")
    samples: int = Field(8, ge=1, description="samples to write")
    seed: int = Field(0, description="seed of the draws")
    shard_samples: int = Field(4, ge=1, description="samples per JSON-lines shard")
    out_dir: str = Field(description="where the shards and manifest.json go")


def _corpus(cfg: SentencesConfig) -> Corpus:
    corpus = open_corpus({"path": cfg.documents, "format": "text_dir"}, field="documents")
    if not corpus.files():
        raise ConfigError(f"documents: no .txt file in {cfg.documents}; point it at a folder of text documents")
    return corpus


def sentences_identity(cfg: SentencesConfig, **_) -> synthesis.Identity:
    """The config without where or how it is written, and the content of each input file (no generator)."""
    corpus = _corpus(cfg)
    inputs = synthesis.files_identity(corpus.files(), corpus.root)
    return synthesis.identity(cfg.model_dump(exclude={"out_dir", "shard_samples"}), inputs)


# produces="text": JSON-lines {"text": ...} rows listed in the manifest, which trainer="cpt" packs and trains on, so a
# study compares this method head to head with the packings (study method data: {method: example_sentences, ...})
@synthesis.register_synthesis("example_sentences", SentencesConfig, identity=sentences_identity, produces="text",
                              trainer="cpt")
def write_sentences(cfg: SentencesConfig, ident: synthesis.Identity) -> dict:
    """Example synthesis: samples of sentences drawn across documents (a plugin's data recipe)."""
    import numpy as np

    drops: Counter = Counter()
    pool = []
    for doc in _corpus(cfg).documents():
        for s in re.split(r"(?<=[.!?])\s+", doc.text):
            if len(s.split()) < cfg.min_words:
                drops["sentences:too_short"] += 1
            else:
                pool.append(" ".join(s.split()))
    rng = np.random.default_rng(cfg.seed)
    rows = [{"text": " ".join(pool[i] for i in rng.choice(len(pool), cfg.sentences_per_sample, replace=False))}
            for _ in range(cfg.samples)]
    out = Path(cfg.out_dir)
    manifest = {**synthesis.envelope("example_sentences", ident, drops=drops), "shards": [], "samples": len(rows)}
    for b in range(0, len(rows), cfg.shard_samples):  # each shard listed in the manifest once written
        text = "".join(json.dumps(r) + "\n" for r in rows[b:b + cfg.shard_samples])
        synthesis.list_shard(out, manifest, f"shard-{b // cfg.shard_samples:05d}.jsonl", {"": text})
    synthesis.remove_unlisted(out, set(manifest["shards"]), ("shard-*.jsonl",))  # left by an interrupted run
    return synthesis.finish(out, manifest, drops)

# --8<-- [end:synthesis]
