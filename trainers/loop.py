"""The shared training loop over transformers.Trainer: model building, resume, loss log, manifest.

`HFTrainer.train()` drives a trainer's hooks (see trainers/base.py): prepare_data() -> build_model() ->
transformers Trainer (hf_trainer_class(), data_collator()) resumed from the last checkpoint-* of
output_dir -> final validation -> save_pretrained + tokenizer + ctxbench_manifest.json. A finished run
with the same config and data hash is not retrained.

A training is its config AND its data: the run id hashes both (so new data is a new run directory and,
by default, a new output_dir), and the ownership mark in output_dir names both, so checkpoints trained on
other data are never resumed, even when the config is unchanged.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.io import slug
from ctxbench.harness.core.locks import holder_path, single_writer
from ctxbench.harness.core.signals import Interrupted
from ctxbench.trainers.alst import alst_trainer_class, check_alst, tile_mlps
from ctxbench.trainers.base import (
    MANIFEST_NAME,
    RUN_MARK,
    DataBundle,
    ScratchModel,
    StudyInputs,
    TrainerConfig,
    TrainResult,
    TrainRun,
    deepspeed_path,
)
from ctxbench.trainers.callbacks import training_callbacks
from ctxbench.trainers.checkpoints import last_checkpoint, publish_model
from ctxbench.trainers.distributed import (
    check_data_parallel,
    check_sequence_parallel,
    distributed_arguments,
    from_rank0,
    is_main,
    model_heads,
    refuse_other_world_size,
    sequence_parallel_arguments,
    use_threads,
    world_size,
)
from ctxbench.trainers.model_init import initial_model

TRAIN_LOCK = "train.lock"  # in the run directory: one process trains a run at a time
FINAL_STAGING = ".final.tmp"  # in output_dir: the final model is saved here, then published file by file


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class HFTrainer:
    """Shared loop over transformers.Trainer; subclasses provide prepare_data() and data_collator()."""

    name: ClassVar[str] = "base"
    staged: ClassVar[bool] = False  # True: the constructor takes stage= (train the stages up to and including it)
    config_cls: ClassVar[type[TrainerConfig]] = TrainerConfig
    study_data_cls: ClassVar[type[Any] | None] = None  # a pydantic model of its options as a study method; None: not one
    sequence_parallel_ok: ClassVar[bool] = True  # False: the trainer refuses sequence_parallel > 1

    def __init__(self, config: TrainerConfig, *, console: Any = None):
        self.config = config
        self.console = console
        self._tokenizer = None
        self._data: DataBundle | None = None
        self.is_main = is_main()  # torchrun/accelerate/deepspeed rank: only rank 0 writes files

    # --- identity -------------------------------------------------------------------------------
    @property
    def base_name(self) -> str:
        b = self.config.base_model
        return f"scratch-{b.config.get('model_type', 'llama')}" if isinstance(b, ScratchModel) else b

    @property
    def data(self) -> DataBundle:
        """The training data, prepared once (prepare_data() may pack or synthesize it first)."""
        if self._data is None:
            self._data = self.prepare_data()
        return self._data

    @property
    def run_id(self) -> str:
        """train-<trainer>-<label>-<hash of config and data>: retraining on other data is another run."""
        c = self.config
        ident = hashlib.sha256(f"{c.config_hash()}:{self.data.data_hash}".encode()).hexdigest()[:8]
        return f"train-{self.name}-{slug(c.label or Path(self.base_name).name, default='model')}-{ident}"

    @property
    def run(self) -> TrainRun:
        return TrainRun(Path(self.config.store), self.run_id)

    @property
    def output_dir(self) -> Path:
        return Path(self.config.output_dir) if self.config.output_dir else self.run.dir / "model"

    # --- as a study method (harness/studies) --------------------------------------------------
    @classmethod
    def study_data_config(cls, options: Any, inputs: StudyInputs) -> dict[str, Any]:
        """The config's `data` section for a study method: options (a study_data_cls) applied to the study's inputs.
        Pure: prepare_data() does the work, resumably, when the study asks for the data."""
        raise ConfigError(f"trainer {cls.name!r} cannot be a study method: it defines no study_data_config()")

    @classmethod
    def study_config(cls, settings: dict[str, Any], options: Any, inputs: StudyInputs) -> dict[str, Any]:
        """The whole raw trainer config of a study method: the study's settings with the method's data in place.
        Default: `data` = study_data_config(); a trainer whose data sits elsewhere (hqa_sft: in every stage) overrides it."""
        return {**settings, "data": cls.study_data_config(options, inputs)}

    def corpus_documents(self) -> frozenset[str] | None:
        """Ids of the study-corpus documents the prepared data was made from (None: it reads no study-corpus
        document); the study asserts that none is held out."""
        raise ConfigError(f"trainer {self.name!r} cannot be a study method: it defines no corpus_documents()")

    def data_diagnostics(self) -> dict[str, Any] | None:
        """What the report shows about this method's data (e.g. packing diagnostics); None: nothing."""
        return None

    # --- hooks ----------------------------------------------------------------------------------
    def prepare_data(self) -> DataBundle:
        raise NotImplementedError

    def plan_workloads(self) -> list[Any]:
        """What `ctxbench train --plan` sizes (trainers/memory_plan.Workload), from the config alone: no data is made."""
        raise ConfigError(f"--plan: trainer {self.name!r} has no memory plan")

    def data_collator(self) -> Callable[[list[dict[str, Any]]], dict[str, Any]]:
        raise NotImplementedError

    def hf_trainer_class(self) -> type:
        from transformers import Trainer as HF

        return HF

    def save_final(self, hf: Any, out: Path) -> None:
        """Write the final weights to out (LOGO: merge the LoRA adapter into a plain HF directory), without the tied
        copies an FSDP2 full-state save adds (trainers/tied_save.py)."""
        hf.save_model(str(out))
        if hf.is_world_process_zero():
            from ctxbench.trainers.tied_save import drop_tied_copies, tied_pairs

            drop_tied_copies(out, tied_pairs(hf.model))

    def manifest_extra(self, hf: Any) -> dict[str, Any]:
        """More keys for ctxbench_manifest.json, read from the finished transformers Trainer (LOGO: the LoRA config
        and trainable parameters; default none)."""
        return {}

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            from ctxbench.harness.core.models import load_tokenizer

            b = self.config.base_model
            self._tokenizer = load_tokenizer(b.tokenizer if isinstance(b, ScratchModel) else b)
        return self._tokenizer

    def build_model(self, data: DataBundle) -> Any:
        return initial_model(self.config, self.tokenizer, data.seq_len, self._precision())

    # --- the loop -------------------------------------------------------------------------------
    def _precision(self) -> str:
        if self.config.precision != "auto":
            return self.config.precision
        import torch

        return "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "fp32"

    def _has_cuda(self) -> bool:
        import torch

        return torch.cuda.is_available()

    def world_size(self) -> int:
        return world_size()

    def data_parallel_size(self) -> int:
        """Processes that take different sequences: under sequence parallelism each group of `sequence_parallel`
        processes shares one sequence."""
        return max(1, self.world_size() // self.config.sequence_layout.degree)

    def steps_for(self, data: DataBundle) -> int:
        c = self.config
        per_step = c.per_device_batch_size * c.gradient_accumulation_steps * self.data_parallel_size()
        return c.max_steps or max(1, math.ceil(len(data.train) / per_step))

    def training_arguments(self, data: DataBundle) -> dict[str, Any]:
        """Keyword arguments for transformers.TrainingArguments (a dict, so tests need no DeepSpeed)."""
        c = self.config
        precision = self._precision()
        eval_every = c.eval_steps or c.save_steps
        kw = dict(
            output_dir=str(self.output_dir), max_steps=self.steps_for(data), per_device_train_batch_size=c.per_device_batch_size,
            per_device_eval_batch_size=c.per_device_batch_size, gradient_accumulation_steps=c.gradient_accumulation_steps,
            learning_rate=c.learning_rate, lr_scheduler_type=c.lr_scheduler, warmup_steps=c.warmup_steps,
            weight_decay=c.weight_decay, adam_beta1=c.adam_beta1, adam_beta2=c.adam_beta2, adam_epsilon=c.adam_epsilon,
            max_grad_norm=c.max_grad_norm, bf16=precision == "bf16", fp16=precision == "fp16",
            activation_checkpointing=c.gradient_checkpointing, logging_steps=c.logging_steps,
            eval_strategy="steps" if data.eval is not None else "no", eval_steps=eval_every, save_strategy="steps",
            save_steps=c.save_steps, save_total_limit=c.save_total_limit, seed=c.seed, data_seed=c.seed, report_to=[],
            disable_tqdm=True, include_num_input_tokens_seen="non_padding", dataloader_num_workers=c.dataloader_workers,
            remove_unused_columns=False, dataloader_pin_memory=self._has_cuda(),
        )
        if c.deepspeed:
            kw["deepspeed"] = str(deepspeed_path(c.deepspeed))
        return {**kw, **c.extra_args}

    def is_finished(self) -> bool:
        """Whether train() would find this exact training already done (and skip it)."""
        return self.finished(self.data) is not None

    def finished(self, data: DataBundle) -> dict[str, Any] | None:
        """The manifest of an identical finished run in output_dir, if any."""
        path = self.output_dir / MANIFEST_NAME
        if not path.exists():
            return None
        m = json.loads(path.read_text())
        same = m.get("config_hash") == self.config.config_hash() and m.get("data_hash") == data.data_hash
        return m if same else None

    def train(self, *, callbacks: Sequence[Any] = (), fresh: bool = False) -> TrainResult:
        self.check_sequence_parallel(None)  # the layout, before any data is made (the run id hashes the data)
        c, run, out = self.config, self.run, self.output_dir
        use_threads(c.threads)
        data = self.data
        done = None if fresh else self.finished(data)
        if done is not None:
            return self._result(done, skipped=True)
        args = self.arguments(data)  # refuses a launch that would train replicas, before anything is written
        if not self.is_main:  # torchrun: rank 0 holds the run's one-writer lock for every rank and decides for all
            verdict, detail = from_rank0()
            if verdict == "refused":
                raise ConfigError(detail)
            return self._result(detail, skipped=True) if verdict == "done" else self._train(data, args, callbacks)
        run.dir.mkdir(parents=True, exist_ok=True)
        told = False
        try:
            with single_writer(run.dir / TRAIN_LOCK, what=run.dir.name, noun="this training",
                               fix="wait for it to finish (its rerun then reports it trained)"):
                if fresh:
                    shutil.rmtree(out, ignore_errors=True)
                    held = {TRAIN_LOCK, holder_path(run.dir / TRAIN_LOCK).name}
                    for f in run.dir.iterdir():  # all but the lock this process holds
                        if f.name not in held:
                            shutil.rmtree(f) if f.is_dir() else f.unlink()
                done = self.finished(data)  # another process may have finished it while this one waited to start
                if done is None:
                    self._claim(out, data)
                from_rank0(("done", done) if done is not None else ("train", None))
                told = True
                return self._result(done, skipped=True) if done is not None else self._train(data, args, callbacks)
        except ConfigError as e:
            if not told:  # the other ranks wait for rank 0's word: they refuse with the same line
                from_rank0(("refused", str(e)))
            raise

    def arguments(self, data: DataBundle) -> Any:
        """transformers.TrainingArguments; under a launcher, data parallel over every process (or refused)."""
        from transformers import TrainingArguments

        self.check_sequence_parallel(data.seq_len)
        kw = distributed_arguments(self.training_arguments(data), has_cuda=self._has_cuda())
        args = TrainingArguments(**sequence_parallel_arguments(kw, self.config.sequence_layout, self.config.attn_implementation))
        check_data_parallel(args)
        return args

    def check_sequence_parallel(self, seq_len: int | None) -> None:
        """Refuse a sequence-parallel layout that cannot run here (seq_len None: the checks that need no data)."""
        c = self.config
        check_sequence_parallel(c.sequence_layout, deepspeed=c.deepspeed, attn=c.attn_implementation, seq_len=seq_len,
                                trainer=self.name, supported=self.sequence_parallel_ok, heads=model_heads(c.base_model),
                                has_cuda=self._has_cuda())
        check_alst(c, world=self.world_size())

    def _train(self, data: DataBundle, args: Any, callbacks: Sequence[Any]) -> TrainResult:
        c, run, out = self.config, self.run, self.output_dir
        last = last_checkpoint(out)
        model = tile_mlps(self.build_model(data), c.tiled_mlp)
        params = sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters())  # ZeRO-3: the full sizes
        record = self._record(data, params)
        if self.is_main:
            run.write(record)
            run.repair()
        per_step = data.tokens_per_sequence * c.per_device_batch_size * c.gradient_accumulation_steps * self.data_parallel_size()
        shown = training_callbacks(run, per_step, self.console, self.name)
        hf = alst_trainer_class(self.hf_trainer_class(), c)(
            model=model, args=args, train_dataset=data.train, eval_dataset=data.eval, data_collator=self.data_collator(),
            processing_class=self.tokenizer, callbacks=[*shown, *callbacks],
        )
        from transformers.trainer_callback import PrinterCallback

        hf.remove_callback(PrinterCallback)  # the rich bar and losses.jsonl replace its printed dicts
        start = time.perf_counter()
        try:
            hf.train(resume_from_checkpoint=last)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM (harness/core/signals.py): stop the bar, say what is kept
            shown[-1].close()
            kept = last_checkpoint(out)
            raise Interrupted(f"at step {hf.state.global_step}/{hf.state.max_steps} of training {self.run_id} "
                              f"({Path(kept).name + ' kept' if kept else 'no checkpoint yet'})") from None
        evaluated = any("eval_loss" in h and h.get("step") == hf.state.global_step for h in hf.state.log_history)
        if data.eval is not None and not evaluated:
            hf.evaluate()  # the final validation loss, at the last step (once: transformers may have just run it)
        staging = out / FINAL_STAGING  # every rank saves (ZeRO-3 gathers); rank 0 publishes
        if hf.is_world_process_zero():
            shutil.rmtree(staging, ignore_errors=True)
        self.save_final(hf, staging)
        seconds = time.perf_counter() - start
        losses = run.losses()
        last_of = {r["split"]: r["loss"] for r in losses}
        tokens = int(hf.state.num_input_tokens_seen or hf.state.global_step * per_step)
        manifest = {
            "trainer": self.name, "run_id": self.run_id, "label": c.label or self.run_id, "config_hash": c.config_hash(),
            "data_hash": data.data_hash, "base_model": self.base_name, "base_model_gguf": self.base_gguf(),
            "parameters": params, "seq_len": data.seq_len,
            "tokens": {"trained": tokens, "data": data.info.get("tokens"), "eval": data.info.get("eval_tokens")},
            "steps": hf.state.global_step, "train_loss": last_of.get("train"), "eval_loss": last_of.get("eval"),
            "resumed_from_step": int(Path(last).name.split("-")[-1]) if last else None, "seconds": round(seconds, 2),
            "rope": c.rope.model_dump() if c.rope else None, "run_dir": str(run.dir), "created": _now(),
            "config": c.model_dump(mode="json"), **self.manifest_extra(hf),
        }
        if hf.is_world_process_zero():
            self.tokenizer.save_pretrained(str(staging))
            (staging / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, default=str))
            publish_model(staging, out)
            run.write({**record, "status": "complete", "steps": manifest["steps"], "tokens": tokens,
                       "train_loss": manifest["train_loss"], "eval_loss": manifest["eval_loss"]})
            if c.delete_checkpoints:
                for ckpt in out.glob("checkpoint-*"):
                    shutil.rmtree(ckpt, ignore_errors=True)
        return self._result(manifest, skipped=False)

    def _claim(self, out: Path, data: DataBundle) -> None:
        """Refuse to resume checkpoints that another config, or the same config on other data, wrote into output_dir."""
        mark = out / RUN_MARK
        if mark.exists():
            owner = json.loads(mark.read_text())
            if owner.get("config_hash") != self.config.config_hash():
                raise ConfigError(f"output_dir: {out} holds checkpoints of a different config; choose another output_dir "
                                  "or pass --fresh to discard them")
            if owner.get("data_hash") != data.data_hash:  # marks without a data hash predate it: not provably ours
                raise ConfigError(f"output_dir: {out} holds checkpoints trained on other data (data hash "
                                  f"{owner.get('data_hash') or 'unrecorded'}, now {data.data_hash}); choose another "
                                  "output_dir or pass --fresh to discard them")
            if last_checkpoint(out) is not None:
                c = self.config
                refuse_other_world_size(out, int(owner.get("world_size", 1)), c.per_device_batch_size * c.gradient_accumulation_steps,
                                        sp_before=owner.get("sequence_parallel", 1), sp_now=c.sequence_layout.spec)
        out.mkdir(parents=True, exist_ok=True)
        mark.write_text(json.dumps({"config_hash": self.config.config_hash(), "data_hash": data.data_hash,
                                    "run_id": self.run_id, "world_size": self.world_size(),
                                    "sequence_parallel": self.config.sequence_layout.spec}))

    def base_gguf(self) -> str | None:
        """The GGUF file the base model was dequantized from (its weights carry the quantization error), if any."""
        b = self.config.base_model
        if isinstance(b, ScratchModel):
            return None
        from ctxbench.harness.core.models import resolve

        return resolve(b).gguf_file

    def _record(self, data: DataBundle, params: int) -> dict[str, Any]:
        from ctxbench.harness.core.provenance import versions

        c = self.config
        group = c.group or f"{Path(self.base_name).name} ({params / 1e6:.3g}M)"
        return {
            "run_id": self.run_id, "kind": "train", "trainer": self.name, "label": c.label or self.run_id, "group": group,
            "created": _now(), "model": str(self.output_dir.resolve()), "base_model": self.base_name,
            "base_model_gguf": self.base_gguf(), "parameters": params,
            "config": c.model_dump(mode="json"), "config_hash": c.config_hash(), "data_hash": data.data_hash,
            "data": data.info, "seq_len": data.seq_len, "status": "running", "versions": versions(), "command": sys.argv,
            "schema_version": 1,
        }

    def _result(self, m: dict[str, Any], *, skipped: bool) -> TrainResult:
        return TrainResult(self.run_id, self.run.dir, self.output_dir, int(m["steps"]), int(m["tokens"]["trained"]),
                           m.get("train_loss"), m.get("eval_loss"), m.get("resumed_from_step"), float(m.get("seconds", 0)),
                           skipped)
