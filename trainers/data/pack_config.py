"""The config of a packing synthesis (`ctxbench data pack --config FILE`), apart from the pipeline that runs it, so
the packing registry can name it without importing the pipeline."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ctxbench.harness.core.identity import EXECUTION
from ctxbench.trainers.data.corpus import CorpusConfig


class SynthesisConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    corpus: CorpusConfig = Field(description="where the documents come from and how to read them")
    method: str = Field(description="packing method: standard, within_domain, splice, quest, knn or iclm")
    method_args: dict[str, Any] = Field(default_factory=dict, description="the method's arguments (see "
                                        "`ctxbench data methods`), e.g. splice: {retriever: bm25, k: 1, order: identity}")
    seq_len: int = Field(ge=16, description="tokens per training sequence (every sequence is exactly this long)")
    budget_tokens: int = Field(ge=1, description="tokens to synthesize; rounded up to whole sequences")
    mix_ratio: float = Field(0.0, ge=0, le=1, description="fraction of sequences from standard packing, interleaved "
                                                          "(the papers use 0.5)")
    mix_corpus: CorpusConfig | None = Field(None, description="corpus for the standard-packing share (default: corpus)")
    tokenizer: str = Field(description="alias, HF directory or .gguf for harness.models.load_tokenizer")
    seed: int = Field(0, description="seed of every random choice; same config + seed = same shards")
    out_dir: str = Field(description="directory for shards, side files and manifest.json", json_schema_extra=EXECUTION)
    shard_size: int = Field(0, ge=0, description="sequences per shard; 0 = about 16M tokens per shard")
    cache_dir: str | None = Field(None, description="token/index cache root (default: $CTXBENCH_CACHE/corpora)",
                                  json_schema_extra=EXECUTION)
    attention: Literal["cross_document", "per_document"] = Field(
        "cross_document", description="cross_document: a token attends to every earlier token of its sequence, other "
        "documents included; per_document: each document only to itself (the side files record where documents start, "
        "the trainer restarts position ids there and masks the prediction across a boundary)")
