"""Continued pretraining (`cpt`): causal-LM loss on packed sequences streamed from shards.

The data is a packed directory (trainers.data.shards: manifest + .npy shards), either given or
synthesized first from `data.synthesis` (resumable). Sequences are memory-mapped, so corpora larger
than RAM train without loading. Validation loss comes from a held-out shard directory or the tail
of the packed data, every eval_steps and at the end. Context extension is the base config's `rope`.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ctxbench.harness.core.config import one_line
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.registry import register
from ctxbench.trainers.base import DataBundle, ScratchModel, TrainerConfig
from ctxbench.trainers.loop import HFTrainer


class CPTData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str | None = Field(None, description="packed-data directory (manifest.json + shards) to train on")
    synthesis: dict[str, Any] | None = Field(None, description="trainers.data.pipeline.SynthesisConfig keys: pack first "
                                             "(resumable; its out_dir is the data), then train")
    eval_path: str | None = Field(None, description="packed directory for validation; default: the tail of the training data")
    eval_sequences: int = Field(8, ge=0, description="sequences held out from the end of the data when eval_path is unset; "
                                "0 = no validation")
    max_sequences: int | None = Field(None, ge=1, description="train on at most this many sequences (after the holdout)")

    @model_validator(mode="after")
    def _one_source(self):
        if (self.path is None) == (self.synthesis is None):
            raise ValueError("give exactly one of data.path (packed directory) or data.synthesis (pack first)")
        return self


SYNTHESIS_TRAINERS = {"hqa": "hqa_sft", "logo": "logo"}  # synthesis method -> the trainer of its data in a study


class CPTStudyData(BaseModel):
    """A CPT method in a study: how the study's corpus is packed for it (the study sets corpus, budget and seed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    method: str = Field(description="packing method: standard, within_domain, splice, quest, knn, iclm")
    method_args: dict[str, Any] = Field(default_factory=dict, description="the method's arguments, e.g. {retriever: bm25, k: 1}")
    mix_ratio: float = Field(0.0, ge=0, le=1, description="fraction of standard-packed sequences mixed in (SPLICE: 0.5)")
    eval_sequences: int = Field(8, ge=0, description="packed sequences held out for the validation loss")
    max_sequences: int | None = Field(None, ge=1, description="train on at most this many sequences")

    @field_validator("method")
    @classmethod
    def _a_packing(cls, v: str) -> str:
        """Another synthesis method (hqa, logo, a plugin's) is compared through the trainer that trains on its data."""
        from ctxbench.trainers.data.methods import method_names
        from ctxbench.trainers.data.synthesis import synthesis_names

        if v not in method_names() and v in synthesis_names():
            how = f"trainer: {SYNTHESIS_TRAINERS[v]}" if v in SYNTHESIS_TRAINERS else "the trainer that trains on its data"
            raise ValueError(f"{v!r} is a synthesis method but not a packing, and cpt trains on packed sequences "
                             f"({', '.join(method_names())}); give this study method {how}")
        return v

    @model_validator(mode="after")
    def _method(self):
        from ctxbench.trainers.data.methods import parse_args

        try:
            parse_args(self.method, self.method_args)
        except ConfigError as e:
            raise ValueError(str(e)) from None
        return self


class CPTConfig(TrainerConfig):
    """Continued pretraining on packed sequences; see TrainerConfig for the shared settings."""

    data: CPTData = Field(description="where the packed training sequences come from")


class PackedSequences:
    """Map-style dataset over rows [start, stop) of a packed directory's shards, memory-mapped on first use."""

    def __init__(self, directory: Path, start: int = 0, stop: int | None = None):
        from ctxbench.trainers.data.shards import read_manifest

        self.dir = Path(directory)
        m = read_manifest(self.dir)
        if m is None:
            raise ConfigError(f"data: {self.dir} has no manifest.json; run the packing (ctxbench synthesize) first")
        self.manifest = m
        self.shards = list(m.shards)
        self.counts = [int(np.load(self.dir / s, mmap_mode="r").shape[0]) for s in self.shards]
        self.ends = list(np.cumsum(self.counts))
        total = self.ends[-1] if self.ends else 0
        self.start, self.stop = start, total if stop is None else min(stop, total)
        self._open: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return max(0, self.stop - self.start)

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        if not 0 <= i < len(self):
            raise IndexError(i)
        row = self.start + i
        k = bisect.bisect_right(self.ends, row)
        if k not in self._open:
            self._open[k] = np.load(self.dir / self.shards[k], mmap_mode="r")
        first = self.ends[k] - self.counts[k]
        return {"input_ids": np.asarray(self._open[k][row - first], dtype=np.int64)}


def collate_packed(rows: list[dict[str, np.ndarray]]) -> dict[str, Any]:
    """Full packed sequences, no padding; the model shifts labels itself. The all-ones attention mask changes no
    logit: it is there so that non-padding token accounting counts every token (the pad id is often EOS, the
    document separator in packed data). position_ids are the model's own default (0..S-1, one causal window over
    the packed documents); sequence parallelism needs them explicit, to keep each shard's global positions."""
    import torch

    ids = torch.from_numpy(np.stack([r["input_ids"] for r in rows]))
    positions = torch.arange(ids.shape[1]).expand_as(ids).clone()
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone(), "position_ids": positions}


@register("trainer", "cpt")
class CPTTrainer(HFTrainer):
    """Causal-LM continued pretraining with the transformers Trainer."""

    name = "cpt"
    config_cls = CPTConfig
    study_data_cls = CPTStudyData

    @classmethod
    def study_data_config(cls, options: CPTStudyData, inputs) -> dict[str, Any]:
        """Pack the study's training split with the method (data.synthesis: prepare_data packs it, resumably)."""
        synthesis = {"corpus": inputs.corpus, "method": options.method, "method_args": options.method_args,
                     "mix_ratio": options.mix_ratio, "seq_len": inputs.seq_len, "budget_tokens": inputs.budget_tokens,
                     "tokenizer": inputs.tokenizer, "seed": inputs.seed, "out_dir": str(inputs.out_dir)}
        return {"synthesis": synthesis, "eval_sequences": options.eval_sequences, "max_sequences": options.max_sequences}

    def corpus_documents(self) -> frozenset[str] | None:
        from ctxbench.trainers.data.pipeline import packed_document_ids

        return packed_document_ids(self.data.info["path"])

    def data_diagnostics(self) -> dict[str, Any] | None:
        from ctxbench.trainers.data.diagnostics import inspect

        return inspect(self.data.info["path"], sample=64)["report"]

    def data_dir(self) -> Path:
        d = self.config.data
        if d.path is not None:
            return Path(d.path)
        from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize
        from ctxbench.trainers.data.shards import read_manifest
        from ctxbench.trainers.data.stdlib_corpus import resolve_corpus

        raw = dict(d.synthesis)
        out = Path(str(raw.get("out_dir", "packed")))
        if isinstance(raw.get("corpus"), dict):  # 'stdlib:' corpora are copied next to the packed data
            raw["corpus"] = resolve_corpus(raw["corpus"], out.parent)
        try:
            cfg = SynthesisConfig(**raw)
        except ValidationError as e:
            raise ConfigError(one_line(e, "data.synthesis")) from None
        if self.is_main:
            synthesize(cfg)
        else:  # other ranks wait for rank 0's packing instead of packing the same data concurrently
            while not ((m := read_manifest(Path(cfg.out_dir))) and m.complete):
                time.sleep(10)
        return Path(cfg.out_dir)

    def prepare_data(self) -> DataBundle:
        d = self.config.data
        directory = self.data_dir()
        full = PackedSequences(directory)
        m = full.manifest
        if not m.complete:
            raise ConfigError(f"data.path: the packing in {directory} is incomplete; rerun its synthesis to finish it")
        self._check_tokenizer(m.tokenizer)
        n = len(full)
        if d.eval_path:
            evalset = PackedSequences(Path(d.eval_path))
            if evalset.manifest.seq_len != m.seq_len:
                raise ConfigError(f"data.eval_path: sequences of {evalset.manifest.seq_len} tokens, training data has {m.seq_len}")
            stop, eval_hash = n, evalset.manifest.data_hash
        else:
            if d.eval_sequences >= n:
                raise ConfigError(f"data.eval_sequences: {d.eval_sequences} of the {n} packed sequences leaves none to train on;"
                                  " lower it, pack more data, or set data.eval_path")
            stop = n - d.eval_sequences
            evalset = PackedSequences(directory, stop, n) if d.eval_sequences else None
            eval_hash = f"tail{d.eval_sequences}"
        if d.max_sequences:
            stop = min(stop, d.max_sequences)
        train = PackedSequences(directory, 0, stop)
        blob = json.dumps([m.data_hash, eval_hash, len(train)])
        info = {"path": str(directory), "method": m.method, "tokenizer": m.tokenizer, "sequences": len(train),
                "tokens": len(train) * m.seq_len, "eval_sequences": len(evalset) if evalset else 0,
                "eval_tokens": len(evalset) * m.seq_len if evalset else 0, "packing_config_hash": m.config_hash}
        return DataBundle(train, evalset if evalset else None, hashlib.sha256(blob.encode()).hexdigest()[:16], m.seq_len,
                          m.seq_len, info)

    def _check_tokenizer(self, packed_with: str) -> None:
        """Token ids mean nothing under another vocabulary: refuse data packed with a different tokenizer."""
        b = self.config.base_model
        mine = b.tokenizer if isinstance(b, ScratchModel) else b
        if packed_with == mine:
            return
        from ctxbench.harness.core.models import load_tokenizer, tokenizer_fingerprint

        try:
            theirs = tokenizer_fingerprint(load_tokenizer(packed_with))
        except Exception:  # noqa: BLE001 - unloadable name: cannot compare, trust the user
            return
        if theirs != tokenizer_fingerprint(self.tokenizer):
            raise ConfigError(f"data: packed with tokenizer {packed_with!r}, but the model uses {mine!r}; "
                              "repack with the model's tokenizer")

    def data_collator(self):
        return collate_packed

    def plan_workloads(self) -> list[Any]:
        """One workload: the packed sequence length (from the synthesis settings, or the packed data's manifest)."""
        from ctxbench.trainers.data.shards import read_manifest
        from ctxbench.trainers.memory_plan import workload

        d, c = self.config.data, self.config
        m = None if d.synthesis else read_manifest(Path(d.path))
        seq = int(d.synthesis.get("seq_len", 0)) if d.synthesis else (m.seq_len if m else 0)
        if not seq:
            raise ConfigError(f"data: no seq_len known for the plan (no synthesis.seq_len and no packed data at {d.path})")
        return [workload(c, c.label or self.name, seq_len=seq, sequences=c.per_device_batch_size)]
