"""A study YAML (configs/studies/*.yaml), validated whole before any work: methods, their trainers' data options
and settings, the suite, the held-out perplexity set and the statistics."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ctxbench.harness.core.config import one_line, validate_config
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.identity import content_hash
from ctxbench.harness.core.io import slug
from ctxbench.trainers.base import ScratchModel, StudyInputs, TrainerConfig

RESERVED = {"base_model", "data", "store", "output_dir", "label", "seed"}  # set by the study, not by `training`
UNTRAINED = "untrained"  # the row of the starting checkpoint
DEFAULT_STORE = Path("runs")  # the results store every command writes to by default (ignored by git)
STUDIES_DIR = "studies"  # a study's default directory: <store>/studies/<name>, never a new directory in the cwd


def plain_name(name: str) -> str:
    """A name that becomes one directory (studies/<name>, data/<method>): never a path out of it."""
    if name != slug(name, max_len=100):
        raise ValueError(f"{name!r} is not a plain name (it names a directory); use letters, digits, '-', '_' and '.', "
                         f"e.g. {slug(name, max_len=100)!r}")
    return name


class MethodSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(description="the method's name in the report (unique)")
    trainer: str | None = Field(None, description="registered trainer (cpt, hqa_sft, logo, ...); default the study's trainer")
    data: dict[str, Any] = Field(default_factory=dict, description="the trainer's study data options, over the study's "
                                 "`data`; cpt: {method: splice, method_args: {retriever: bm25, k: 1}, mix_ratio: 0.5}")
    training: dict[str, Any] = Field(default_factory=dict, description="this method's trainer settings, over the study's")

    @field_validator("name")
    @classmethod
    def _name(cls, v):
        if v == UNTRAINED:
            raise ValueError(f"{v!r} is reserved; choose another name")
        return plain_name(v)


class EvalSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    suite: str | dict[str, Any] = Field(description="suite name, YAML path, or an inline suite mapping")
    backend: str = Field("hf", description="scoring backend; hf loads the checkpoint directory")
    backend_args: dict[str, Any] = Field(default_factory=dict, description="backend arguments, e.g. {dtype: float32, threads: 2}")
    data_dir: str | None = Field(None, description="task data (pg_essays/...); default env CTXBENCH_DATA_DIR")


class PerplexitySpec(BaseModel):
    """The shared held-out measurement: documents of the study corpus that no method trains on."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    lengths: list[int] = Field(min_length=1, description="window lengths in tokens (the model's context at each)")
    documents: int = Field(16, ge=2, description="held-out documents (each at least min_tokens long)")
    min_tokens: int | None = Field(None, ge=2, description="shortest held-out document in tokens; default the longest "
                                   "length (plus the stride with sliding windows)")
    modes: list[Literal["full", "sliding"]] = Field(["full"], min_length=1, description="full: one window per document "
                                                    "(SPLICE); sliding: windows every `stride` tokens (Press et al.)")
    stride: int | None = Field(None, ge=1, description="sliding: tokens between windows (default half the length)")
    seed: int = Field(0, description="seed of the held-out draw (documents ranked by a hash of seed and id)")

    @property
    def shortest(self) -> int:
        extra = (self.stride or max(self.lengths) // 2) if "sliding" in self.modes else 0
        return self.min_tokens or max(self.lengths) + extra


class StatsSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    alpha: float = Field(0.05, gt=0, lt=0.5, description="family-wise significance level of the report's verdicts")
    n_boot: int = Field(2000, ge=200, description="parametric bootstrap draws of the t statistic T* per comparison "
                        "(its reference distribution; at least 2000 are drawn)")
    power: float = Field(0.8, gt=0.5, lt=1, description="power at which the report states the detectable difference")


class StudyConfig(BaseModel):
    """A study YAML (configs/studies/*.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(description="study name; default output directory studies/<name>")
    description: str = Field("", description="one line shown in the report")
    out_dir: str | None = Field(None, description="where data/, train/, runs/, report/ and the study report go; default "
                                "runs/studies/<name> (under the results store; `ctxbench study --store` moves it)")
    corpus: dict[str, Any] = Field(description="corpus keys (path, format, text_field, ...); path 'stdlib:' = this Python's "
                                   "standard library source, 'stdlib:json,email' = those packages")
    methods: list[MethodSpec] = Field(min_length=2, description="methods to compare: a trainer and its data each")
    reference: str = Field(description="the method every other method is compared with (besides the untrained model)")
    seeds: list[int] = Field([0], min_length=1, description="replicates: each (method, seed) is its own training run")
    vary_packing: bool = Field(True, description="each seed makes its own data (seeded); false: one data set per method")
    budget_tokens: int = Field(ge=1, description="training tokens made per method (the same budget for every method)")
    seq_len: int = Field(ge=16, description="training sequence length in tokens")
    base_model: str | ScratchModel = Field(description="alias, HF dir, or {config: {...}} for a from-scratch model")
    trainer: str = Field("cpt", description="trainer of methods that name none")
    training: dict[str, Any] = Field(default_factory=dict, description="trainer settings shared by every method (max_steps, "
                                     "learning_rate, rope, ...); base_model, data, store, output_dir, label, seed are the study's")
    data: dict[str, Any] = Field(default_factory=dict, description="data options shared by every method, e.g. {eval_sequences: 8}")
    eval: EvalSpec = Field(description="how each checkpoint is scored")
    perplexity: PerplexitySpec | None = Field(None, description="the held-out perplexity set, scored beside the suite")
    stats: StatsSpec = Field(default_factory=StatsSpec, description="significance level, bootstrap draws, stated power")

    @field_validator("name")
    @classmethod
    def _name(cls, v):
        return plain_name(v)

    @field_validator("training")
    @classmethod
    def _no_reserved(cls, v):
        clash = sorted(RESERVED & set(v))
        if clash:
            raise ValueError(f"{clash[0]} is set by the study; remove it from training")
        return v

    @model_validator(mode="after")
    def _methods(self):
        names = [m.name for m in self.methods]
        dup = next((x for x in names if names.count(x) > 1), None)
        if dup:
            raise ValueError(f"methods: two methods are named {dup!r}; give one a distinct name")
        if self.reference not in names:
            raise ValueError(f"reference {self.reference!r} is not among the methods ({', '.join(names)})")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError("seeds: each seed once")
        for m in self.methods:
            clash = sorted(RESERVED & set(m.training))
            if clash:
                raise ValueError(f"methods.{m.name}.training: {clash[0]} is set by the study; remove it")
        return self

    @property
    def tokenizer(self) -> str:
        return self.base_model.tokenizer if isinstance(self.base_model, ScratchModel) else self.base_model

    def root(self) -> Path:
        return Path(self.out_dir or default_root(self.name))

    def trainer_of(self, m: MethodSpec) -> str:
        return m.trainer or self.trainer


def default_root(name: str, store: Path = DEFAULT_STORE) -> Path:
    """Where a study writes unless told: under the results store, so a study run from a checkout adds nothing that
    git, the linter or the tests see."""
    return Path(store) / STUDIES_DIR / name


def trainer_class(name: str, *, where: str):
    from ctxbench.harness.core import registry

    cls = registry.get("trainer", name, field=f"{where}.trainer")
    if getattr(cls, "study_data_cls", None) is None:
        raise ConfigError(f"{where}.trainer: trainer {name!r} cannot be a study method yet (it defines no study_data_cls; "
                          "see harness/studies/__init__.py)")
    return cls


def data_options(study: StudyConfig, m: MethodSpec, *, where: str):
    cls = trainer_class(study.trainer_of(m), where=where)
    try:
        return cls.study_data_cls(**{**study.data, **m.data})
    except ValidationError as e:
        raise ConfigError(one_line(e, f"{where}.data")) from None


def data_key(study: StudyConfig, m: MethodSpec, seed: int, corpus: dict[str, Any]) -> str:
    """What a method's data depends on; it names the data directory, so changed inputs never reuse old data."""
    options = data_options(study, m, where=f"methods.{m.name}")
    blob = [study.trainer_of(m), options.model_dump(mode="json"), corpus, study.tokenizer, study.seq_len,
            study.budget_tokens, data_seed(study, seed)]
    return content_hash(blob, 10, default=str)


def data_seed(study: StudyConfig, seed: int) -> int:
    return seed if study.vary_packing else study.seeds[0]


def study_inputs(study: StudyConfig, m: MethodSpec, seed: int, corpus: dict[str, Any], data_dir: Path | None) -> StudyInputs:
    out = study.root() / "data" / m.name / f"seed{data_seed(study, seed)}-{data_key(study, m, seed, corpus)}"
    return StudyInputs(corpus=corpus, tokenizer=study.tokenizer, seq_len=study.seq_len, budget_tokens=study.budget_tokens,
                       seed=data_seed(study, seed), out_dir=out, data_dir=data_dir)


def trainer_config(study: StudyConfig, m: MethodSpec, seed: int, inputs: StudyInputs, *, where: str = "study") -> TrainerConfig:
    """One (method, seed) training: the study's and the method's settings, the seed, and the method's data."""
    cls = trainer_class(study.trainer_of(m), where=f"{where}: methods.{m.name}")
    options = data_options(study, m, where=f"{where}: methods.{m.name}")
    settings = {**study.training, **m.training, "seed": seed, "base_model": study.base_model,
                "store": str(study.root() / "train"), "label": f"{m.name}-s{seed}"}
    try:
        raw = cls.study_config(settings, options, inputs)
    except ConfigError as e:
        raise ConfigError(f"{where}: methods.{m.name}: {e}") from None
    return validate_config(cls.config_cls, raw, where=f"{where}: methods.{m.name}.training")


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


def load_study(path: Path) -> StudyConfig:
    """Read and fully validate a study: the config, each method's data options and trainer config, and the suite."""
    from ctxbench.harness.core.config import load_config, resolve_config

    study = load_config(path, StudyConfig, kind="studies", field="study",
                        expect="keys name, corpus, methods, reference, base_model, eval, ...")
    path = resolve_config(path, kind="studies", field="study")
    for m in study.methods:
        placeholder = StudyInputs(study.corpus, study.tokenizer, study.seq_len, study.budget_tokens, study.seeds[0],
                                  study.root() / "data" / m.name, None)
        trainer_config(study, m, study.seeds[0], placeholder, where=path.name)
    load_eval_suite(study.eval, where=path.name)
    from ctxbench.harness.backends.args import check_backend_args

    check_backend_args(study.eval.backend, study.eval.backend_args, where=f"{path.name}: eval.")
    return study
