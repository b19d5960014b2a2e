"""Generate the reference pages from code, so that they can never disagree with it.

Run by mkdocs-gen-files at every `mkdocs build` (see mkdocs.yml); `python3 docs/scripts/gen_reference.py OUT_DIR`
writes the same pages to a directory. Pages: reference/cli.md (the typer app, as `--help` shows it),
reference/tasks.md (every registered task and its pydantic arguments), reference/backends.md (each backend's
`--backend-arg` keys), reference/record.md (RunRecord's fields,
the sample row keys of harness/run/batch.py and the schema version).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import re
import sys
import tokenize
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_TAG = re.compile(r"\s*\[(default: [^\]]*|required|env var: [^\]]*)\]")


def cell(text: object, limit: int = 0) -> str:
    """A value as one markdown table cell: one line, pipes and angle brackets escaped."""
    s = " ".join(str(text).split())
    if limit and len(s) > limit:
        s = s[: limit - 1] + "…"
    return s.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def code(text: object, limit: int = 60) -> str:
    """A value as inline code in a table cell (long templates shortened; newlines shown as ⏎). Pipes need no
    escape inside a code span of a Python-Markdown table."""
    s = str(text).replace("\n", "⏎")
    if limit and len(s) > limit:
        s = s[: limit - 1] + "…"
    return f"`` {s} ``" if "`" in s else f"`{s}`" if s.strip() else "`\"\"`"


# --- CLI -----------------------------------------------------------------------------------------------------


def _commands(cmd, ctx, path):
    """Every command below `cmd` (depth first), with the click context `--help` would use (built from the command's
    own context class: typer vendors click in some versions)."""
    yield path, cmd, ctx
    if hasattr(cmd, "list_commands"):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                yield from _commands(sub, sub.context_class(sub, info_name=name, parent=ctx), f"{path} {name}")


def _param_rows(cmd, ctx) -> list[str]:
    rows = []
    for p in cmd.get_params(ctx):
        record = p.get_help_record(ctx)
        if record is None or getattr(p, "hidden", False):
            continue
        names, help_text = record
        tags = [t for t in _TAG.findall(help_text)]
        help_text = _TAG.sub("", help_text).strip()
        default = next((t.split(": ", 1)[1] for t in tags if t.startswith("default")), "")
        kind = "argument" if type(p).__name__.endswith("Argument") else "option"
        required = "**required** " if "required" in tags or getattr(p, "required", False) else ""
        rows.append(f"| {code(names, 0)} | {kind} | {cell(default) or '–'} | {required}{cell(help_text)} |")
    return rows


def cli_page() -> str:
    """Every command of `ctxbench`, its usage, help and options with defaults, from the typer app itself."""
    import typer.main

    from ctxbench.harness import cli

    root = typer.main.get_command(cli.app)
    lines = ["# CLI reference", "",
             "Generated from the typer app (`ctxbench.harness.cli.app`) at every docs build, so it says what "
             "`ctxbench COMMAND --help` says. Exit codes are explained in [Troubleshooting](../troubleshooting.md#exit-codes).", ""]
    for path, cmd, ctx in _commands(root, root.context_class(root, info_name="ctxbench"), "ctxbench"):
        lines += [f"## `{path}`", "", cell(inspect.cleandoc(cmd.help or "")).replace("\\|", "|"), "",
                  "```text", cmd.get_usage(ctx).strip(), "```", ""]
        rows = _param_rows(cmd, ctx)
        if rows:
            lines += ["| name | kind | default | help |", "|---|---|---|---|", *rows, ""]
        if hasattr(cmd, "list_commands"):
            subs = [s for s in cmd.list_commands(ctx) if not getattr(cmd.get_command(ctx, s), "hidden", False)]
            lines += ["Commands: " + ", ".join(f"`{path} {s}`" for s in subs), ""]
    return "\n".join(lines)


# --- tasks ---------------------------------------------------------------------------------------------------


def type_name(annotation) -> str:
    text = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    return re.sub(r"\btyping\.|\bpathlib\.|<class '([^']*)'>", r"\1", text)


def _args_table(args_cls, defaults: dict, varies: set[str]) -> list[str]:
    rows = ["| argument | type | default | help |", "|---|---|---|---|"]
    for name, field in args_cls.model_fields.items():
        default = "varies by task (below)" if name in varies else code(defaults.get(name))
        rows.append(f"| `{name}` | {code(type_name(field.annotation), 80)} | {default} | {cell(field.description or '')} |")
    return rows


def _family_section(family: str, tasks: dict) -> list[str]:
    lines = [f"## {family}", "", "| task | category | metric | what it measures | data |", "|---|---|---|---|---|"]
    for name, task in tasks.items():
        lines.append(f"| `{name}` | {cell(task.category)} | `{task.metric}` | {cell(task.describe())} | {cell(task.data_needs())} |")
    by_args: dict[type, dict] = defaultdict(dict)
    for name, task in tasks.items():
        by_args[type(task.args)][name] = task.args.model_dump(mode="json")
    for args_cls, per_task in by_args.items():
        names = list(per_task)
        first = per_task[names[0]]
        varies = {k for k in first if any(d.get(k) != first[k] for d in per_task.values())}
        lines += ["", f"### Arguments of {', '.join(f'`{n}`' for n in names[:6])}"
                  + (f" and {len(names) - 6} more" if len(names) > 6 else ""), "",
                  f"Model `{args_cls.__module__}.{args_cls.__name__}`.", "", *_args_table(args_cls, first, varies)]
        if varies:
            cols = sorted(varies)
            lines += ["", "| task | " + " | ".join(f"`{c}`" for c in cols) + " |", "|---" * (len(cols) + 1) + "|"]
            lines += [f"| `{n}` | " + " | ".join(code(d.get(c), 40) for c in cols) + " |" for n, d in per_task.items()]
    return lines + [""]


def tasks_page() -> str:
    """Every registered task (plugins included), grouped by family, with its argument model as a table."""
    from ctxbench.harness.core import registry

    families: dict[str, dict] = defaultdict(dict)
    for name, factory in registry.entries("task").items():
        families[name.split("/")[0]][name] = factory()
    lines = ["# Task arguments", "",
             "Generated from each registered task's pydantic argument model at every docs build (the same "
             "registry `ctxbench tasks` reads). Set an argument per task in a suite (`args: {name: value}`) or on the "
             "command line. Unknown keys are refused with one line.", "",
             "Families: " + ", ".join(f"[{f}](#{f})" for f in families), ""]
    for family, tasks in families.items():
        lines += _family_section(family, tasks)
    return "\n".join(lines)


def backends_page() -> str:
    """Every shipped backend's `--backend-arg` keys, from the Args model each declared when it registered (the models
    the CLI validates them with), with its sampling support and its speed-only arguments."""
    from ctxbench.harness.core import registry

    own = [n for n in registry.names("backend") if registry.origin("backend", n) is None]
    lines = ["# Backend arguments", "",
             "Generated from what each backend declares when it registers (`register(\"backend\", NAME, args=Model, "
             "samples=..., distributions=...)`) at every docs build; `ctxbench backends` lists the same, plugins' "
             "included. Pass any of them as `--backend-arg KEY=VALUE` (repeatable); an unknown or ill-typed key is "
             "refused with one line listing the valid ones. Speed-only arguments change how fast a run goes, never its "
             "results: a resume may change them. Registered backends: " + ", ".join(f"`{n}`" for n in own) + ".", ""]
    for name in own:
        traits = registry.backend_traits(name)
        if traits.args is None:
            continue
        defaults = {k: f.default for k, f in traits.args.model_fields.items()}
        speed = sorted(traits.execution & set(traits.args.model_fields))
        lines += [f"## `{name}`", "", f"Model `{traits.args.__name__}`. "
                  + ("Samples with `--gen-kwargs`." if traits.samples else "Greedy only (no `--gen-kwargs`).")
                  + (f" Speed only: {', '.join(f'`{k}`' for k in speed)}." if speed else ""), "",
                  *_args_table(traits.args, defaults, set()), ""]
    return "\n".join(lines)


def _nested_models(annotation) -> list[type]:
    """The pydantic models inside a field's annotation (list[MethodSpec], EvalSpec | None, ...)."""
    import typing

    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _nested_models(arg)]


def _field_default(field) -> object:
    from pydantic_core import PydanticUndefined

    if field.default_factory is not None:
        return field.default_factory()
    return "required" if field.default is PydanticUndefined else field.default


def model_tables(root: type, level: str = "###") -> list[str]:
    """A table per pydantic model, the root first, then every model nested in its fields (each once)."""
    lines, todo, seen = [], [root], set()
    while todo:
        cls = todo.pop(0)
        if cls in seen:
            continue
        seen.add(cls)
        defaults = {k: _field_default(f) for k, f in cls.model_fields.items()}
        doc = cell(inspect.getdoc(cls) or "") if cls.__doc__ else ""
        lines += [f"{level} `{cls.__name__}`", "", doc, "", *_args_table(cls, defaults, set()), ""]
        todo += [m for f in cls.model_fields.values() for m in _nested_models(f.annotation)]
    return lines


def configs_page() -> str:
    """The keys of study, trainer and data-pack config files, from the pydantic models that validate them."""
    from ctxbench.harness.core import registry
    from ctxbench.harness.studies.config import StudyConfig
    from ctxbench.trainers.data.pipeline import SynthesisConfig

    lines = ["# Config files", "",
             "Generated from the pydantic models that validate each config file, at every docs build. Unknown keys "
             "are refused with one line naming the key. Defaults shown as `required` must be given.", "",
             "## Study config (`ctxbench study FILE`)", "", *model_tables(StudyConfig)]
    for name, trainer in registry.entries("trainer").items():
        config_cls = getattr(trainer, "config_cls", None)
        if config_cls is not None:
            lines += [f"## Trainer `{name}` (`ctxbench train {name} --config FILE`)", "", *model_tables(config_cls)]
    lines += ["## Data pack config (`ctxbench data pack --config FILE`)", "", *model_tables(SynthesisConfig)]
    for name, method in registry.entries("synthesis").items():  # the packings share the pack config above
        if method.args is None:
            lines += [f"## Synthesis method `{name}` (`ctxbench data pack --method {name} --config FILE`)", "",
                      method.help, "", *model_tables(method.config)]
    return "\n".join(lines)


# --- store and record ----------------------------------------------------------------------------------------


# Meanings for fields and keys that carry no comment in the code. The field and key LISTS always come from the code;
# a field missing here shows its code comment, or "not described yet".
FIELD_MEANING = {
    "run_id": "the run directory's name: a hash of what identifies the run (model, suite, task args, seed, ...)",
    "created": "when the run was first created (UTC, ISO 8601)",
    "suite": "the suite's name (`adhoc` style names for suites built from --tasks)",
    "suite_config": "the suite as loaded and validated: lengths, samples, seed, tasks with their full args",
    "model": "what --model named (alias, directory, .gguf file or hub id)",
    "backend": "the registered backend that scored it (`ctxbench backends`; lmeval:<type> names lm-eval's model type)",
    "backend_args": "the backend's arguments as validated (secrets masked; keys from the environment never written)",
    "tokenizer": "the tokenizer that fitted the prompts",
    "tokenizer_fingerprint": "hash of the tokenizer's files: samples depend on it",
    "template": "auto, chat, plain or a named template",
    "seed": "the suite's seed (samples depend only on task args, length, index, seed and tokenizer)",
    "truncation": "refuse or middle",
    "versions": "package versions and ctxbench's commit",
    "command": "the command line that created the run",
    "schema_version": "the store schema this record follows (see the changelog)",
}
ROW_MEANING = {
    "id": "`task@length#index`, unique within a run", "task": "the task's name in the suite", "category": "the task's category",
    "length": "the target length in tokens (an axis, never part of a metric name)", "index": "the sample's index at that length",
    "depths": "realised depth of every needle, percent of the context", "prompt_hash": "sha256 of the exact prompt (16 hex)",
    "prompt_tokens": "tokens in the rendered prompt", "max_new_tokens": "the generation budget",
    "prediction": "the model's output text", "generated_tokens": "tokens generated", "seconds": "wall time for the sample",
    "timing": "what the times are: `sample`, `batch-share` or `request`", "prefill_seconds": "time to the first token",
    "decode_seconds": "the rest of the generation", "metric": "the registered metric that scored it",
    "score": "0..1 (None when the sample errored; perplexity tasks record losses)", "empty": "the prediction was empty",
    "answers": "the references", "truncated_tokens": "tokens cut by `--truncation middle` (0 = none)",
    "error": "why the sample failed (rerunning retries it), else null", "depth": "needle depth of grid tasks",
    "position": "gold position of KV retrieval",
    "cluster": "id shared by samples with one haystack or document (null: independent); see statistics.md",
    "meta": "task-specific extras",
    "reasoning": "only thinking runs: the reasoning split off the answer (docs/thinking.md)",
    "reasoning_tokens": "generated tokens spent reasoning (thinking runs, or a server's usage report); null: not recorded",
    "cached_tokens": "prompt tokens a prefix cache served (the server's report, or a local KV reuse); null: not recorded",
    "token_source": "whose counts the row's tokens are: `server` (the usage report), `counted` (ctxbench's), empty before row version 3",
    "gpu_seconds": "a GPU backend's device time of the generate call times its devices (the row's share); null elsewhere",
    "cost_usd": "the row's price in USD under the run's price table (docs/cost-and-scale.md); null: no price, never 0",
    "reasoning_format": "only thinking runs: how it was marked",
    "answer_tokens": "only thinking runs: tokens of the answer after the reasoning",
    "failure": "only thinking runs: `thinking_unfinished` when the reasoning never closed (scored 0)",
    "repeat": "only with --repeats: which generation of the sample",
    "over_budget": "only when a server ignored max_tokens: the characters it sent; the prediction was cut to the budget",
    "judge": "only judge tasks: the judge's model, version and verdict (docs/benchmarks/judge.md)",
    "parse": "only Oolong tasks: the official parser's reading of the answer and its confidence (docs/benchmarks/oolong.md)",
}
# keys the generation loop adds only in some runs (spread into `extra=` from thinking, repeats and judge tasks)
OPTIONAL_ROW_KEYS = ("reasoning", "reasoning_format", "answer_tokens", "failure", "repeat", "judge",
                     "over_budget", "parse")

MANIFEST_MEANING = {
    "trainer": "the registered trainer (cpt, hqa_sft, logo, ...)", "run_id": "the training's run id in the store",
    "label": "the display name", "config_hash": "hash of the config keys that change the weights",
    "data_hash": "hash of the training data's content", "base_model": "the starting checkpoint (or scratch-<type>)",
    "base_model_gguf": "the GGUF file the base model was converted from, if any", "parameters": "parameter counts",
    "seq_len": "training sequence length", "tokens": "tokens trained, in the data, and held out for evaluation",
    "steps": "optimizer steps taken", "train_loss": "last training loss", "eval_loss": "last validation loss",
    "resumed_from_step": "the checkpoint step this session resumed from (null: from the start)",
    "seconds": "wall time of the last session", "rope": "the RoPE settings applied (theta, scaling)",
    "run_dir": "the training's run directory", "created": "when the weights were saved (UTC)",
    "config": "the full validated config",
}


def field_comments(cls) -> dict[str, str]:
    """The comment of each field of a dataclass: the `# ...` on its line, or the comment lines just above it."""
    source = inspect.getsource(cls)
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("# ").strip()
    out = {}
    for node in ast.parse(source).body[0].body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            above, line = [], node.lineno - 1
            while line in comments and not source.splitlines()[line - 1].split("#")[0].strip():
                above.insert(0, comments[line])
                line -= 1
            trailing = [comments[n] for n in range(node.lineno, (node.end_lineno or node.lineno) + 1) if n in comments]
            out[node.target.id] = " ".join(above + trailing)
    return out


def dict_keys(module, *, function: str | None = None, target: str | None = None) -> list[str]:
    """The string keys of the dict literal that `function` in `module` returns, or that any function (or `function`)
    assigns to `target`."""
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.FunctionDef) and node.name == (function or node.name):
            for sub in ast.walk(node):
                if target is None and isinstance(sub, ast.Return) and isinstance(sub.value, ast.Dict):
                    return [k.value for k in sub.value.keys if isinstance(k, ast.Constant)]
                if (target is not None and isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Dict)
                        and any(isinstance(t, ast.Name) and t.id == target for t in sub.targets)):
                    return [k.value for k in sub.value.keys if isinstance(k, ast.Constant)]
    what = f"assigns a dict literal to `{target}`" if target else f"`{function}` returns a dict literal"
    raise RuntimeError(f"{module.__name__}: no function {what}; update docs/scripts/gen_reference.py")


def row_keys() -> list[str]:
    """The keys of a sample row: the fields of Row (harness/core/rows.py), then those the generation loop adds (the
    dict literal harness/run/batch.py's `sample_row` passes as `extra=`)."""
    import ast

    from ctxbench.harness.core.rows import FIELDS
    from ctxbench.harness.run import batch

    fn = next(n for n in ast.walk(ast.parse(inspect.getsource(batch))) if isinstance(n, ast.FunctionDef) and n.name == "sample_row")
    extra = next(k.value for k in ast.walk(fn) if isinstance(k, ast.keyword) and k.arg == "extra" and isinstance(k.value, ast.Dict))
    return [f.name for f in FIELDS] + [k.value for k in extra.keys if isinstance(k, ast.Constant)] + list(OPTIONAL_ROW_KEYS)


def manifest_keys() -> list[str]:
    """The keys of ctxbench_manifest.json, read from the dict literal trainers/loop.py assigns to `manifest`."""
    from ctxbench.trainers import loop

    return dict_keys(loop, target="manifest")


def _record_classes() -> list[type]:
    """RunRecord and any dataclass it is made of (schema 3 splits identity from execution)."""
    from ctxbench.harness.core import types

    found = [types.RunRecord]
    for f in dataclasses.fields(types.RunRecord):
        for name, obj in vars(types).items():
            if dataclasses.is_dataclass(obj) and isinstance(obj, type) and name in str(f.type) and obj not in found:
                found.append(obj)
    return found


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        return code(f.default)
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return code(f.default_factory())  # type: ignore[misc]
    return "required"


def record_page() -> str:
    from ctxbench.harness.core import types

    lines = ["# Record fields", "",
             f"Generated from `ctxbench.harness.core.types` and `ctxbench.harness.run.batch` at every docs build. "
             f"Current schema version: **{types.SCHEMA_VERSION}** (see [Store and record](../store.md) for the files, "
             "and the [Changelog](../changelog.md) for what changed between versions).", ""]
    for cls in _record_classes():
        notes = field_comments(cls)
        lines += [f"## `{cls.__name__}`", "", cell(inspect.getdoc(cls) or ""), "",
                  "| field | type | default | meaning |", "|---|---|---|---|"]
        lines += [f"| `{f.name}` | {code(f.type, 70)} | {_default(f)} | "
                  f"{cell(notes.get(f.name) or FIELD_MEANING.get(f.name, 'not described yet'))} |"
                  for f in dataclasses.fields(cls)]
        lines.append("")
    execution = getattr(types, "EXECUTION_ARGS", None)
    if execution:
        lines += ["## Execution settings", "", "Backend arguments that change only how fast a run goes, never what it "
                  "predicts (`EXECUTION_ARGS`): the run id leaves them out, a resume may change them, and each session "
                  "records its own. Every other backend argument is part of the run's identity.", "",
                  ", ".join(f"`{a}`" for a in sorted(execution)), ""]
    lines += ["## Sample rows", "", "Each line of a run's `samples*.jsonl` is one JSON object with these keys, in this "
              "order (the fields of `Row` in `harness/core/rows.py`, then the generation loop's own from `_row` in "
              "`harness/run/batch.py`):", "", "| key | meaning |", "|---|---|"]
    lines += [f"| `{k}` | {cell(ROW_MEANING.get(k, 'not described yet')).replace('`', '')} |" for k in row_keys()]
    lines.append("")
    lines += ["## Training manifest", "", "`ctxbench_manifest.json`, written beside the weights of every checkpoint a "
              "ctxbench trainer saves (from `trainers/loop.py`; a trainer may add keys through "
              "`manifest_extra`). Scoring the checkpoint copies it into the record's `training`.", "",
              "| key | meaning |", "|---|---|"]
    lines += [f"| `{k}` | {cell(MANIFEST_MEANING.get(k, 'not described yet'))} |" for k in manifest_keys()]
    lines.append("")
    return "\n".join(lines)


PAGES = {"reference/cli.md": cli_page, "reference/tasks.md": tasks_page, "reference/record.md": record_page,
         "reference/backends.md": backends_page, "reference/configs.md": configs_page}


def write_to(out: Path) -> None:
    for rel, make in PAGES.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(make() + "\n")


if __name__ == "__main__":  # python3 docs/scripts/gen_reference.py OUT_DIR
    write_to(Path(sys.argv[1]))
else:  # mkdocs-gen-files runs this file with runpy at every build
    import mkdocs_gen_files

    for rel, make in PAGES.items():
        with mkdocs_gen_files.open(rel, "w") as fh:
            fh.write(make() + "\n")
