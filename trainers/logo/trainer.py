"""The `logo` trainer: LOGO (multi-negative SimPO + SFT) on self-generated data with synthetic positions, LoRA.

`ctxbench train logo --config FILE` or `LogoTrainer(config, console=...).train() -> TrainResult`. The data is a
`ctxbench data logo` directory, given or synthesized first (`data.synthesis`, resumable). A batch holds the M + 1
responses of each sample, each row with its own attention mask and position ids; the mask is always passed
(transformers 5 reads jumping position ids without a mask as packed sequences when use_cache is off, as under
gradient checkpointing, and the answer would silently stop attending to earlier chunks). Logits are computed
for the answer span only. `objective: sft` keeps only λ·NLL(y_w) (the SFT baseline on the same data). Logged:
the loss, rewards/{chosen,rejected,margin,accuracy} and sft_loss (losses.jsonl and metrics.jsonl in the run).
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ctxbench.harness.core.config import one_line, validate_config
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.identity import content_hash
from ctxbench.harness.core.registry import register
from ctxbench.trainers.base import DataBundle, ScratchModel, TrainerConfig, apply_rope
from ctxbench.trainers.logo.data import FORMAT, LogoDataConfig, read_manifest
from ctxbench.trainers.logo.lora import LoraSpec
from ctxbench.trainers.logo.metrics import METRICS as METRICS  # the run file the tests and readers name
from ctxbench.trainers.logo.metrics import metrics_callback
from ctxbench.trainers.loop import HFTrainer


class LogoTrainData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str | None = Field(None, description="a `ctxbench data logo` output directory (manifest.json + shards)")
    synthesis: dict[str, Any] | None = Field(None, description="LogoDataConfig keys (configs/data/logo-*.yaml): synthesize "
                                             "first (resumable; its out_dir is the data), then train")
    eval_samples: int = Field(8, ge=0, description="samples held out from the end of the data for validation; 0 = none")
    max_samples: int | None = Field(None, ge=1, description="train on at most this many samples (after the holdout)")

    @model_validator(mode="after")
    def _one_source(self):
        if (self.path is None) == (self.synthesis is None):
            raise ValueError("give exactly one of data.path (a LOGO data directory) or data.synthesis (synthesize first)")
        return self


class LogoStudyData(BaseModel):
    """A LOGO method in a study: its preference data (QA samples from the data dir, not the study corpus), made with
    the study's data seed into the method's own directory."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    data: str = Field("configs/data/logo-tiny.yaml", description="LOGO data YAML (chunks, N, δ, M, K, generator)")
    data_args: dict[str, Any] = Field(default_factory=dict, description="overrides of the data YAML's keys, e.g. "
                                      "{max_samples: 12}; out_dir and seed are the study's")
    eval_samples: int = Field(4, ge=0, description="samples held out from the end of the data for the validation loss")
    max_samples: int | None = Field(None, ge=1, description="train on at most this many samples (after the holdout)")


class LogoConfig(TrainerConfig):
    """LOGO training (Eq. 3); see TrainerConfig for the shared settings. β/γ per model (§4.1): Llama-3-8B 10/3,
    Mistral-7B 2.5/0.25, Llama-2-7B 3/0.6; λ 0.1."""

    data: LogoTrainData = Field(description="where the preference data comes from")
    objective: Literal["logo", "sft"] = Field("logo", description="logo: Eq. 3; sft: only λ·NLL of the chosen reply (baseline)")
    beta: float = Field(10.0, gt=0, description="β: reward scale (Llama-3 10, Mistral 2.5, Llama-2 3)")
    gamma: float = Field(3.0, ge=0, description="γ: target reward margin (Llama-3 3, Mistral 0.25, Llama-2 0.6)")
    sft_weight: float = Field(0.1, ge=0, description="λ: weight of the SFT term NLL(y_w) (paper 0.1)")
    lora: LoraSpec | None = Field(default_factory=LoraSpec, description="LoRA settings; null trains every weight")


class LogoResponses:
    """Map-style dataset over samples [start, stop) of a LOGO data directory (shards memory-mapped on first use);
    item: the M + 1 responses' input_ids, labels and position_ids."""

    KEYS = ("input_ids", "labels", "position_ids")

    def __init__(self, directory: Path, start: int = 0, stop: int | None = None):
        self.dir = Path(directory)
        self.manifest = read_manifest(self.dir) or {}
        self.group = int(self.manifest.get("responses_per_sample", 0))
        self.counts = list(self.manifest.get("shard_samples", []))
        self.ends = list(np.cumsum(self.counts))
        total = int(self.ends[-1]) if self.ends else 0
        self.start, self.stop = start, total if stop is None else min(stop, total)
        self._open: dict[int, dict[str, np.ndarray]] = {}

    def __len__(self) -> int:
        return max(0, self.stop - self.start)

    def _locate(self, i: int) -> tuple[dict[str, np.ndarray], int]:
        """The shard of sample i and the index of its first response there."""
        if not 0 <= i < len(self):
            raise IndexError(i)
        row = self.start + i
        k = int(np.searchsorted(self.ends, row, side="right"))
        if k not in self._open:
            name = self.manifest["shards"][k]
            self._open[k] = {key: np.load(self.dir / f"{name}.{key}.npy", mmap_mode="r") for key in (*self.KEYS, "offsets")}
        return self._open[k], (row - (self.ends[k] - self.counts[k])) * self.group

    def __getitem__(self, i: int) -> dict[str, list[np.ndarray]]:
        z, first = self._locate(i)
        spans = [(int(z["offsets"][r]), int(z["offsets"][r + 1])) for r in range(first, first + self.group)]
        return {key: [np.asarray(z[key][a:b], dtype=np.int64) for a, b in spans] for key in self.KEYS}

    def tokens(self) -> int:
        """Real tokens of every response of the samples in range (from the offsets alone)."""
        total = 0
        for i in range(len(self)):
            z, first = self._locate(i)
            total += int(z["offsets"][first + self.group] - z["offsets"][first])
        return total

    def answer_tokens(self) -> int:
        """Labelled tokens of the chosen responses in range: what the SFT term and r(y_w) average over."""
        total = 0
        for i in range(len(self)):
            z, first = self._locate(i)
            a, b = int(z["offsets"][first]), int(z["offsets"][first + 1])
            total += int((np.asarray(z["labels"][a:b]) != -100).sum())
        return total


def collate_responses(rows: list[dict[str, list[np.ndarray]]], *, pad_id: int, multiple: int = 1) -> dict[str, Any]:
    """Rows [s0 chosen, s0 rejected 1..M, s1 chosen, ...], right-padded (to a multiple of `multiple`: a ring of N
    cuts each row into 2N equal chunks); the mask marks real tokens."""
    import torch

    flat = {key: [a for r in rows for a in r[key]] for key in ("input_ids", "labels", "position_ids")}
    width = -(-max(len(a) for a in flat["input_ids"]) // multiple) * multiple
    out = {"input_ids": torch.full((len(flat["input_ids"]), width), pad_id, dtype=torch.long)}
    out["labels"] = torch.full_like(out["input_ids"], -100)
    out["position_ids"] = torch.zeros_like(out["input_ids"])
    out["attention_mask"] = torch.zeros_like(out["input_ids"])
    for i, (ids, labels, pos) in enumerate(zip(flat["input_ids"], flat["labels"], flat["position_ids"])):
        n = len(ids)
        out["input_ids"][i, :n] = torch.from_numpy(ids)
        out["labels"][i, :n] = torch.from_numpy(labels)
        out["position_ids"][i, :n] = torch.from_numpy(pos)
        out["attention_mask"][i, :n] = 1
    return out


def response_rewards(model: Any, batch: dict[str, Any], group: int, chunk_tokens: int = 0):
    """r(y) of every response (chosen [B], rejected [B, M]) and the model output; logits only over the answers,
    `chunk_tokens` answer positions at a time when set (loss_chunk_tokens)."""
    from ctxbench.trainers.logo.loss import response_logps

    if chunk_tokens:
        from ctxbench.trainers.chunked_loss import row_mean_logps

        r, out = row_mean_logps(model, batch, chunk_tokens)
        return r.view(-1, group)[:, 0], r.view(-1, group)[:, 1:], out
    labels = batch["labels"]
    width = labels.shape[1]
    first = int((labels != -100).int().argmax(dim=1).min())  # earliest answer token of any row
    keep = min(width, width - first + 1)  # the logit before it predicts it
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=batch["position_ids"],
                use_cache=False, logits_to_keep=keep)
    r, _ = response_logps(out.logits, labels[:, width - keep:])
    r = r.view(-1, group)
    return r[:, 0], r[:, 1:], out


def make_hf_trainer(*, group: int, beta: float, gamma: float, sft_weight: float, preference: bool,
                    chunk_tokens: int = 0) -> type:
    """A transformers Trainer whose compute_loss is the LOGO objective, logging rewards like TRL's preference trainers."""
    from transformers import Trainer

    from ctxbench.trainers.logo.loss import logo_loss

    class LogoHFTrainer(Trainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.model_accepts_loss_kwargs = False  # a per-sample mean: the Trainer divides by accumulation steps
            self._stored = {"train": defaultdict(list), "eval": defaultdict(list)}

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if "shift_labels" in inputs:  # a shard of every response (ring attention): sums over the ring
                from ctxbench.trainers.logo.ring_rewards import ring_group_of, ring_response_rewards

                chosen, rejected, out = ring_response_rewards(model, inputs, group, ring_group_of(self))
            else:
                chosen, rejected, out = response_rewards(model, inputs, group, chunk_tokens)
            result = logo_loss(chosen, rejected, beta=beta, gamma=gamma, sft_weight=sft_weight, preference=preference)
            for key, value in result.metrics().items():
                self._stored["train" if model.training else "eval"][key].append(value)
            return (result.loss, out) if return_outputs else result.loss

        def log(self, logs, *args, **kwargs):
            split = "eval" if "eval_loss" in logs else "train"
            for key, values in self._stored[split].items():
                logs[("eval_" if split == "eval" else "") + key] = float(np.mean(values))
            self._stored[split].clear()
            return super().log(logs, *args, **kwargs)

    return LogoHFTrainer


@register("trainer", "logo")
class LogoTrainer(HFTrainer):
    """LOGO preference optimisation with LoRA (or full weights) through transformers.Trainer."""

    name = "logo"
    config_cls = LogoConfig
    study_data_cls = LogoStudyData

    # --- as a study method (harness/studies) --------------------------------------------------------
    @classmethod
    def study_data_config(cls, options: LogoStudyData, inputs) -> dict[str, Any]:
        """Synthesize the data YAML (with the method's overrides) into inputs.out_dir with the study's seed."""
        from ctxbench.harness.core.config import read_yaml_mapping
        from ctxbench.trainers.base import config_path

        clash = sorted({"out_dir", "seed"} & set(options.data_args))
        if clash:
            raise ConfigError(f"data_args: {clash[0]} is set by the study; remove it")
        raw = {**read_yaml_mapping(config_path(options.data), field="data", expect="LOGO data settings"),
               **options.data_args, "out_dir": str(inputs.out_dir), "seed": inputs.seed}
        if inputs.data_dir is not None and not raw.get("data_file"):
            raw["data_dir"] = str(inputs.data_dir)
        validate_config(LogoDataConfig, raw, where=f"data ({Path(options.data).name})")  # one line now, not at training time
        return {"synthesis": raw, "eval_samples": options.eval_samples, "max_samples": options.max_samples}

    def corpus_documents(self) -> frozenset[str] | None:
        return None  # QA samples from the data dir: no study-corpus document, so none held out

    def data_diagnostics(self) -> dict[str, Any] | None:
        """Preference samples, real tokens of all responses, window and drops (from the LOGO manifest)."""
        info, m = self.data.info, self.manifest
        return {"preference": {"sequences": info["samples"], "responses_per_sample": info["responses_per_sample"],
                               "tokens": info["tokens"], "target_window": info["target_window"], "drops": m.get("drops", {})}}

    def __init__(self, config: LogoConfig, *, console: Any = None):
        super().__init__(config, console=console)
        self.manifest: dict[str, Any] = {}
        self.lora_summary: dict[str, Any] | None = None

    # --- data -----------------------------------------------------------------------------------------
    def data_dir(self) -> Path:
        d = self.config.data
        if d.path is not None:
            return Path(d.path)
        from ctxbench.trainers.data.synthesis import synthesize

        try:
            cfg = LogoDataConfig(**d.synthesis)
        except ValidationError as e:
            raise ConfigError(one_line(e, "data.synthesis")) from None
        if self.is_main:
            synthesize("logo", cfg)
        else:  # other ranks wait for rank 0 instead of generating the same data
            while not (read_manifest(Path(cfg.out_dir)) or {}).get("complete"):
                time.sleep(10)
        return Path(cfg.out_dir)

    def prepare_data(self) -> DataBundle:
        d = self.config.data
        directory = self.data_dir()
        m = read_manifest(directory)
        if m is None or m.get("format") != FORMAT:
            raise ConfigError(f"data.path: {directory} is not LOGO data (no {FORMAT} manifest.json); run `ctxbench data logo`")
        if not m.get("complete"):
            raise ConfigError(f"data.path: the LOGO data in {directory} is incomplete; rerun `ctxbench data logo` to finish it")
        from ctxbench.harness.core.models import tokenizer_fingerprint

        if m["tokenizer_fingerprint"] != tokenizer_fingerprint(self.tokenizer):
            raise ConfigError(f"data: built with tokenizer {m['tokenizer']!r}, which splits text differently from the model's; "
                              "synthesize the data with the model being trained (generator.model)")
        self.manifest = m
        full = LogoResponses(directory)
        n = len(full)
        if d.eval_samples >= n:
            raise ConfigError(f"data.eval_samples: {d.eval_samples} of the {n} samples leaves none to train on; lower it")
        stop = n - d.eval_samples
        evalset = LogoResponses(directory, stop, n) if d.eval_samples else None
        train = LogoResponses(directory, 0, min(stop, d.max_samples) if d.max_samples else stop)
        tokens = train.tokens()
        data_hash = content_hash([m["data_hash"], d.eval_samples, len(train)])
        info = {"path": str(directory), "samples": len(train), "responses_per_sample": full.group, "tokens": tokens,
                "eval_samples": len(evalset) if evalset else 0, "eval_tokens": evalset.tokens() if evalset else 0,
                "target_window": m["target_window"], "num_chunks": m["num_chunks"], "num_rejected": m["num_rejected"],
                "generator": m["generator"]["model"], "tokenizer": m["tokenizer"], "answer_tokens": train.answer_tokens()}
        return DataBundle(train, evalset, data_hash, int(m["max_real_length"]),
                          max(1, tokens // max(1, len(train))), info)

    def data_collator(self):
        tok = self.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        return functools.partial(collate_responses, pad_id=int(pad), multiple=2 * self.config.sequence_layout.ring)

    def check_sequence_parallel(self, seq_len: int | None) -> None:
        """Ring attention only (trainers/logo/ring_rewards.py); the collator pads to the ring's multiple, so the data's
        lengths need not divide by it."""
        from ctxbench.trainers.logo.ring_rewards import check_logo_layout

        check_logo_layout(self.config.sequence_layout, self.config.loss_chunk_tokens)
        super().check_sequence_parallel(None if self.config.sequence_layout.ring > 1 else seq_len)

    # --- model ----------------------------------------------------------------------------------------
    def model_window(self, data: DataBundle) -> int:
        """The context window the model will have (after `rope`), read from its config without loading weights."""
        from transformers import AutoConfig

        c = self.config
        if isinstance(c.base_model, ScratchModel):
            kw = dict(c.base_model.config)
            mc = AutoConfig.for_model(kw.pop("model_type", "llama"), **kw)
        else:
            from ctxbench.harness.core.models import materialize, resolve

            mc = AutoConfig.from_pretrained(materialize(resolve(c.base_model)))
        apply_rope(mc, c.rope, data.seq_len)
        return int(mc.max_position_embeddings)

    def build_model(self, data: DataBundle) -> Any:
        window, target = self.model_window(data), int(self.manifest["target_window"])
        if window < target:
            raise ConfigError(f"rope: the model's window {window} is below the data's target window K={target}; set "
                              f"rope.max_position_embeddings: {target} (short-context models keep their RoPE base, as the "
                              "authors' code) or synthesize with a smaller target_window")
        model = super().build_model(data)
        if self.config.lora is None:
            return model
        from ctxbench.trainers.logo.lora import summary, wrap

        model = wrap(model, self.config.lora)
        self.lora_summary = summary(model, self.config.lora)
        return model

    def hf_trainer_class(self) -> type:
        c = self.config
        return make_hf_trainer(group=int(self.manifest["responses_per_sample"]), beta=c.beta, gamma=c.gamma,
                               sft_weight=c.sft_weight, preference=c.objective == "logo", chunk_tokens=c.loss_chunk_tokens)

    def training_arguments(self, data: DataBundle) -> dict[str, Any]:
        kw = super().training_arguments(data)
        kw.update(include_num_input_tokens_seen="non_padding", label_names=["labels"], prediction_loss_only=True)
        return {**kw, **self.config.extra_args}

    # --- outputs --------------------------------------------------------------------------------------
    def save_final(self, hf: Any, out: Path) -> None:
        """Merge LoRA into a plain HF directory at out; the adapter itself goes to out/adapter."""
        if self.config.lora is None:
            return super().save_final(hf, out)
        hf.save_model(str(out / "adapter"))  # gathers ZeRO-3 shards; adapter + embeddings/norms
        if not hf.is_world_process_zero():
            return None
        from peft import PeftModel

        from ctxbench.trainers.distributed import whole_model_init

        data = DataBundle(None, None, "", int(self.manifest["max_real_length"]), 1)
        with whole_model_init():  # under ZeRO-3 the base would be built partitioned
            merged = PeftModel.from_pretrained(HFTrainer.build_model(self, data), str(out / "adapter")).merge_and_unload()
        merged.save_pretrained(str(out))
        return None

    def manifest_extra(self, hf: Any) -> dict[str, Any]:
        c, m = self.config, self.manifest
        asked, kept = m.get("input_samples") or 0, m.get("samples") or 0
        summary = {"answer_tokens": self.data.info.get("answer_tokens"), "unit": "sample", "requested": asked,
                   "kept": kept, "drops": m.get("drops", {})}
        return {"objective": c.objective, "beta": c.beta, "gamma": c.gamma, "sft_weight": c.sft_weight, "lora": self.lora_summary,
                "data_summary": summary,
                "logo_data": {k: m.get(k) for k in ("target_window", "num_chunks", "num_rejected", "scorer", "threshold",
                                                     "chunk_tokens", "sparse_fraction", "generator", "drops")}}

    def train(self, *, callbacks=(), fresh: bool = False):
        return super().train(callbacks=[*callbacks, metrics_callback(self)], fresh=fresh)

    def plan_workloads(self) -> list[Any]:
        """One workload: each sample is 1 + M sequences of its real length (chunks, question, reply); the loss reads the
        replies' logits only. From the data's manifest, else its synthesis settings or the shipped data YAML of that name."""
        from ctxbench.harness.core.config import read_yaml_mapping
        from ctxbench.trainers.base import config_path
        from ctxbench.trainers.memory_plan import lora_trainable, shape_of, workload

        c, d = self.config, self.config.data
        raw = d.synthesis or {}
        if d.path and not raw:
            try:
                raw = read_yaml_mapping(config_path(f"{Path(d.path).name}.yaml"), field="data", expect="LOGO data settings")
            except ConfigError:
                raw = {}
        m = read_manifest(Path(d.path)) if d.path else None
        reply = int((raw.get("generator") or {}).get("max_new_tokens", 512))
        seq = int(m["max_real_length"]) if m and m.get("max_real_length") else (
            int(raw.get("num_chunks", 16)) * int(raw.get("chunk_tokens", 512)) + reply + 256)  # + question and template
        group = 1 + int((m or raw).get("num_rejected", 2))
        trained = lora_trainable(shape_of(c.base_model), c.lora) if c.lora else None
        return [workload(c, c.label or self.name, seq_len=seq, sequences=c.per_device_batch_size * group,
                         trainable=trained, logit_positions=min(1.0, reply / seq))]
