"""`ctxbench tasks`, `ctxbench backends` and `ctxbench suites`: what can be scored and with what, one line each; one
task's or backend's arguments in full. Everything comes from what the entries declared when they registered (plugins'
included: harness/core/registry.py TRAITS).

A listing never fails on one entry: a plugin task that needs arguments is listed with them, one whose factory fails
says so in one line.
"""

from __future__ import annotations

import json
from typing import Optional

import typer

from ctxbench.harness.cli_common import out
from ctxbench.harness.core.errors import ConfigError


def list_tasks(
    pattern: Optional[str] = typer.Argument(None, help="glob over task names, e.g. 'ruler/*'; one exact name also "
                                            "lists its arguments (for --arg KEY=VALUE and a suite's args:)"),
):
    """List registered tasks, one line each: category, what it measures, and the data it needs."""
    import fnmatch

    from ctxbench.harness.core import registry

    rows = [(name, factory) for name, factory in registry.entries("task").items()
            if not pattern or fnmatch.fnmatch(name, pattern)]
    if not rows:
        raise ConfigError(f"tasks: {pattern!r} matches no registered task; run `ctxbench tasks` to list them all")
    width = max((len(n) for n, _ in rows), default=0)
    for name, factory in rows:
        out.print(f"{name:<{width}}  {_task_line(name, factory)}", highlight=False, soft_wrap=True, markup=False)
    if len(rows) == 1 and rows[0][0] == pattern:
        _print_task_args(pattern, rows[0][1])


def _task_line(name: str, factory) -> str:
    """What a task measures and the data it needs; a task that needs arguments (a plugin's) says which, and one whose
    factory fails says so in one line (a listing never fails on one entry)."""
    from pydantic import ValidationError

    try:
        task = factory()
    except ValidationError as e:
        required = [str(err["loc"][0]) for err in e.errors() if err["type"] == "missing" and err["loc"]]
        if not required:
            return f"cannot be built with its default arguments: {str(e).splitlines()[0]}"
        return (f"needs argument{'s' if len(required) > 1 else ''} {', '.join(required)} (a suite's args:); "
                f"see `ctxbench tasks {name}`")
    except Exception as e:  # noqa: BLE001 - a plugin's factory may fail any way
        return f"cannot be built: {e.__class__.__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return f"({task.category}) {task.describe()}; data: {task.data_needs()}"


def _print_task_args(name: str, factory) -> None:
    """A task's arguments: name, type, value in this task (a preset's own, else the default; `(required)` where it has
    none) and what it does."""
    from ctxbench.harness.core import registry

    model = registry.task_traits(name).args
    if model is None:
        out.print("\narguments: this task declares no Args model (register(\"task\", NAME, args=Model) lists them)",
                  highlight=False, markup=False)
        return
    try:
        values = factory().args_json()
    except Exception:  # noqa: BLE001 - needs arguments (listed as required) or cannot be built (said above)
        values = {}
    out.print(f"\narguments (a suite's args:, or generate --arg KEY=VALUE), {len(model.model_fields)}:", highlight=False)
    _print_fields(model, values)


def _print_fields(model, values: dict, execution: frozenset[str] = frozenset()) -> None:
    """A pydantic model's fields as a table: name, type, value (`values`' own, else the default; `(required)` where it
    has none) and the field's description (`execution`'s marked speed only)."""
    import re

    table = [("argument", "type", "value", "what it does")]
    for name, field in model.model_fields.items():
        kind = field.annotation.__name__ if isinstance(field.annotation, type) else str(field.annotation)
        value = "(required)" if name not in values and field.is_required() else json.dumps(
            values[name] if name in values else field.get_default(call_default_factory=True), ensure_ascii=False)
        value = value if len(value) <= 40 else value[:38] + "…" + value[-1]  # templates: the full text in `generate`
        what = ("(speed only) " if name in execution else "") + (field.description or "")
        table.append((name, re.sub(r"\btyping\.|\bpathlib\.", "", kind), value, what))
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    for row in table:
        out.print("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[3],
                  highlight=False, soft_wrap=True, markup=False)


def list_backends(
    name: Optional[str] = typer.Argument(None, help="one backend: also list its arguments (--backend-arg KEY=VALUE), "
                                         "their defaults and what each does"),
):
    """List registered backends (plugins' included), one line each: whether it samples with --gen-kwargs, its
    execution-only arguments, and where it comes from."""
    from ctxbench.harness.core import registry

    names = [name] if name else registry.names("backend")
    if name:
        registry.backend_traits(name, field="backends")  # an unknown name: one line, with the closest
    width = max(len(n) for n in names)
    for n in names:
        out.print(f"{n:<{width}}  {_backend_line(n)}", highlight=False, soft_wrap=True, markup=False)
    if name:
        traits = registry.backend_traits(name)
        args = traits.args
        if args is None:
            out.print("\narguments: this backend declares no Args model; it checks its own when it is built",
                      highlight=False, markup=False)
            return
        out.print(f"\narguments (--backend-arg KEY=VALUE), {len(args.model_fields)}:", highlight=False)
        _print_fields(args, {}, traits.execution)


def _backend_line(name: str) -> str:
    """What a backend declared: sampling, its argument count and the execution-only ones (speed, not results)."""
    from ctxbench.harness.core import registry

    traits, origin = registry.backend_traits(name), registry.origin("backend", name)
    parts = ["samples with --gen-kwargs" if traits.samples else "greedy only"]
    if traits.args is None:
        parts.append("arguments checked when built")
    else:
        execution = sorted(traits.execution & set(traits.args.model_fields))
        parts.append(f"{len(traits.args.model_fields)} arguments" +
                     (f" (speed only: {', '.join(execution)})" if execution else ""))
    if traits.args is not None and "model_type" in traits.args.model_fields:
        parts.append(f"{name}:<model_type> picks the type")
    if traits.distributions:
        parts.append(f"records {', '.join(traits.distributions)} versions")
    if traits.model_free:
        parts.append(f"model-free (answers without the model: its runs are {name}(<model>) on a board)")
    if traits.batch_dependent:
        parts.append("greedy outputs can depend on which prompts share a batch")
    if not traits.thinking:
        parts.append("no --thinking")
    if origin is not None:
        parts.append(f"plugin {origin.distribution}" + (f" {origin.version}" if origin.version else ""))
    return "; ".join(parts)


def list_suites():
    """List the shipped suites, one line each (pass a name or your own YAML path to --suite)."""
    from ctxbench.harness.core.config import shipped_suites

    for name, description in shipped_suites().items():
        out.print(f"[bold]{name}[/bold]  {description}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("tasks")(list_tasks)
    app.command("backends")(list_backends)
    app.command("suites")(list_suites)
