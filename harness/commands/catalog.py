"""`ctxbench tasks` and `ctxbench suites`: what can be scored, one line each; one task's arguments in full.

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
        _print_task_args(rows[0][1])


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


def _print_task_args(factory) -> None:
    """A task's arguments: name, type, value in this task (a preset's own, else the default; `(required)` where it has
    none) and what it does."""
    import re

    from ctxbench.harness.core.config import task_args_model

    model = task_args_model(factory)
    if model is None:
        return
    fields = model.model_fields
    try:
        values = factory().args_json()
    except Exception:  # noqa: BLE001 - needs arguments (listed as required) or cannot be built (said above)
        values = {}
    table = [("argument", "type", "value", "what it does")]
    for name, field in fields.items():
        kind = field.annotation.__name__ if isinstance(field.annotation, type) else str(field.annotation)
        value = "(required)" if name not in values and field.is_required() else json.dumps(
            values[name] if name in values else field.get_default(call_default_factory=True), ensure_ascii=False)
        value = value if len(value) <= 40 else value[:38] + "…" + value[-1]  # templates: the full text in `generate`
        table.append((name, re.sub(r"\btyping\.|\bpathlib\.", "", kind), value, field.description or ""))
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    out.print(f"\narguments (a suite's args:, or generate --arg KEY=VALUE), {len(fields)}:", highlight=False)
    for row in table:
        out.print("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[3],
                  highlight=False, soft_wrap=True, markup=False)


def list_suites():
    """List the shipped suites, one line each (pass a name or your own YAML path to --suite)."""
    from ctxbench.harness.core.config import shipped_suites

    for name, description in shipped_suites().items():
        out.print(f"[bold]{name}[/bold]  {description}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("tasks")(list_tasks)
    app.command("suites")(list_suites)
