"""The `ctxbench` command line. User errors print one line and exit non-zero, with no traceback."""

from __future__ import annotations

import fnmatch
import json
import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from harness.errors import ConfigError, CtxbenchError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Measure how much of its context a language model can really use.")
err = Console(stderr=True)
out = Console()


def parse_length(text: str) -> int:
    """1024, 4k/4K (=4096), 1m/1M (=1048576)."""
    t = text.strip().lower()
    mult = {"k": 1024, "m": 1024 * 1024}.get(t[-1:], 1)
    return int(t[:-1] if mult > 1 else t) * mult


def _ints(value: Optional[str], field: str) -> Optional[list[int]]:
    if not value:
        return None
    try:
        return [parse_length(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{field}: expected comma-separated lengths like 1024,2048 or 4k,8k, got {value!r}") from None


def _kv(items: list[str], field: str) -> dict:
    outd = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"{field}: expected KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        try:
            outd[k.strip()] = json.loads(v)
        except json.JSONDecodeError:
            outd[k.strip()] = v
    return outd


def _data_dir(value: Optional[Path]) -> Optional[Path]:
    value = value or (Path(os.environ["CTXBENCH_DATA_DIR"]) if os.environ.get("CTXBENCH_DATA_DIR") else None)
    if value is not None and not value.is_dir():
        raise ConfigError(f"--data-dir: {value} is not a directory")
    return value


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
):
    """Score a model on a suite; rerunning the same command resumes."""
    from harness.config import load_suite
    from harness.runner import RunPlan, run
    from harness.summary import table

    if samples is not None and samples < 1:
        raise ConfigError("--samples: must be at least 1")
    s = load_suite(suite, lengths=_ints(lengths, "--lengths"), samples=samples, template=template, truncation=truncation, seed=seed)
    if tasks:
        pats = [p.strip() for p in tasks.split(",") if p.strip()]
        keep = [t for t in s.tasks if any(fnmatch.fnmatch(t.display, p) or fnmatch.fnmatch(t.task, p) for p in pats)]
        if not keep:
            raise ConfigError(f"--tasks: {tasks!r} matches no task of suite {s.name}; it has {', '.join(t.display for t in s.tasks)}")
        s = s.model_copy(update={"tasks": keep})
    plan = RunPlan(s, model, backend, _kv(backend_arg, "--backend-arg"), out_dir, _data_dir(data_dir))
    store = run(plan, fresh=fresh, console=err)
    out.print(table(store, title=f"{model} on {s.name} (score ×100)"))
    out.print(f"results: {store.dir}")


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


board_app = typer.Typer(help="Leaderboards from the results store: tables, curves, heatmaps.", no_args_is_help=True)
app.add_typer(board_app, name="board")


@board_app.command("build")
def board_build(
    runs_dir: Path = typer.Option(Path("runs"), "--store", help="results store directory"),
    runs: Optional[str] = typer.Option(None, help="comma-separated run ids (default: every run in the store)"),
    out_dir: Path = typer.Option(Path("board"), "--out", help="where to write leaderboard.md, index.html, results.csv/json"),
    threshold: str = typer.Option("85.6", help="effective-length threshold: a score, or 'model=NAME@4096'"),
    compare: list[str] = typer.Option([], help="paired comparison 'MODEL_A:MODEL_B' (repeatable)"),
    title: str = typer.Option("ctxbench leaderboard"),
):
    """Build the leaderboard report from runs (and imported published results)."""
    import pandas as pd

    from harness.board import examples, reported_frame, runs_frame
    from leaderboard import build_report

    measured = runs_frame(runs_dir, [r for r in runs.split(",") if r] if runs else None)
    df = pd.concat([x for x in (measured, reported_frame(runs_dir)) if not x.empty], ignore_index=True) if not (
        measured.empty and reported_frame(runs_dir).empty) else measured
    if df.empty:
        raise ConfigError(f"board build: no scored runs in {runs_dir}; run `ctxbench score` first or `ctxbench board import`")
    pairs = []
    for c in compare:
        if ":" not in c:
            raise ConfigError(f"--compare: expected MODEL_A:MODEL_B, got {c!r}")
        pairs.append(tuple(c.split(":", 1)))
    thr: float | str = float(threshold) if threshold.replace(".", "", 1).isdigit() else threshold
    try:
        report = build_report(df, out_dir=out_dir, threshold=thr, title=title, comparisons=pairs, examples=examples(measured))
    except (ValueError, KeyError) as e:
        raise ConfigError(f"board build: {e}") from None
    out.print(f"wrote {report.markdown}, {report.html}, {report.csv}, {report.json}")


@board_app.command("import")
def board_import(
    csv: Path = typer.Argument(..., help="CSV with columns model, task (or avg), length, score[, claimed_length]"),
    runs_dir: Path = typer.Option(Path("runs"), "--store", help="results store directory"),
):
    """Add published results (marked 'reported') so they sit in the same table as measured runs."""
    from harness.board import import_reported

    n = import_reported(runs_dir, csv)
    out.print(f"imported {n} reported rows from {csv}")


@app.command("tasks")
def list_tasks():
    """List registered tasks."""
    from harness import registry

    for name in registry.names("task"):
        out.print(name)


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
