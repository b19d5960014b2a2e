"""The trainer interface: a validated config in; an HF checkpoint, a manifest and a loss log out.

A trainer is a registered class with a pydantic ``config_cls`` and four hooks that `trainers.loop.HFTrainer`
drives: ``prepare_data()``, ``build_model()``, ``data_collator()``, ``hf_trainer_class()``. Shared here:
RoPE context extension, DeepSpeed, resume from the last ``checkpoint-*``, the run directory in the store
(``record.json`` + append-only ``losses.jsonl``) and ``ctxbench_manifest.json`` beside the weights.

The next trainers plug in through the same hooks:
- hierarchical-QA SFT: prepare_data() tokenizes chat turns with labels -100 outside the answers (the HF
  loss is then answer-only); data_collator() pads input_ids/labels/attention_mask; RoPE stages are
  successive configs, each base_model the previous stage's output_dir.
- LOGO: prepare_data() yields (prompt, chosen, M rejected) with synthetic position_ids; data_collator()
  keeps position_ids; hf_trainer_class() returns a Trainer whose compute_loss is the LOGO objective
  plus the SFT term; build_model() wraps the model with LoRA.

A trainer becomes usable as a study method (harness/studies) by declaring how it makes its data from what a
study provides (StudyInputs): `study_data_cls` (its options in a study YAML), `study_data_config()` (its
config's `data` section), `corpus_documents()` and `data_diagnostics()`; see harness/studies/__init__.py.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ctxbench.harness.core.config import resolve_config
from ctxbench.harness.core.identity import EXECUTION, content_hash, identity_dump
from ctxbench.harness.core.io import append_jsonl, atomic_write_json, cut_torn_tail, read_jsonl
from ctxbench.trainers.context_parallel import SequenceParallel, layout

MANIFEST_NAME = "ctxbench_manifest.json"
RUN_MARK = "ctxbench_run.json"  # in output_dir: which config owns its checkpoints
LOSSES = "losses.jsonl"


class ScratchModel(BaseModel):
    """A model built from a config with random weights (tests, tiny CPU studies)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    config: dict[str, Any] = Field(description="transformers config keys; model_type defaults to llama, vocab_size and "
                                   "bos/eos/pad ids to the tokenizer's, e.g. {hidden_size: 64, num_hidden_layers: 2}")
    tokenizer: str = Field("smollm2-135m", description="tokenizer alias, dir or hub id; must be the one the data was packed with")


class RopeSpec(BaseModel):
    """Context extension through the model config (transformers 5: config.rope_parameters)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    theta: float | None = Field(None, gt=0, description="RoPE base (rope_theta): 1e6 CodeLlama-style, 1e5/5e6 Quest 32K/128K")
    type: Literal["default", "linear", "dynamic", "yarn", "llama3", "longrope"] | None = Field(
        None, description="RoPE scaling type; None keeps the model's")
    factor: float | None = Field(None, gt=0, description="scaling factor for linear/dynamic/yarn/llama3/longrope")
    original_max_position_embeddings: int | None = Field(
        None, ge=1, description="pre-extension window for yarn/llama3/longrope; default: the model's max_position_embeddings")
    max_position_embeddings: int | None = Field(
        None, ge=1, description="new context window written to the config; default: max(model's, training seq_len)")

    @model_validator(mode="after")
    def _factor(self):
        if self.type not in (None, "default") and self.factor is None:
            raise ValueError(f"rope.factor is required with rope.type {self.type!r}")
        return self


class TrainerConfig(BaseModel):
    """Settings every trainer shares; a trainer's config subclasses this and adds its data."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    base_model: str | ScratchModel = Field(description="alias (smollm2-135m), HF dir, hub id, or {config: {...}} to start from scratch")
    store: str = Field("runs", description="results store; the run directory (record.json, losses.jsonl) goes here",
                       json_schema_extra=EXECUTION)
    output_dir: str | None = Field(None, description="checkpoint directory (HF format); default <store>/<run_id>/model",
                                   json_schema_extra=EXECUTION)
    label: str | None = Field(None, description="name of the trained model in boards and fits; default: the run id",
                              json_schema_extra=EXECUTION)
    group: str | None = Field(None, description="curve group for `ctxbench fit` (e.g. '1.4B'); default: base model and size",
                              json_schema_extra=EXECUTION)
    rope: RopeSpec | None = Field(None, description="context extension: RoPE theta and/or scaling type and factor")
    max_steps: int | None = Field(None, ge=1, description="optimizer steps; default one pass over the training data")
    per_device_batch_size: int = Field(1, ge=1, description="sequences per device per micro-step")
    gradient_accumulation_steps: int = Field(1, ge=1, description="micro-steps per optimizer step")
    learning_rate: float = Field(2e-5, gt=0, description="peak learning rate (Quest 5e-5/4e-5/2e-5; SPLICE 1.5e-5)")
    lr_scheduler: str = Field("cosine", description="transformers scheduler name: cosine, linear, constant_with_warmup, ...")
    warmup_steps: float = Field(0, ge=0, description="warmup steps, or a fraction of max_steps when < 1")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay (Quest 0.1)")
    adam_beta1: float = Field(0.9, gt=0, lt=1, description="AdamW beta1")
    adam_beta2: float = Field(0.95, gt=0, lt=1, description="AdamW beta2 (Quest 0.95)")
    adam_epsilon: float = Field(1e-8, gt=0, description="AdamW epsilon")
    max_grad_norm: float = Field(1.0, ge=0, description="gradient clipping norm; 0 disables")
    precision: Literal["auto", "fp32", "bf16", "fp16"] = Field("auto", description="auto: bf16 on a GPU that has it, else fp32")
    gradient_checkpointing: bool = Field(False, description="recompute activations in backward: long sequences on less memory")
    attn_implementation: str = Field("sdpa", description="eager, sdpa or flash_attention_2")
    loss_chunk_tokens: int = Field(0, ge=0, description="compute the LM head and cross-entropy this many positions at a "
                                   "time, so the full logits are never held (long sequences, large vocabularies); 0 = off. "
                                   "The loss and gradients are the same (to float rounding)", json_schema_extra=EXECUTION)
    tiled_mlp: int = Field(0, ge=0, description="compute each MLP over the sequence in this many tiles, recomputed in "
                           "backward (DeepSpeed's ALST TiledMLP), so its tokens x intermediate activations exist one tile "
                           "at a time; Llama-style gated MLPs; 0 = off. The same loss and gradients (to float rounding)",
                           json_schema_extra=EXECUTION)
    activation_offload: bool = Field(False, description="keep what autograd saves for backward in CPU memory "
                                     "(torch.autograd.graph.save_on_cpu; with gradient_checkpointing: every layer's "
                                     "input), brought back layer by layer in backward; the same loss and gradients",
                                     json_schema_extra=EXECUTION)
    deepspeed: str | None = Field(None, description="zero3, zero3_offload (configs/deepspeed/) or a DeepSpeed JSON path")
    sequence_parallel: Annotated[int, Field(ge=1)] | SequenceParallel = Field(
        1, description="processes that share each sequence: N is DeepSpeed-Ulysses over N (needs deepspeed; divides the "
        "process count, the sequence length and the heads); {ring: N} is ring attention over N (FSDP2, on GPUs or "
        "CPUs, past the head count)", json_schema_extra=EXECUTION)
    eval_steps: int | None = Field(None, ge=1, description="validation every N steps; default save_steps (and always at the end)",
                                   json_schema_extra=EXECUTION)
    logging_steps: int = Field(1, ge=1, description="log the train loss every N steps", json_schema_extra=EXECUTION)
    save_steps: int = Field(50, ge=1, description="write checkpoint-N every N steps (what a rerun resumes from)",
                            json_schema_extra=EXECUTION)
    save_total_limit: int = Field(2, ge=1, description="checkpoints kept in output_dir", json_schema_extra=EXECUTION)
    delete_checkpoints: bool = Field(False, description="remove checkpoint-* once the final model is saved (they only "
                                     "serve resuming, and hold optimizer state)", json_schema_extra=EXECUTION)
    seed: int = Field(0, description="seed for weights (scratch), data order and dropout")
    threads: int = Field(0, ge=0, description="torch CPU threads; 0: on a CPU, the cores that other work leaves free "
                         "(measured at start), on a GPU torch's default", json_schema_extra=EXECUTION)
    dataloader_workers: int = Field(0, ge=0, description="DataLoader worker processes", json_schema_extra=EXECUTION)
    extra_args: dict[str, Any] = Field(default_factory=dict, description="more transformers.TrainingArguments keys (escape hatch)")

    @field_validator("deepspeed")
    @classmethod
    def _deepspeed_exists(cls, v):
        if v is not None:
            deepspeed_path(v)  # a preset, configs/deepspeed/NAME.json or a file: one line now, not after the data is made
        return v

    @property
    def sequence_layout(self) -> SequenceParallel:
        """`sequence_parallel` as a layout (an int is the Ulysses degree)."""
        return layout(self.sequence_parallel)

    def config_hash(self) -> str:
        """The keys that change the trained weights (harness/core/identity.py): the execution-only ones, marked where
        declared (where it is stored, threads, logging, checkpoints, the sequence-parallel layout), left out."""
        return content_hash(identity_dump(self))


@dataclass(frozen=True)
class DataBundle:
    """What prepare_data() hands the loop: map-style datasets and what identifies them."""

    train: Any
    eval: Any | None
    data_hash: str
    seq_len: int
    tokens_per_sequence: int
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TrainResult:
    run_id: str
    run_dir: Path
    checkpoint: Path
    steps: int
    tokens: int
    train_loss: float | None
    eval_loss: float | None
    resumed_from_step: int | None
    seconds: float
    skipped: bool = False  # True: an identical finished run was found; nothing was trained


@dataclass(frozen=True)
class StudyInputs:
    """What a study hands a trainer to make one method's training data for one seed."""

    corpus: dict[str, Any]  # CorpusConfig keys of the training split: exclude_ids leaves the held-out documents out
    tokenizer: str  # the base model's tokenizer
    seq_len: int  # the study's training sequence length
    budget_tokens: int  # tokens of training data per method (the same for every method)
    seed: int  # seed for making the data (the replicate's seed, or one shared seed: vary_packing)
    out_dir: Path  # this method's data directory for these inputs; the trainer owns it
    data_dir: Path | None  # shared public data (hotpotqa/, pg_essays/), for trainers that read it


class Trainer(Protocol):
    """What the CLI and studies call; HFTrainer implements train() on top of the four hooks."""

    name: ClassVar[str]
    config_cls: ClassVar[type[TrainerConfig]]

    def prepare_data(self) -> DataBundle: ...
    def build_model(self, data: DataBundle) -> Any: ...
    def data_collator(self) -> Callable[[list[dict[str, Any]]], dict[str, Any]]: ...
    def hf_trainer_class(self) -> type: ...
    def train(self, *, callbacks: Sequence[Any] = (), fresh: bool = False) -> TrainResult: ...


class TrainRun:
    """A training run in the results store: record.json plus append-only losses.jsonl.

    Each append is one write() on an O_APPEND descriptor, fsynced; a torn last line from a killed
    writer is cut off before the next append, as the scoring store does with samples.
    """

    def __init__(self, root: Path, run_id: str):
        self.dir = Path(root) / run_id
        self.record_path = self.dir / "record.json"
        self.losses_path = self.dir / LOSSES

    def write(self, record: dict[str, Any]) -> None:
        atomic_write_json(self.record_path, record)

    def read(self) -> dict[str, Any]:
        return json.loads(self.record_path.read_text())

    def reset(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def repair(self) -> None:
        cut_torn_tail(self.losses_path)

    def append(self, rows: list[dict[str, Any]]) -> None:
        append_jsonl(self.losses_path, rows)

    def losses(self) -> list[dict[str, Any]]:
        """Rows by (split, step), the last written winning: a resumed run re-logs steps after its checkpoint."""
        if not self.losses_path.exists():
            return []
        latest: dict[tuple[str, int], dict[str, Any]] = {}
        for r in read_jsonl(self.losses_path, require=("split", "step")):
            latest[(r["split"], r["step"])] = r
        return [latest[k] for k in sorted(latest)]


def load_config(cls: type[TrainerConfig], path: Path, **overrides: Any) -> TrainerConfig:
    """Read a YAML config; a bad key or value is one line naming it."""
    from ctxbench.harness.core.config import load_config as load

    return load(path, cls, kind="trainers", expect="trainer settings", **overrides)


def config_path(path: str, *, field: str = "data") -> Path:
    """A data config a trainer or study config names: a real file or directory, else the shipped one (from any directory)."""
    return resolve_config(path, kind="data", field=field)


def deepspeed_path(spec: str) -> Path:
    """A DeepSpeed JSON: a preset name (zero3, zero3_offload), configs/deepspeed/NAME.json, or a file."""
    return resolve_config(spec, kind="deepspeed", field="deepspeed")


def apply_rope(model_config: Any, rope: RopeSpec | None, seq_len: int) -> None:
    """Write theta / scaling into config.rope_parameters (per layer type where nested) and widen the window."""
    old_window = int(getattr(model_config, "max_position_embeddings", 0) or 0)
    if rope is not None:
        params = dict(getattr(model_config, "rope_parameters", None) or {})
        update: dict[str, Any] = {}
        if rope.theta is not None:
            update["rope_theta"] = float(rope.theta)
        if rope.type is not None:
            update["rope_type"] = rope.type
        if rope.factor is not None:
            update["factor"] = float(rope.factor)
        if rope.type in ("yarn", "llama3", "longrope", "dynamic"):
            update["original_max_position_embeddings"] = rope.original_max_position_embeddings or old_window
        nested = params and all(isinstance(v, dict) for v in params.values())
        model_config.rope_parameters = ({k: {**v, **update} for k, v in params.items()} if nested else {**params, **update})
    window = (rope.max_position_embeddings if rope and rope.max_position_embeddings else None) or max(old_window, seq_len)
    model_config.max_position_embeddings = int(window)


def loss_points(root: Path, *, run_ids: Sequence[str] = (), points: str = "final", split: str = "eval"):
    """(group, tokens, loss, run_id) points from the training runs of a store, for `ctxbench fit`.

    final: one point per finished run, its last `split` loss against tokens trained, grouped by the run's
    group (Quest: one run per data size D, a curve per model size); curve: every logged point of each
    run, one curve per run (its label).
    """
    import pandas as pd

    from ctxbench.harness.core.store import TRAINING, run_dirs

    rows = []
    for run_dir in run_dirs(root, TRAINING):
        rec = json.loads((run_dir / "record.json").read_text())
        if run_ids and rec["run_id"] not in run_ids:
            continue
        logged = [r for r in TrainRun(Path(root), rec["run_id"]).losses() if r["split"] == split]
        if points == "final":
            if logged and rec.get("status") == "complete":
                last = max(logged, key=lambda r: r["step"])
                rows.append((rec["group"], last["tokens"], last["loss"], rec["run_id"]))
        else:
            rows += [(rec.get("label") or rec["run_id"], r["tokens"], r["loss"], rec["run_id"]) for r in logged]
    return pd.DataFrame(rows, columns=["group", "tokens", "loss", "run_id"])
