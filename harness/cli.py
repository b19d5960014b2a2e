"""The `ctxbench` command line. User errors print one line and exit non-zero, with no traceback."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

import typer

from harness.cli_common import _data_dir, _ints, _kv, err, out
from harness.errors import ConfigError, CtxbenchError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Measure how much of its context a language model can really use.")


@app.command()
def score(
    model: str = typer.Option("smollm2-135m", help="alias, local HF dir, .gguf file or hub id"),
    suite: str = typer.Option("ruler-quick", help="suite name under configs/suites/ or a YAML path"),
    lengths: Optional[str] = typer.Option(None, help="override the suite's lengths, e.g. 1024,2048"),
    samples: Optional[int] = typer.Option(None, help="override samples per task and length"),
    tasks: Optional[str] = typer.Option(None, help="comma-separated task names or globs to keep, e.g. 'ruler/niah*'"),
    out_dir: Path = typer.Option(Path("runs"), "--out", help="results store directory"),
    backend: str = typer.Option("hf", help="backend name: hf, echo, ..."),
    backend_arg: list[str] = typer.Option([], "--backend-arg", help="KEY=VALUE passed to the backend (repeatable)"),
    template: Optional[str] = typer.Option(None, help="auto, chat, or a plain template for base models"),
    truncation: Optional[str] = typer.Option(None, help="refuse (default) or middle"),
    seed: Optional[int] = typer.Option(None, help="override the suite's seed"),
    data_dir: Optional[Path] = typer.Option(None, help="local data (pg_essays/, squad/, hotpotqa/); env CTXBENCH_DATA_DIR"),
    fresh: bool = typer.Option(False, help="discard earlier results of this run and start over"),
    label: Optional[str] = typer.Option(None, help="display name on leaderboards (default: the model)"),
    rope_scaling: Optional[str] = typer.Option(None, help="zero-shot context extension TYPE:FACTOR (linear, dynamic, yarn, llama3)"),
    shard: Optional[str] = typer.Option(None, help="score part i of n (e.g. 0/4); parts share one run directory"),
):
    """Score a model on a suite; rerunning the same command resumes."""
    from harness.config import load_suite, select_tasks
    from harness.runner import RunPlan, run
    from harness.summary import table

    if samples is not None and samples < 1:
        raise ConfigError("--samples: must be at least 1")
    s = load_suite(suite, lengths=_ints(lengths, "--lengths"), samples=samples, template=template, truncation=truncation, seed=seed)
    s = select_tasks(s, tasks)
    args = _kv(backend_arg, "--backend-arg")
    if rope_scaling:
        from harness.backends.rope import parse_rope_scaling

        parse_rope_scaling(rope_scaling, field="--rope-scaling")  # fail early, with one line
        args["rope_scaling"] = rope_scaling
    plan = RunPlan(s, model, backend, args, out_dir, _data_dir(data_dir), label or "", _shard(shard))
    store = run(plan, fresh=fresh, console=err)
    out.print(table(store, title=f"{model} on {s.name} (score ×100)"))
    out.print(f"results: {store.dir}")


def _shard(spec: Optional[str]) -> tuple[int, int]:
    if not spec:
        return (0, 1)
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise ConfigError(f"--shard: expected i/n like 0/4, got {spec!r}") from None
    if not 0 <= i < n:
        raise ConfigError(f"--shard: need 0 <= i < n, got {spec!r}")
    return (i, n)


@app.command()
def generate(
    task: str = typer.Option(..., help="registered task, e.g. ruler/niah_single_2"),
    length: int = typer.Option(..., help="target length in tokens (prompt + generation)"),
    samples: int = typer.Option(5, help="number of samples"),
    tokenizer: str = typer.Option("smollm2-135m", help="alias, local dir, .gguf or hub id"),
    out_file: Path = typer.Option(..., "--out", help="output .jsonl"),
    seed: int = typer.Option(42),
    arg: list[str] = typer.Option([], "--arg", help="task argument KEY=VALUE (repeatable)"),
    template: str = typer.Option("auto"),
    data_dir: Optional[Path] = typer.Option(None, help="local data dir; env CTXBENCH_DATA_DIR"),
    verify: str = typer.Option("full", help="full: tokenize every prompt; first: only the first, then trust exact piece counts"),
):
    """Write a task's samples as JSON lines (the exact prompts a model would see)."""
    from harness import datasets
    from harness.config import TaskSpec, build_task
    from harness.models import load_tokenizer
    from harness.prompting import PromptRenderer
    from tasks.base import GenContext

    if length < 64 or samples < 1:
        raise ConfigError("--length must be >= 64 and --samples >= 1")
    t = build_task(TaskSpec(task=task, args=_kv(arg, "--arg")), where="--task")
    tok = load_tokenizer(tokenizer)
    if verify not in ("full", "first"):
        raise ConfigError("--verify: use full or first")
    ctx = GenContext(tok, PromptRenderer(tok, template), data_dir=_data_dir(data_dir), verify=verify)
    rows = datasets.generate(t, length=length, indices=range(samples), seed=seed, ctx=ctx)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_file.with_name(out_file.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for s in rows:
            f.write(json.dumps(s.to_json(), ensure_ascii=False) + "\n")
    os.replace(tmp, out_file)
    err.print(f"wrote {len(rows)} samples to {out_file}")


@app.command("tasks")
def list_tasks():
    """List registered tasks."""
    from harness import registry

    for name in registry.names("task"):
        out.print(name)


def _load_commands() -> None:
    """Each module in harness/commands/ adds its commands with register(app, helpers)."""
    import importlib
    import pkgutil

    import harness.commands as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        importlib.import_module(f"harness.commands.{info.name}").register(app)


_load_commands()


def main() -> None:
    try:
        app(standalone_mode=False)
    except CtxbenchError as e:
        err.print(f"[red]error:[/red] {e}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted; rerun the same command to resume")
        sys.exit(130)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except Exception as e:  # click usage errors
        import click

        if isinstance(e, click.exceptions.ClickException):
            e.show()
            sys.exit(e.exit_code)
        if isinstance(e, click.exceptions.Abort):
            sys.exit(1)
        raise


if __name__ == "__main__":
    main()
