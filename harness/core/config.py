"""Suite configs: YAML under a benchmark's tasks/<family>/suites/ (cross-family suites: configs/suites/), validated with
pydantic. Errors name the key and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ctxbench.harness.core import registry
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.fitting import check_mode
from ctxbench.harness.core.lengths import parse_length
from ctxbench.harness.core.types import TaskContract

# configs/ beside the packages: the checkout (editable install) or site-packages/ctxbench/configs (wheel)
CONFIG_ROOT = Path(__file__).resolve().parents[2] / "configs"
# A benchmark's suites live with it (tasks/<family>/suites/NAME.yaml); found by path, never imported from tasks
TASKS_ROOT = CONFIG_ROOT.parent / "tasks"
ModelT = TypeVar("ModelT", bound=BaseModel)


class TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    task: str = Field(description="registered task name, e.g. ruler/niah_single_1")
    name: str | None = Field(None, description="display name for a variant; defaults to the task name")
    args: dict[str, Any] = Field(default_factory=dict, description="overrides of the task's arguments")
    lengths: list[int] | None = Field(None, description="lengths for this task only (e.g. LongBench at 128K in a RULER suite)")

    @model_validator(mode="before")
    @classmethod
    def _max_new_tokens(cls, data):
        """`max_new_tokens: N` (lm-eval's and HELMET's name) is this task's answer budget: the task argument
        tokens_to_generate, where the suite stores it (so the run's identity and the sample cache see it)."""
        if isinstance(data, dict) and "max_new_tokens" in data:
            data = dict(data)
            budget = data.pop("max_new_tokens")
            if "tokens_to_generate" in (data.get("args") or {}):
                raise ValueError("give max_new_tokens or args.tokens_to_generate, not both")
            data["args"] = {**(data.get("args") or {}), "tokens_to_generate": budget}
        return data

    @field_validator("lengths", mode="before")
    @classmethod
    def _task_lengths(cls, v):
        return Suite._range(v) if v is not None else v

    @field_validator("lengths")
    @classmethod
    def _task_positive(cls, v):
        return Suite._positive(v) if v is not None else v

    @property
    def display(self) -> str:
        return self.name or self.task


class Suite(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(description="the suite's name; run directories use a sanitised form (no path separators)")
    description: str = ""
    seed: int = Field(42, description="base seed; a sample depends only on (task args, length, index, seed, tokenizer)")
    lengths: list[int] = Field(min_length=1, description="target lengths in tokens (prompt + generation)")
    samples: int = Field(ge=1, description="samples per task and length")
    template: str = Field("auto", description="auto, chat, or a plain template name for base models")
    truncation: str = Field("refuse", description="refuse: error on over-long prompts; middle: cut the middle, recorded")
    verify: str = Field("auto", description="fast: trust exact piece counts where the tokenizer is additive (checked once per "
                        "tokenizer) and the first sample per task and length matched; full: tokenize every generated prompt; "
                        "auto: fast from 32 samples per task and length, else full (same samples either way)")
    tasks: list[TaskSpec] = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str):
        if not v.strip() or len(v) > 100 or any(ord(c) < 32 or c == "\x7f" for c in v):
            raise ValueError("must be 1 to 100 printable characters, e.g. my-suite")
        return v

    @field_validator("tasks", mode="before")
    @classmethod
    def _strings_are_tasks(cls, v):
        return [{"task": t} if isinstance(t, str) else t for t in v] if isinstance(v, list) else v

    @field_validator("tasks")
    @classmethod
    def _distinct(cls, v):
        """Rows are keyed by task name, length and index: a second entry under the same name would merge with the
        first (different args) or be scored twice (same args)."""
        seen: set[str] = set()
        for i, spec in enumerate(v):
            if spec.display in seen:
                raise ValueError(f"tasks.{i}: {spec.display} listed twice; give it a distinct `name`")
            seen.add(spec.display)
        return v

    @field_validator("lengths", mode="before")
    @classmethod
    def _range(cls, v):
        """A list (4096 or "4K"), or {start, stop, num, spacing: linear|geometric}."""
        if isinstance(v, list):
            try:
                return [parse_length(x) if isinstance(x, str) else x for x in v]
            except ValueError as e:
                raise ValueError(f"{e}; write lengths as 4096 or 4K") from None
        if not isinstance(v, dict):
            return v
        unknown = set(v) - {"start", "stop", "num", "spacing"}
        if unknown or not {"start", "stop", "num"} <= set(v):
            raise ValueError("a range needs start, stop, num and optionally spacing (linear or geometric)")
        import numpy as np

        start, stop, num, spacing = int(v["start"]), int(v["stop"]), int(v["num"]), v.get("spacing", "geometric")
        if spacing not in ("linear", "geometric") or num < 1 or start < 1 or stop < start:
            raise ValueError("range: need 1 <= start <= stop, num >= 1, spacing linear or geometric")
        pts = np.geomspace(start, stop, num) if spacing == "geometric" else np.linspace(start, stop, num)
        return [int(round(x)) for x in pts]

    @field_validator("lengths")
    @classmethod
    def _positive(cls, v):
        for x in v:
            if 0 < x < 64 or x < 0:
                raise ValueError(f"each length must be at least 64 tokens (or 0: short-context lm-eval tasks), got {x}")
        return sorted(set(v))

    @field_validator("verify")
    @classmethod
    def _verify(cls, v):
        if v == "auto":
            return v
        try:
            return check_mode(v)
        except ConfigError:
            raise ValueError(f"must be 'auto', 'fast' or 'full', got {v!r}") from None

    @field_validator("truncation")
    @classmethod
    def _policy(cls, v):
        if v not in ("refuse", "middle"):
            raise ValueError(f"must be 'refuse' or 'middle', got {v!r}")
        return v


def one_line(err: ValidationError, where: str) -> str:
    e = err.errors()[0]
    loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
    msg = e["msg"].removeprefix("Value error, ")
    if msg.startswith(f"{loc}.") and ": " in msg:  # the message names the element itself (tasks.1: ...)
        loc, msg = msg.split(": ", 1)
    if e["type"] == "extra_forbidden":
        msg = "unknown key; remove it or fix its spelling"
    elif e["type"] == "missing":
        msg = "required key is missing"
    return f"{where}: {loc}: {msg}"


def read_yaml_mapping(path: Path, *, field: str, expect: str) -> dict[str, Any]:
    """A YAML file that must hold a mapping; every failure is one line naming the file (or field)."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{field}: {path} does not exist")
    if path.is_dir():
        raise ConfigError(f"{field}: {path} is a directory; give a YAML file")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path.name}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    except OSError as e:
        raise ConfigError(f"{field}: cannot read {path} ({e.strerror or e})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path.name}:{at} invalid YAML ({getattr(e, 'problem', e)})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path.name}: must be a mapping with {expect}")
    return raw


def validate_config(model: type[ModelT], raw: dict[str, Any], *, where: str) -> ModelT:
    """Validate a mapping against a config model; a bad key or value is one line naming it."""
    try:
        return model(**raw)
    except ValidationError as e:
        raise ConfigError(one_line(e, where)) from None


def load_config(name_or_path: str | Path, model: type[ModelT], *, kind: str, expect: str, field: str = "--config",
                **overrides: Any) -> ModelT:
    """The one loader of suite, trainer, data and study configs: found by path or shipped name (resolve_config),
    read as a YAML mapping, overrides of None ignored, validated with one-line errors naming the file and key."""
    path = resolve_config(name_or_path, kind=kind, field=field)
    raw = read_yaml_mapping(path, field=field, expect=expect)
    return validate_config(model, {**raw, **{k: v for k, v in overrides.items() if v is not None}}, where=path.name)


CONFIG_SUFFIXES = {"suites": (".yaml", ".yml"), "trainers": (".yaml", ".yml"), "data": (".yaml", ".yml"),
                   "studies": (".yaml", ".yml"), "deepspeed": (".json",), "reported": (".csv",)}


def resolve_config(name_or_path: str | Path, *, kind: str, field: str) -> Path:
    """A config as a user names it, from any directory: a real file or directory wins; else the shipped
    configs/<kind>/ file (a suite: _shipped_suite) by its documented path (configs/trainers/cpt-tiny.yaml) or by name
    (cpt-tiny), so the configs a wheel ships work outside a checkout."""
    p = Path(name_or_path).expanduser()
    if p.exists():
        return p
    shipped = _shipped_config(p, kind)
    if shipped is not None:
        return shipped
    known = ", ".join(shipped_config_names(kind))
    shipped_where = "suites" if kind == "suites" else f"configs/{kind}"
    raise ConfigError(f"{field}: {p} does not exist (here or among the shipped {shipped_where}); "
                      f"give a file's path or a shipped name: {known}")


def _shipped_config(p: Path, kind: str) -> Path | None:
    if p.is_absolute() or not p.parts:
        return None
    if kind == "suites":
        return _shipped_suite(p)
    if p.parts[0] == "configs":  # the documented path, relative to the package's configs/ wherever it is installed
        candidates = [CONFIG_ROOT.parent / p]
    elif len(p.parts) == 1:
        suffixes = CONFIG_SUFFIXES[kind]
        candidates = [CONFIG_ROOT / kind / (p.name if p.suffix in suffixes else p.name + s) for s in suffixes]
    else:
        return None
    return next((c for c in candidates if c.is_file()), None)


def _shipped_suite(p: Path) -> Path | None:
    """A shipped suite by name (ruler-quick), by its path in the package (tasks/ruler/suites/ruler-quick.yaml), or by
    the path it had before benchmarks kept their own suites (configs/suites/ruler-quick.yaml): each works anywhere."""
    suffixes = CONFIG_SUFFIXES["suites"]
    if p.parts[0] in ("configs", "tasks") and (CONFIG_ROOT.parent / p).is_file():
        return CONFIG_ROOT.parent / p
    if len(p.parts) == 1 or (p.parts[:2] == ("configs", "suites") and len(p.parts) == 3):
        return shipped_suite_files().get(p.stem if p.suffix in suffixes else p.name)
    return None


def shipped_suite_files() -> dict[str, Path]:
    """Name -> file of every shipped suite: each benchmark's under tasks/<family>/suites/, the cross-family ones (the
    papers' presets) under configs/suites/. Names are unique across both (tests/test_suite_files.py)."""
    suffixes = CONFIG_SUFFIXES["suites"]
    files = [*(CONFIG_ROOT / "suites").glob("*"), *TASKS_ROOT.glob("*/suites/*")]
    return {p.stem: p for p in sorted(files, key=lambda p: p.name) if p.suffix in suffixes and p.is_file()}


def shipped_config_names(kind: str) -> list[str]:
    """The names (file stems) of the configs shipped under configs/<kind>/ (suites: and under tasks/<family>/suites/)."""
    if kind == "suites":
        return sorted(shipped_suite_files())
    root = CONFIG_ROOT / kind
    return sorted(x.stem for x in root.iterdir() if x.suffix in CONFIG_SUFFIXES[kind]) if root.is_dir() else []


def suite_path(name_or_path: str | Path) -> Path:
    """A suite file: a path, a shipped name, or the name of a suite a plugin ships (registry kind `suite`)."""
    try:
        return resolve_config(name_or_path, kind="suites", field="suite")
    except ConfigError as e:
        plugin_suites = registry.entries("suite")  # plugins load only when no file or shipped suite has the name
        if str(name_or_path) in plugin_suites:
            return Path(plugin_suites[str(name_or_path)]())
        raise ConfigError(f"{e}; plugins' suites: {', '.join(plugin_suites)}" if plugin_suites else str(e)) from None


def shipped_suites() -> dict[str, str]:
    """Name -> one-line description of every shipped suite (shipped_suite_files), then of those plugins ship."""
    paths = shipped_suite_files()
    plugins = {name: factory for name, factory in registry.entries("suite").items() if name not in paths}
    out = {}
    for name, path in [*paths.items(), *((n, None) for n in plugins)]:
        source = f" (plugin {registry.origin('suite', name).distribution})" if path is None else ""
        try:
            raw = read_yaml_mapping(path or Path(plugins[name]()), field="suite", expect="keys name, lengths, samples, tasks")
        except ConfigError as e:  # one broken plugin suite is listed as such, not a failed listing
            out[name] = f"unreadable: {e}{source}"
            continue
        desc = str(raw.get("description") or "").strip().split("\n")[0]
        out[name] = (desc or f"{len(raw.get('tasks', []))} tasks at {raw.get('lengths')}") + source
    return out


def load_suite(name_or_path: str, **overrides: Any) -> Suite:
    path = suite_path(name_or_path)
    suite = load_config(path, Suite, kind="suites", field="suite", expect="keys name, lengths, samples, tasks", **overrides)
    for i, spec in enumerate(suite.tasks):
        build_task(spec, where=f"{path.name}: tasks.{i}")
    return suite


def select_tasks(suite: Suite, patterns: str | None) -> Suite:
    """Keep the suite's tasks matching comma-separated names or globs (e.g. 'ruler/niah*')."""
    if not patterns:
        return suite
    import fnmatch

    pats = [p.strip() for p in patterns.split(",") if p.strip()]
    keep = [t for t in suite.tasks if any(fnmatch.fnmatch(t.display, p) or fnmatch.fnmatch(t.task, p) for p in pats)]
    if not keep:
        raise ConfigError(f"--tasks: {patterns!r} matches no task of suite {suite.name}; it has {', '.join(t.display for t in suite.tasks)}")
    return suite.model_copy(update={"tasks": keep})


ADHOC_LENGTHS = (4096,)  # `--tasks` without `--suite`: these lengths and samples unless --lengths / --samples say
ADHOC_SAMPLES = 10


def adhoc_suite(patterns: str, **overrides: Any) -> Suite:
    """`--tasks` without `--suite`, as lm-eval and RULER users type it: the registered tasks matching comma-separated
    names or globs, as a suite named `adhoc` (recorded under that name with its whole config, like any suite)."""
    import fnmatch

    pats = [p.strip() for p in patterns.split(",") if p.strip()]
    known = registry.names("task")
    for p in pats:
        if not any(fnmatch.fnmatch(n, p) for n in known):
            raise ConfigError(f"--tasks: {p!r} matches no registered task; list them with `ctxbench tasks` "
                              "(or give --suite to pick from a suite's tasks)")
    raw = {"name": "adhoc", "description": f"ad-hoc suite: --tasks {patterns}", "lengths": list(ADHOC_LENGTHS),
           "samples": ADHOC_SAMPLES, "tasks": [n for n in known if any(fnmatch.fnmatch(n, p) for p in pats)],
           **{k: v for k, v in overrides.items() if v is not None}}
    try:
        return Suite(**raw)
    except ValidationError as e:
        raise ConfigError(one_line(e, "ad-hoc suite (--tasks)")) from None


def task_args_model(name: str) -> type[BaseModel] | None:
    """A registered task's argument model, as it declared it when it registered (`register("task", NAME, args=Model)`);
    None for a task that declares none (a plugin's that predates args=)."""
    return registry.task_traits(name).args


def build_task(spec: TaskSpec, *, where: str = "task"):
    factory = registry.get("task", spec.task, field=f"{where}.task")
    try:
        task = factory(**spec.args)
    except ValidationError as e:
        if e.errors()[0]["type"] == "extra_forbidden":  # name the valid keys, as backend arguments do
            model = task_args_model(spec.task)
            valid = ", ".join(model.model_fields) if model is not None else "see its documentation"
            raise ConfigError(f"{one_line(e, f'{where}.args')}; valid keys: {valid} (see `ctxbench tasks {spec.task}`)") from None
        raise ConfigError(one_line(e, f"{where}.args")) from None
    if not isinstance(task, TaskContract):  # a plugin's factory: the runner relies on the declared capabilities
        raise ConfigError(f"{where}.task: {spec.task}'s factory returned a {type(task).__name__}, not a Task; subclass "
                          "ctxbench.tasks.base.Task (see docs/extending.md)")
    if task.extra:
        from ctxbench.harness.core.extras import require_extra

        require_extra(task.extra, for_=f"task {spec.name or spec.task}")
    if spec.name:
        task.name = spec.name
    return task
