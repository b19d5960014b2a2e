"""Head-to-head studies: one corpus, one budget, several packing methods, the same trainer and suite.

Each method runs synthesize -> train -> score, every step resumable and skipped once complete (state.json
keys each finished step by the hash of its inputs), then one leaderboard report compares every method
with the baseline by exact paired tests over matched samples. Scoring runs are labelled with the method
name (RunPlan.label -> record "label"), which is how harness.board.runs_frame names them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ctxbench.harness.core.config import one_line
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.io import atomic_write_json
from ctxbench.trainers.base import RUN_MARK, ScratchModel, TrainerConfig, validate
from ctxbench.trainers.data.corpus import resolve_corpus

RESERVED = {"base_model", "data", "store", "output_dir", "label"}  # set by the study, not by `training`


class MethodSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    method: str = Field(description="synthesis method: standard, within_domain, splice, quest, knn, iclm")
    name: str | None = Field(None, description="label in the report; default the method name (must be unique)")
    method_args: dict[str, Any] = Field(default_factory=dict, description="the method's arguments, e.g. {retriever: bm25, k: 1}")
    mix_ratio: float | None = Field(None, ge=0, le=1, description="override the study's mix_ratio for this method")

    @property
    def label(self) -> str:
        return self.name or self.method


class EvalSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    suite: str | dict[str, Any] = Field(description="suite name, YAML path, or an inline suite mapping")
    backend: str = Field("hf", description="scoring backend; hf loads the checkpoint directory")
    backend_args: dict[str, Any] = Field(default_factory=dict, description="backend arguments, e.g. {dtype: float32, threads: 2}")
    data_dir: str | None = Field(None, description="task data (pg_essays/...); default env CTXBENCH_DATA_DIR")


class StudyConfig(BaseModel):
    """A study YAML (configs/studies/*.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(description="study name; default output directory studies/<name>")
    description: str = Field("", description="one line shown in the report")
    out_dir: str | None = Field(None, description="where data/, models/, runs/, report/ go; default studies/<name>")
    corpus: dict[str, Any] = Field(description="corpus keys (path, format, text_field, ...); path 'stdlib:' = this Python's "
                                   "standard library source, 'stdlib:json,email' = those packages")
    methods: list[MethodSpec] = Field(min_length=2, description="packing methods to compare (one must be the baseline)")
    baseline: str = Field("standard", description="method name every other method is compared with")
    budget_tokens: int = Field(ge=1, description="tokens packed per method (the same budget for every method)")
    seq_len: int = Field(ge=16, description="training sequence length in tokens")
    mix_ratio: float = Field(0.0, ge=0, le=1, description="fraction of standard-packed data mixed in (SPLICE mixes 50/50)")
    seed: int = Field(0, description="seed for packing and training")
    base_model: str | ScratchModel = Field(description="alias, HF dir, or {config: {...}} for a from-scratch model")
    trainer: str = Field("cpt", description="registered trainer")
    training: dict[str, Any] = Field(default_factory=dict, description="trainer settings (max_steps, learning_rate, rope, "
                                     "deepspeed, ...); base_model, data, store, output_dir and label are set by the study")
    data: dict[str, Any] = Field(default_factory=dict, description="trainer data options besides the path, e.g. {eval_sequences: 8}")
    eval: EvalSpec = Field(description="how each checkpoint is scored")

    @field_validator("training")
    @classmethod
    def _no_reserved(cls, v):
        clash = sorted(RESERVED & set(v))
        if clash:
            raise ValueError(f"{clash[0]} is set by the study; remove it from training")
        return v

    @model_validator(mode="after")
    def _methods(self):
        labels = [m.label for m in self.methods]
        dup = next((x for x in labels if labels.count(x) > 1), None)
        if dup:
            raise ValueError(f"methods: two methods are named {dup!r}; give one a distinct name")
        if self.baseline not in labels:
            raise ValueError(f"baseline {self.baseline!r} is not among the methods ({', '.join(labels)})")
        return self

    @property
    def tokenizer(self) -> str:
        return self.base_model.tokenizer if isinstance(self.base_model, ScratchModel) else self.base_model

    def root(self) -> Path:
        return Path(self.out_dir or Path("studies") / self.name)


@dataclass(frozen=True)
class MethodResult:
    name: str
    data_dir: Path
    checkpoint: Path
    score_run: str
    train_tokens: int
    train_loss: float | None
    eval_loss: float | None


@dataclass(frozen=True)
class StudyResult:
    out_dir: Path
    methods: tuple[MethodResult, ...]
    report: Any  # leaderboard.Report
    summary: Path


def load_study(path: Path) -> StudyConfig:
    """Read and fully validate a study: the config, each method's trainer config and the suite."""
    from ctxbench.harness.core.config import read_yaml_mapping

    path = Path(path)
    raw = read_yaml_mapping(path, field="study", expect="keys name, corpus, methods, base_model, eval, ...")
    try:
        study = StudyConfig(**raw)
    except ValidationError as e:
        raise ConfigError(one_line(e, path.name)) from None
    from ctxbench.trainers.data.methods import parse_args

    for m in study.methods:
        try:
            parse_args(m.method, m.method_args)
        except ConfigError as e:
            raise ConfigError(f"{path.name}: methods.{m.label}: {e}") from None
        trainer_config(study, m, where=path.name)
    load_eval_suite(study.eval, where=path.name)
    return study


def trainer_class(study: StudyConfig):
    from ctxbench.harness.core import registry

    return registry.get("trainer", study.trainer, field="trainer")


def trainer_config(study: StudyConfig, m: MethodSpec, *, where: str = "study") -> TrainerConfig:
    root = study.root()
    raw = {**study.training, "seed": study.training.get("seed", study.seed), "base_model": study.base_model,
           "store": str(root / "runs"), "output_dir": str(root / "models" / m.label), "label": m.label,
           "data": {**study.data, "path": str(root / "data" / m.label)}}
    return validate(trainer_class(study).config_cls, raw, where=f"{where}: training")


def load_eval_suite(spec: EvalSpec, *, where: str):
    from ctxbench.harness.core.config import Suite, build_task, load_suite

    if isinstance(spec.suite, str):
        return load_suite(spec.suite)
    try:
        suite = Suite(**spec.suite)
    except ValidationError as e:
        raise ConfigError(one_line(e, f"{where}: eval.suite")) from None
    for i, t in enumerate(suite.tasks):
        build_task(t, where=f"{where}: eval.suite.tasks.{i}")
    return suite


class _State:
    """state.json: which step finished with which inputs (hash); a changed input reruns the step."""

    def __init__(self, path: Path):
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else {}

    def done(self, step: str, key: str) -> bool:
        return self.data.get(step) == key

    def mark(self, step: str, key: str) -> None:
        self.data[step] = key
        atomic_write_json(self.path, self.data)


def _key(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _is_main() -> bool:
    return int(os.environ.get("RANK", "0")) == 0  # under torchrun every rank trains; only rank 0 packs and scores


def run_study(study: StudyConfig, *, console: Any = None, data_dir: Path | None = None) -> StudyResult | None:
    """Pack and train every method, then score every checkpoint and write the report; each step resumable.

    Training all methods before scoring any keeps multi-GPU ranks in step (scoring runs on rank 0 alone);
    ranks other than 0 return None after training.
    """
    from rich.console import Console

    console = console or Console(stderr=True)
    root = study.root()
    root.mkdir(parents=True, exist_ok=True)
    state = _State(root / "state.json")
    corpus = resolve_corpus(study.corpus, root) if _is_main() else study.corpus
    suite = load_eval_suite(study.eval, where="study")
    env_dir = os.environ.get("CTXBENCH_DATA_DIR")
    data_dir = data_dir or (Path(study.eval.data_dir) if study.eval.data_dir else Path(env_dir) if env_dir else None)
    trained = [_pack_and_train(study, m, corpus, state, console) for m in study.methods]
    if not _is_main():
        return None
    results = [_score(study, m, t, suite, state, console, data_dir) for m, t in zip(study.methods, trained)]
    report, summary = _report(study, results, root)
    console.print(f"[study {study.name}] report: {report.markdown} · summary: {summary}")
    return StudyResult(root, tuple(results), report, summary)


def _pack_and_train(study: StudyConfig, m: MethodSpec, corpus: dict[str, Any], state: _State, console):
    from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize
    from ctxbench.trainers.data.shards import read_manifest

    root, tag = study.root(), f"[{m.label}]"
    syn = {"corpus": corpus, "method": m.method, "method_args": m.method_args, "seq_len": study.seq_len,
           "budget_tokens": study.budget_tokens, "mix_ratio": study.mix_ratio if m.mix_ratio is None else m.mix_ratio,
           "tokenizer": study.tokenizer, "seed": study.seed, "out_dir": str(root / "data" / m.label)}
    if not _is_main():
        while not ((mf := read_manifest(Path(syn["out_dir"]))) and mf.complete):
            time.sleep(10)
    elif not state.done(f"synthesize:{m.label}", _key(syn)):
        if f"synthesize:{m.label}" in state.data:  # the study changed: its packing is stale
            shutil.rmtree(syn["out_dir"], ignore_errors=True)
        console.print(f"{tag} packing {study.budget_tokens:,} tokens with {m.method}")
        try:
            cfg = SynthesisConfig(**syn)
        except ValidationError as e:
            raise ConfigError(one_line(e, f"study: methods.{m.label}")) from None
        synthesize(cfg)
        state.mark(f"synthesize:{m.label}", _key(syn))
    cfg = trainer_config(study, m)
    mark = Path(cfg.output_dir) / RUN_MARK
    if _is_main() and mark.exists() and json.loads(mark.read_text()).get("config_hash") != cfg.config_hash():
        shutil.rmtree(cfg.output_dir)  # the study changed its training settings: retrain this method
    console.print(f"{tag} training ({study.trainer})")
    return trainer_class(study)(cfg, console=console).train()


def _score(study: StudyConfig, m: MethodSpec, trained, suite, state: _State, console, data_dir) -> MethodResult:
    from ctxbench.harness.runner import RunPlan, run

    root = study.root()
    manifest = json.loads((trained.checkpoint / "ctxbench_manifest.json").read_text())
    plan = RunPlan(suite, str(trained.checkpoint), study.eval.backend, dict(study.eval.backend_args), root / "runs", data_dir,
                   label=m.label)  # runs_frame names the model by its record's label
    key = _key([plan.run_id(), manifest["config_hash"], manifest["data_hash"], manifest["created"]])
    step = f"score:{m.label}"
    if not state.done(step, key):
        console.print(f"[{m.label}] scoring {trained.checkpoint}")
        run(plan, fresh=step in state.data, console=console)  # a retrained checkpoint is rescored from scratch
        state.mark(step, key)
    return MethodResult(m.label, root / "data" / m.label, trained.checkpoint, plan.run_id(), trained.tokens,
                        trained.train_loss, trained.eval_loss)


def _report(study: StudyConfig, results: list[MethodResult], root: Path):
    from ctxbench.harness.core.io import atomic_write
    from ctxbench.leaderboard import build_report
    from ctxbench.leaderboard.render import Section, Table, render_markdown
    from ctxbench.leaderboard.store_frame import examples, runs_frame
    from ctxbench.leaderboard.tables import ci_text, comparison_text

    df = runs_frame(root / "runs", [r.score_run for r in results])
    comparisons = [(r.name, study.baseline) for r in results if r.name != study.baseline]
    report = build_report(df, out_dir=root / "report", title=f"Study: {study.name}", comparisons=comparisons,
                          examples=examples(df))
    res = json.loads(report.json.read_text())
    deltas = {c["model_a"]: c for c in res["comparisons"]}
    rows = []
    for r in results:
        by_len = "; ".join(f"{x['length']}: {ci_text(x)}" for x in res["lengths"] if x["model"] == r.name)
        d = deltas.get(r.name)
        delta = comparison_text(d) if d else "baseline"
        rows.append((r.name, f"{r.train_tokens:,}", _fmt(r.train_loss), _fmt(r.eval_loss), by_len, delta))
    table = Table(("method", "tokens trained", "final train loss", "final val loss", "score by length [95% CI]",
                   f"Δ vs {study.baseline} (exact paired test)"), tuple(rows))
    notes = (f"{study.description}" if study.description else f"Study {study.name}.",
             f"Budget {study.budget_tokens:,} tokens per method at {study.seq_len} tokens per sequence; base model "
             f"{study.base_model if isinstance(study.base_model, str) else 'from config'}. Scores are percentages; Δ is the "
             "mean difference over matched samples, with an exact paired test (sign test or sign-flip permutation). Validation losses are on each method's own held-out "
             "packed sequences, so they compare packings only loosely. Full report: report/leaderboard.md, report/index.html.")
    summary = root / "study.md"
    atomic_write(summary, render_markdown(f"Study: {study.name}", [Section("Methods", tables=(table,))], preamble=notes))
    atomic_write(root / "study.json", json.dumps({"study": study.model_dump(mode="json"), "methods": [
        {"name": r.name, "checkpoint": str(r.checkpoint), "score_run": r.score_run, "train_tokens": r.train_tokens,
         "train_loss": r.train_loss, "eval_loss": r.eval_loss,
         "lengths": [x for x in res["lengths"] if x["model"] == r.name], "vs_baseline": deltas.get(r.name)}
        for r in results]}, indent=2) + "\n")
    return report, summary


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.4f}"
