"""Continued pretraining (`cpt`): causal-LM loss on packed sequences streamed from shards.

The data is a packed directory (trainers.data.shards: manifest + .npy shards), either given or
synthesized first from `data.synthesis` (resumable); `data.text_synthesis` first runs a synthesis method that
produces text rows (a plugin's), whose output data.synthesis then packs (corpus format synthesis). Sequences are memory-mapped, so corpora larger
than RAM train without loading. Validation loss comes from a held-out shard directory or the tail
of the packed data, every eval_steps and at the end. Context extension is the base config's `rope`.
"""

from __future__ import annotations

import bisect
import time
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ctxbench.harness.core.config import one_line
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.identity import content_hash
from ctxbench.harness.core.registry import register
from ctxbench.trainers.base import DataBundle, ScratchModel, TrainerConfig
from ctxbench.trainers.loop import HFTrainer


class TextSynthesis(BaseModel):
    """A text-producing synthesis method (register_synthesis(..., produces="text")) and its config keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    method: str = Field(description="a synthesis method that produces text (`ctxbench data methods`)")
    config: dict[str, Any] = Field(description="the method's config keys, out_dir included")


class CPTData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str | None = Field(None, description="packed-data directory (manifest.json + shards) to train on")
    synthesis: dict[str, Any] | None = Field(None, description="trainers.data.pipeline.SynthesisConfig keys: pack first "
                                             "(resumable; its out_dir is the data), then train")
    eval_path: str | None = Field(None, description="packed directory for validation; default: the tail of the training data")
    eval_sequences: int = Field(8, ge=0, description="sequences held out from the end of the data when eval_path is unset; "
                                "0 = no validation")
    max_sequences: int | None = Field(None, ge=1, description="train on at most this many sequences (after the holdout)")
    text_synthesis: TextSynthesis | None = Field(None, description="a synthesis method producing text rows, run first "
                                                 "(resumable); data.synthesis packs its out_dir (corpus format: synthesis)")

    @model_validator(mode="after")
    def _one_source(self):
        if (self.path is None) == (self.synthesis is None):
            raise ValueError("give exactly one of data.path (packed directory) or data.synthesis (pack first)")
        if self.text_synthesis is not None and self.synthesis is None:
            raise ValueError("text_synthesis needs data.synthesis to pack its output (corpus: {path: <its out_dir>})")
        return self


class CPTStudyData(BaseModel):
    """A CPT method in a study: how the study's corpus is packed for it (the study sets corpus, budget and seed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    method: str = Field(description="packing method (standard, within_domain, splice, quest, knn, iclm), or a synthesis "
                        "method that produces text (a plugin's): its rows are packed with the standard packing")
    method_args: dict[str, Any] = Field(default_factory=dict, description="the method's arguments, e.g. {retriever: bm25, k: 1}; "
                                        "a text method: its config keys (out_dir and seed are the study's)")
    mix_ratio: float = Field(0.0, ge=0, le=1, description="fraction of standard-packed sequences mixed in (SPLICE: 0.5)")
    eval_sequences: int = Field(8, ge=0, description="packed sequences held out for the validation loss")
    max_sequences: int | None = Field(None, ge=1, description="train on at most this many sequences")

    @field_validator("method")
    @classmethod
    def _trainable(cls, v: str) -> str:
        """A packing, or a method producing text; others (hqa, logo) are compared through the trainer of their data."""
        from ctxbench.trainers.data.methods import method_names
        from ctxbench.trainers.data.synthesis import get_synthesis, synthesis_names

        if v in method_names() or v not in synthesis_names():
            return v  # an unknown name is refused by _method: "unknown synthesis method", with the closest name
        spec = get_synthesis(v)
        if spec.trainer is None:
            raise ValueError(f"synthesis method {v!r} declares no `produces` and trainer, so no trainer trains on its data; "
                             "declare it in register_synthesis (produces='text', trainer='cpt' for JSON-lines "
                             "{\"text\": ...} rows, which cpt packs)")
        if spec.trainer != "cpt":
            raise ValueError(f"{v!r} is a synthesis method producing {spec.produces} data, and cpt trains on packed "
                             f"sequences (packings: {', '.join(method_names())}; or a method producing text); give this "
                             f"study method trainer: {spec.trainer}")
        return v

    @property
    def is_text(self) -> bool:
        from ctxbench.trainers.data.methods import method_names

        return self.method not in method_names()

    @model_validator(mode="after")
    def _method(self):
        from ctxbench.trainers.data.methods import parse_args

        try:
            if not self.is_text:
                parse_args(self.method, self.method_args)
            elif self.mix_ratio:
                raise ConfigError("mix_ratio: a text method's rows are standard-packed as they are; remove mix_ratio")
            else:
                text_config(self.method, self.method_args, out_dir="text", seed=0)
        except ConfigError as e:
            raise ValueError(str(e)) from None
        return self


def text_config(method: str, args: dict[str, Any], *, out_dir: str, seed: int) -> dict[str, Any]:
    """A text method's config in a study: the user's keys plus the study's out_dir and seed (if the method has one)."""
    from ctxbench.harness.core.config import validate_config
    from ctxbench.trainers.data.synthesis import get_synthesis

    spec = get_synthesis(method)
    fixed = {"out_dir": out_dir, **({"seed": seed} if "seed" in spec.config.model_fields else {})}
    clash = sorted(set(fixed) & set(args))
    if clash:
        raise ConfigError(f"method_args: {clash[0]} is set by the study; remove it")
    validate_config(spec.config, {**args, **fixed}, where=f"method_args ({method})")
    return {**args, **fixed}


def run_text_synthesis(text: TextSynthesis) -> None:
    """Run the text method through the one synthesis core (reused when finished and identical)."""
    from ctxbench.harness.core.config import validate_config
    from ctxbench.trainers.data.synthesis import get_synthesis, synthesize

    spec = get_synthesis(text.method, field="data.text_synthesis.method")
    if spec.produces != "text":
        raise ConfigError(f"data.text_synthesis.method: {text.method!r} produces {spec.produces or 'nothing declared'}, "
                          "not text rows; name a method with produces='text'")
    spec.require_extra(for_=f"synthesis method {text.method}")
    synthesize(spec, validate_config(spec.config, text.config, where="data.text_synthesis.config"))


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
        self.per_document = m.config.get("attention") == "per_document"
        self._starts: dict[int, tuple[np.ndarray, np.ndarray]] = {}

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
        out = {"input_ids": np.asarray(self._open[k][row - first], dtype=np.int64)}
        if self.per_document:
            out["doc_starts"] = self._doc_starts(k, row - first)
        return out

    def _doc_starts(self, k: int, i: int) -> np.ndarray:
        """Where sequence i of shard k's documents start (the side file of a per_document packing)."""
        if k not in self._starts:
            with np.load(self.dir / self.shards[k].replace(".npy", ".docs.npz")) as side:
                self._starts[k] = (side["start_offsets"], side["starts"])
        offsets, starts = self._starts[k]
        return np.asarray(starts[offsets[i]:offsets[i + 1]], dtype=np.int64)


def document_positions(starts: np.ndarray, length: int) -> np.ndarray:
    """Position ids that restart at 0 at every document start (starts begins with 0)."""
    bounds = np.append(starts, length)
    return np.concatenate([np.arange(hi - lo) for lo, hi in zip(bounds[:-1], bounds[1:])])


def collate_packed(rows: list[dict[str, np.ndarray]]) -> dict[str, Any]:
    """Full packed sequences, no padding; the model shifts labels itself. The all-ones attention mask changes no
    logit: it is there so that non-padding token accounting counts every token (the pad id is often EOS, the
    document separator in packed data). position_ids are the model's own default (0..S-1, one causal window over
    the packed documents); sequence parallelism needs them explicit, to keep each shard's global positions."""
    import torch

    ids = torch.from_numpy(np.stack([r["input_ids"] for r in rows]))
    positions = torch.arange(ids.shape[1]).expand_as(ids).clone()
    labels = ids.clone()
    if "doc_starts" in rows[0]:  # per_document packing: positions restart per document; no loss across a boundary
        width = ids.shape[1]
        positions = torch.from_numpy(np.stack([document_positions(r["doc_starts"], width) for r in rows]))
        labels[positions == 0] = -100  # the first token of a document is not predicted from the one before it
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels, "position_ids": positions}


@register("trainer", "cpt")
class CPTTrainer(HFTrainer):
    """Causal-LM continued pretraining with the transformers Trainer."""

    name = "cpt"
    config_cls = CPTConfig
    study_data_cls = CPTStudyData

    @classmethod
    def study_data_config(cls, options: CPTStudyData, inputs) -> dict[str, Any]:
        """Pack the study's training split with the method (data.synthesis: prepare_data packs it, resumably); a text
        method writes its rows under out_dir/text (the study's seed), which the standard packing packs to out_dir/packed."""
        synthesis = {"corpus": inputs.corpus, "method": options.method, "method_args": options.method_args,
                     "mix_ratio": options.mix_ratio, "seq_len": inputs.seq_len, "budget_tokens": inputs.budget_tokens,
                     "tokenizer": inputs.tokenizer, "seed": inputs.seed, "out_dir": str(inputs.out_dir)}
        data: dict[str, Any] = {"eval_sequences": options.eval_sequences, "max_sequences": options.max_sequences}
        if options.is_text:
            text_out = str(Path(inputs.out_dir) / "text")
            data["text_synthesis"] = {"method": options.method, "config": text_config(
                options.method, options.method_args, out_dir=text_out, seed=inputs.seed)}
            synthesis.update(corpus={"path": text_out, "format": "synthesis"}, method="standard", method_args={},
                             out_dir=str(Path(inputs.out_dir) / "packed"))
        return {**data, "synthesis": synthesis}

    def corpus_documents(self) -> frozenset[str] | None:
        """The study corpus documents packed; None for a text method's rows (it reads what its own config names)."""
        from ctxbench.trainers.data.pipeline import packed_document_ids

        if self.config.data.text_synthesis is not None:
            return None

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
        for key in ("corpus", "mix_corpus"):  # 'stdlib:' corpora are copied next to the packed data
            if isinstance(raw.get(key), dict):
                raw[key] = resolve_corpus(raw[key], out.parent)
        try:
            cfg = SynthesisConfig(**raw)
        except ValidationError as e:
            raise ConfigError(one_line(e, "data.synthesis")) from None
        if self.is_main:
            if d.text_synthesis is not None:
                run_text_synthesis(d.text_synthesis)
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
        data_hash = content_hash([m.data_hash, eval_hash, len(train)])
        if train.per_document:  # the same tokens, attended per document, are other training data
            data_hash = content_hash([data_hash, "per_document"])
        info = {"path": str(directory), "method": m.method, "tokenizer": m.tokenizer, "sequences": len(train),
                "tokens": len(train) * m.seq_len, "eval_sequences": len(evalset) if evalset else 0,
                "eval_tokens": len(evalset) * m.seq_len if evalset else 0, "packing_config_hash": m.config_hash}
        return DataBundle(train, evalset if evalset else None, data_hash, m.seq_len,
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

    def per_document(self) -> bool:
        """Whether the packing attends per document (from the synthesis settings, or the packed data's manifest)."""
        from ctxbench.trainers.data.shards import read_manifest

        d = self.config.data
        if d.synthesis is not None:
            return d.synthesis.get("attention") == "per_document"
        m = read_manifest(Path(d.path))
        return m is not None and m.config.get("attention") == "per_document"

    def check_sequence_parallel(self, seq_len: int | None) -> None:
        super().check_sequence_parallel(seq_len)  # loss_chunk_tokens runs under a ring: its head is in the forward
        if self.per_document():
            from ctxbench.trainers.context_parallel import check_per_document

            check_per_document(self.config.sequence_layout, self.config.attn_implementation)

    def hf_trainer_class(self) -> type:
        """The chunked loss (loss_chunk_tokens) and per-document attention need the packed-LM trainer."""
        from ctxbench.trainers.chunked_loss import packed_lm_trainer_class

        chunk, per_document = self.config.loss_chunk_tokens, self.per_document()
        return packed_lm_trainer_class(chunk, per_document) if chunk or per_document else super().hf_trainer_class()

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
