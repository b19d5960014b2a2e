"""`hqa_sft`: answer-only SFT on hierarchical-QA conversations, in stepwise RoPE stages (§4.1, §4.2).

A config lists stages [{name, data, seq_len, rope, epochs|max_steps}]. Each stage is an ordinary run of the
shared loop (its own run id, checkpoint, ctxbench_manifest.json and losses.jsonl); stage k starts from stage
k-1's checkpoint, and its config hash includes stage k-1's, so a retrained earlier stage retrains the later
ones. The loss is the mean cross-entropy over the answer tokens of the whole (accumulated) batch, with the LM
head applied only at those positions: 180K positions x a 128K vocabulary of logits would not fit.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ctxbench.harness.core.config import validate_config
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.identity import content_hash
from ctxbench.harness.core.registry import register
from ctxbench.trainers.base import DataBundle, RopeSpec, ScratchModel, TrainerConfig, TrainResult, config_path
from ctxbench.trainers.context_parallel import SequenceParallel
from ctxbench.trainers.hqa.chat import IGNORE
from ctxbench.trainers.hqa.loss import answer_only_trainer_class, pad_collator
from ctxbench.trainers.hqa.study import HQAStudyData
from ctxbench.trainers.loop import HFTrainer


class StageSpec(BaseModel):
    """One RoPE stage (§4.2: 180K -> 350K -> 650K -> 1M)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(description="stage name (run label suffix, --stage NAME)")
    data: str = Field(description="hqa data YAML (synthesized first, resumable) or a synthesized directory (manifest.json)")
    data_args: dict[str, Any] = Field(default_factory=dict, description="overrides of the data YAML's keys for this stage, "
                                      "e.g. {documents_per_sample: 1, target_tokens: 1024, out_dir: ...}")
    seq_len: int = Field(ge=16, description="longest conversation of this stage in tokens; longer ones are refused, never cut")
    rope: RopeSpec | None = Field(None, description="RoPE theta/type/factor of this stage (the paper gives no values)")
    epochs: int | None = Field(None, ge=1, description="passes over the stage's data (§4.2: 1); default 1 unless max_steps")
    max_steps: int | None = Field(None, ge=1, description="optimizer steps instead of epochs")
    learning_rate: float | None = Field(None, gt=0, description="this stage's peak learning rate; default the config's")
    sequence_parallel: Annotated[int, Field(ge=1)] | SequenceParallel = Field(
        1, description="this stage's layout (paper: Ulysses for 650K/1M): N is DeepSpeed-Ulysses (needs deepspeed), "
        "{ring: N} ring attention (FSDP2, GPUs or CPUs); launch a multiple of the degree processes")

    @model_validator(mode="after")
    def _length(self):
        if self.epochs is not None and self.max_steps is not None:
            raise ValueError("give epochs or max_steps, not both")
        return self


class HQASFTConfig(TrainerConfig):
    """Stepwise hierarchical-QA SFT; the shared settings apply to every stage."""

    stages: list[StageSpec] = Field(min_length=1, description="RoPE stages, in order of increasing seq_len")
    eval_samples: int = Field(0, ge=0, description="conversations held out from the end of each stage's data for validation")

    @model_validator(mode="after")
    def _stages(self):
        if self.rope is not None or self.max_steps is not None or self.sequence_layout.degree != 1:
            raise ValueError("rope, max_steps and sequence_parallel are per stage: set them under stages[]")
        names = [s.name for s in self.stages]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise ValueError(f"stages: two stages are named {dup!r}")
        lens = [s.seq_len for s in self.stages]
        for a, b, s in zip(lens, lens[1:], self.stages[1:]):
            if b <= a:
                raise ValueError(f"stages: seq_len must increase from stage to stage; stage {s.name!r} has {b} after {a}")
        return self


class HQAStageConfig(TrainerConfig):
    """One resolved stage: an ordinary training run (built by HQASFTTrainer, not written by hand)."""

    stage: str = Field(description="stage name")
    data: str = Field(description="hqa data YAML or synthesized directory")
    data_args: dict[str, Any] = Field(default_factory=dict, description="overrides of the data YAML")
    data_identity: str = Field(description="config hash of the data this stage trains on")
    seq_len: int = Field(ge=16, description="longest conversation in tokens")
    epochs: int | None = Field(None, ge=1, description="passes over the data")
    previous_stage: str | None = Field(None, description="config hash of the stage this one starts from")
    eval_samples: int = Field(0, ge=0, description="conversations held out for validation")


def data_identity(data: str, data_args: dict[str, Any]) -> str:
    """What the stage trains on, without synthesizing: the data YAML's config hash, or a directory's manifest's."""
    from ctxbench.trainers.hqa.data import load_data_config, read_manifest

    p = config_path(data, field="stages.data")
    if p.is_dir():
        m = read_manifest(p)
        if not m:
            raise ConfigError(f"stages.data: {p} has no manifest.json; point it at a data YAML or run `ctxbench data hqa`")
        return m["config_hash"]
    if data_args and p.suffix not in (".yaml", ".yml"):
        raise ConfigError(f"stages.data_args: only a data YAML takes overrides, {data} is not one")
    return load_data_config(p, **data_args).config_hash()


ANSWER_SHARE = 0.05  # --plan: share of a conversation's tokens that are answers (whose logits the loss computes)


# --- one stage ----------------------------------------------------------------------------------
class StageTrainer(HFTrainer):
    """One stage: answer-only SFT on one synthesized data set at one seq_len and RoPE setting."""

    name = "hqa_sft"
    config_cls = HQAStageConfig
    tokenizer_from: HFTrainer | None = None  # the multi-stage trainer whose base model's tokenizer every stage uses

    @property
    def tokenizer(self):
        if self._tokenizer is None and self.tokenizer_from is not None:
            self._tokenizer = self.tokenizer_from.tokenizer
        return super().tokenizer

    def data_dir(self) -> Path:
        from ctxbench.trainers.data.synthesis import synthesize
        from ctxbench.trainers.hqa.data import load_data_config

        c = self.config
        p = config_path(c.data, field="stages.data")
        if p.is_dir():
            return p
        cfg = load_data_config(p, **c.data_args)
        if self.is_main:
            synthesize("hqa", cfg)
        else:  # other ranks wait for rank 0's synthesis instead of calling the generator concurrently
            import time

            from ctxbench.trainers.hqa.data import read_manifest

            while not ((m := read_manifest(cfg.out_dir)) and m.get("complete")):
                time.sleep(10)
        return Path(cfg.out_dir)

    def prepare_data(self) -> DataBundle:
        from ctxbench.harness.core.models import tokenizer_fingerprint
        from ctxbench.trainers.hqa.chat import require_chat_template, tokenize
        from ctxbench.trainers.hqa.data import read_conversations, read_manifest

        c = self.config
        b = c.base_model
        require_chat_template(self.tokenizer, "base_model", b.tokenizer if isinstance(b, ScratchModel) else b)
        directory = self.data_dir()
        m = read_manifest(directory)
        rows = read_conversations(directory)
        mine = tokenizer_fingerprint(self.tokenizer)
        if m["tokenizer_fingerprint"] != mine:
            raise ConfigError(f"stages.data: {directory} was synthesized with tokenizer {m['tokenizer']!r} ({m['tokenizer_fingerprint']}), "
                              f"the model's is {mine}; synthesize it again with the model's tokenizer")
        samples = []
        for row in rows:
            ids, labels = tokenize(self.tokenizer, row["conversations"])
            if len(ids) > c.seq_len:
                raise ConfigError(f"stages.{c.stage}.seq_len: conversation {row['meta']['id']} has {len(ids)} tokens > {c.seq_len}; "
                                  "conversations are never cut: synthesize with target_tokens <= seq_len")
            samples.append({"input_ids": np.asarray(ids, dtype=np.int32), "labels": np.asarray(labels, dtype=np.int32)})
        if c.eval_samples >= len(samples):
            raise ConfigError(f"eval_samples: {c.eval_samples} of {len(samples)} conversations leaves none to train on")
        cut = len(samples) - c.eval_samples
        train, held = samples[:cut], samples[cut:] or None
        count = lambda xs, key: int(sum(int((x[key] != IGNORE).sum()) if key == "labels" else len(x[key]) for x in xs))  # noqa: E731
        info = {"path": str(directory), "data_config_hash": m["config_hash"], "generator_fingerprint": m["generator_fingerprint"],
                "tokenizer": m["tokenizer"], "conversations": len(train), "tokens": count(train, "input_ids"),
                "answer_tokens": count(train, "labels"), "eval_conversations": len(held or []),
                "eval_tokens": count(held or [], "input_ids"), "generator_drops": m.get("drops", {}),
                "qas_requested": sum((m.get("counts") or {}).get("qas_requested", {}).values()),
                "qas_kept": sum((m.get("counts") or {}).get("qas_generated", {}).values())}
        data_hash = content_hash([m["data_hash"], mine, c.seq_len, c.eval_samples, len(train)])
        per_seq = max(1, info["tokens"] // max(1, len(train)))
        self.data_info = info
        return DataBundle(train, held, data_hash, c.seq_len, per_seq, info)

    def steps_for(self, data: DataBundle) -> int:
        c = self.config
        per_step = c.per_device_batch_size * c.gradient_accumulation_steps * self.data_parallel_size()
        return c.max_steps or (c.epochs or 1) * max(1, math.ceil(len(data.train) / per_step))

    def training_arguments(self, data: DataBundle) -> dict[str, Any]:
        return {**super().training_arguments(data), "include_num_input_tokens_seen": "non_padding",
                "prediction_loss_only": True, **self.config.extra_args}

    def data_collator(self):
        tok = self.tokenizer
        c = self.config
        return pad_collator(tok.pad_token_id if tok.pad_token_id is not None else 0,
                            c.seq_len if c.sequence_layout.degree > 1 else None)

    def hf_trainer_class(self) -> type:
        return answer_only_trainer_class(self.config.loss_chunk_tokens)

    def manifest_extra(self, hf) -> dict[str, Any]:
        """The stage, and answer tokens: those the loss saw in this process (a resumed run counts from its checkpoint
        on) and those in the data; data_info carries the generator's drop counts into the manifest."""
        info = getattr(self, "data_info", {})
        requested, kept = info.get("qas_requested") or 0, info.get("qas_kept") or 0
        summary = {"answer_tokens": info.get("answer_tokens"), "unit": "QA", "requested": requested, "kept": kept,
                   "drops": info.get("generator_drops", {})}
        return {"stage": self.config.stage, "answer_tokens": {"trained": int(getattr(hf, "answer_tokens", 0)),
                                                              "data": info.get("answer_tokens")}, "data_info": info,
                "data_summary": summary}


# --- all stages ---------------------------------------------------------------------------------
@register("trainer", "hqa_sft")
class HQASFTTrainer(StageTrainer):
    """Runs the stages in order (finished ones are skipped); train() returns the last stage's result."""

    config_cls = HQASFTConfig
    staged = True
    study_data_cls = HQAStudyData

    # --- as a study method (trainers/hqa/study.py) --------------------------------------------------
    @classmethod
    def study_config(cls, settings: dict[str, Any], options: HQAStudyData, inputs) -> dict[str, Any]:
        """The study's settings with every stage's data synthesized from the study corpus (held-out documents out)."""
        from ctxbench.trainers.hqa.study import study_stages

        return {**settings, "stages": study_stages(settings, options, inputs)}

    @property
    def data(self) -> DataBundle:  # a study reads the data of the checkpoint it scores: the last stage's
        return self.stage_trainers()[-1].data

    def is_finished(self) -> bool:
        return all(t.is_finished() for t in self.stage_trainers())

    def corpus_documents(self) -> frozenset[str] | None:
        from ctxbench.trainers.hqa.study import corpus_documents

        return corpus_documents(self.stage_trainers())

    def data_diagnostics(self) -> dict[str, Any] | None:
        from ctxbench.trainers.hqa.study import diagnostics

        return diagnostics(self.stage_trainers())

    def __init__(self, config: HQASFTConfig, *, console: Any = None, stage: str | None = None):
        super().__init__(config, console=console)
        names = [s.name for s in config.stages]
        if stage is not None and stage not in names:
            raise ConfigError(f"--stage: no stage named {stage!r}; stages are {', '.join(names)}")
        self.until = stage
        self.results: list[TrainResult] = []
        self._stages: list[StageTrainer] | None = None

    @property
    def run_id(self) -> str:  # a multi-stage run is known by its last stage (whose checkpoint it returns)
        return self.stage_trainers()[-1].run_id

    @property
    def output_dir(self) -> Path:
        return self.stage_trainers()[-1].output_dir

    def planned_stages(self) -> list:
        """The stage configs this trainer runs: all, or those up to and including --stage."""
        names = [s.name for s in self.config.stages]
        return self.config.stages[: names.index(self.until) + 1] if self.until is not None else list(self.config.stages)

    def _stage_config(self, i: int, st: Any, base: Any, previous: str | None) -> HQAStageConfig:
        c = self.config
        shared = c.model_dump(exclude={"stages", "eval_samples", "rope", "max_steps", "label", "output_dir", "base_model"})
        stem = c.label or (self.base_name if isinstance(c.base_model, ScratchModel) else Path(str(c.base_model)).name)
        raw = {**shared, "base_model": base, "label": f"{stem}-{st.name}", "stage": st.name, "data": st.data,
               "data_args": st.data_args, "data_identity": data_identity(st.data, st.data_args), "seq_len": st.seq_len,
               "rope": st.rope, "epochs": st.epochs, "max_steps": st.max_steps, "sequence_parallel": st.sequence_parallel,
               "learning_rate": st.learning_rate or c.learning_rate, "previous_stage": previous, "eval_samples": c.eval_samples,
               "output_dir": str(Path(c.output_dir) / st.name) if c.output_dir else None}
        return validate_config(HQAStageConfig, raw, where=f"stages.{i}")

    def stage_configs(self) -> list[HQAStageConfig]:
        """Every planned stage's config, validated (its data config resolves) without making data or loading a tokenizer:
        a later stage's base stands for the previous stage's checkpoint, whose path is known only once its data is."""
        out: list[HQAStageConfig] = []
        base: Any = self.config.base_model
        for i, st in enumerate(self.planned_stages()):
            out.append(self._stage_config(i, st, base, out[-1].config_hash() if out else None))
            base = f"<checkpoint of stage {st.name}>"
        return out

    def stage_trainers(self) -> list[StageTrainer]:
        """One ordinary run per planned stage, each starting from the previous stage's output directory.

        A run id hashes the stage's data, whose check needs the tokenizer; a later stage's base (the previous stage's
        checkpoint) does not exist before that stage trains, so later stages take the first stage's tokenizer (training
        never changes it, and every checkpoint saves it). Stages after --stage are not built: their data is not made."""
        if self._stages is not None:
            return self._stages
        out: list[StageTrainer] = []
        base: Any = self.config.base_model
        previous = None
        for i, st in enumerate(self.planned_stages()):
            cfg = self._stage_config(i, st, base, previous)
            trainer = StageTrainer(cfg, console=self.console)
            trainer.tokenizer_from = self  # stages keep the base model's tokenizer: a later stage's data (and run id)
            out.append(trainer)            # is known before the earlier stage has written its checkpoint
            base, previous = str(trainer.output_dir), cfg.config_hash()
        self._stages = out
        return out

    def plan_workloads(self) -> list[Any]:
        """One workload per stage: its seq_len and sequence-parallel degree on the base model's architecture (every stage
        trains it); the answer-only loss reads the logits of the answers (ANSWER_SHARE of the tokens, an estimate)."""
        from ctxbench.trainers.memory_plan import shape_of, workload

        shape = shape_of(self.config.base_model)
        return [workload(st.model_copy(update={"base_model": self.config.base_model}), f"stage {st.stage}",
                         seq_len=st.seq_len, sequences=st.per_device_batch_size, trainable=shape.params(),
                         logit_positions=ANSWER_SHARE, sequence_parallel=st.sequence_parallel)
                for st in self.stage_configs()]

    def train(self, *, callbacks=(), fresh: bool = False) -> TrainResult:
        from ctxbench.trainers.alst import check_alst
        from ctxbench.trainers.distributed import check_sequence_parallel, model_heads

        heads = model_heads(self.config.base_model)
        for st in self.stage_configs():  # refuse before any work (building the stages synthesizes their data)
            try:
                check_sequence_parallel(st.sequence_parallel, deepspeed=st.deepspeed, attn=st.attn_implementation,
                                        seq_len=st.seq_len, trainer=self.name, heads=heads, has_cuda=self._has_cuda())
                check_alst(st, world=self.world_size())
            except ConfigError as e:
                raise ConfigError(f"stages.{st.stage}.{e}") from None
        stages = self.stage_trainers()
        self.results = []
        for t in stages:
            if self.console is not None:
                self.console.print(f"[hqa_sft] stage {t.config.stage}: seq_len {t.config.seq_len:,}, base {t.base_name}")
            self.results.append(t.train(callbacks=callbacks, fresh=fresh))
        return self.results[-1]
