"""`ctxbench lmeval`: lm-evaluation-harness tasks (MMLU, ARC, ...) through our backends, stored as a normal run."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from harness.cli_common import _kv, err, out
from harness.errors import ConfigError


def _tasks(spec: str) -> list[str]:
    names = list(dict.fromkeys(t.strip().removeprefix("lmeval/") for t in spec.split(",") if t.strip()))
    if not names:
        raise ConfigError("--tasks: name at least one lm-eval task, e.g. mmlu,arc_easy")
    return names


def run_lmeval(*, model: str, tasks: list[str], out_dir: Path, backend: Any = "hf", backend_args: dict | None = None,
               task_args: dict | None = None, seed: int = 42, fresh: bool = False, label: str | None = None, console=None):
    """Run lm-eval tasks into a run directory (record.json, samples.jsonl, lmeval_results.json); returns the RunStore.

    Each name in `tasks` becomes the ctxbench task lmeval/<name> with `task_args` (LMEvalArgs). A rerun skips the
    tasks whose aggregates the run already has, unless fresh.
    """
    from pydantic import ValidationError

    from harness import registry
    from harness.config import one_line
    from harness.lmeval_adapter import completed, write_aggregates
    from harness.models import tokenizer_fingerprint
    from harness.runner import versions
    from harness.store import RunStore
    from harness.types import RunRecord
    from tasks.lmeval import LMEvalArgs, LMEvalTask

    backend_args = dict(backend_args or {})
    task_args = {k: v for k, v in (task_args or {}).items() if v is not None}
    try:
        objs = [LMEvalTask(f"lmeval/{n}", LMEvalArgs(**task_args)) for n in tasks]
    except ValidationError as e:
        raise ConfigError(one_line(e, "lmeval")) from None
    suite_config = {"name": "lmeval", "seed": seed, "lengths": [0], "template": "lm-eval",
                    "tasks": [{"task": t.name, "args": t.args_json()} for t in objs]}
    blob = json.dumps({"suite": suite_config, "model": model, "backend": backend if isinstance(backend, str) else getattr(backend, "name", "?"),
                       "args": backend_args}, sort_keys=True)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(model).name or model)[:40]
    run_id = f"{slug}-lmeval-{hashlib.sha256(blob.encode()).hexdigest()[:8]}"
    store = RunStore(out_dir, run_id)
    if fresh:
        store.reset()
    todo = [t for t in objs if t.name not in completed(store.dir)]
    if not todo:
        if console is not None:
            console.print(f"{run_id}: every task is done already (use --fresh to run again)")
        return store
    if isinstance(backend, str):
        be = registry.get("backend", backend, field="--backend")(model=model, **backend_args)
    else:  # a backend object (tests, notebooks)
        be, backend = backend, getattr(backend, "name", type(backend).__name__)
    record = RunRecord(
        run_id=run_id, created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), suite="lmeval",
        suite_config=suite_config, model=model, backend=backend, backend_args={**backend_args, **be.info()},
        tokenizer=str(getattr(be.tokenizer, "name_or_path", "")), tokenizer_fingerprint=tokenizer_fingerprint(be.tokenizer),
        template="lm-eval", seed=seed, truncation=getattr(be, "truncation", "refuse"),
        versions={**versions(), **_lm_eval_version()}, command=sys.argv, label=label or model,
    )
    store.write_record(record)
    store.open_for_append()
    for t in todo:
        rows = t.run_external(backend=be, renderer=None, limit=None, seed=seed, console=console)
        store.append(rows)
        write_aggregates(store.dir, t.last_results, t.name)
    return store


def _lm_eval_version() -> dict[str, str]:
    from importlib import metadata

    try:
        return {"lm_eval": metadata.version("lm_eval")}
    except metadata.PackageNotFoundError:
        return {}


def summary_table(run_dir: Path, *, title: str):
    """lm-eval's aggregates of a run: every group and task, metric value and lm-eval's stderr (×100)."""
    from rich.table import Table

    from harness.lmeval_adapter import read_aggregates

    t = Table(title=title)
    for col, just in (("task", "left"), ("metric", "left"), ("value", "right"), ("± stderr", "right"), ("n", "right")):
        t.add_column(col, justify=just)
    for name, entry in sorted(read_aggregates(run_dir).get("tasks", {}).items()):
        n_samples = entry.get("n_samples") or {}
        items = [(g, e, True) for g, e in entry.get("groups", {}).items()] + [(k, e, False) for k, e in entry.get("tasks", {}).items()]
        items.sort(key=lambda x: (not x[2], x[0]))
        for key, e, is_group in items:
            for metric, v in (e.get("metrics") or {}).items():
                if not isinstance(v.get("value"), (int, float)):
                    continue
                se = v.get("stderr")
                n = (n_samples.get(key) or {}).get("effective", "") if isinstance(n_samples.get(key), dict) else ""
                t.add_row(("[b]" + key + "[/b]") if is_group else key, metric.replace(",none", ""), f"{100 * v['value']:.1f}"
                          if "perplexity" not in metric else f"{v['value']:.3f}",
                          f"{100 * se:.1f}" if isinstance(se, (int, float)) and "perplexity" not in metric else "", str(n))
        cats = entry.get("mmlu_categories") or {}
        if cats:
            t.add_section()
            for cat, c in sorted(cats.items()):
                v = c.get("acc,none") or {}
                if isinstance(v.get("value"), (int, float)):
                    se = v.get("stderr")
                    t.add_row(f"MMLU {cat}", "acc", f"{100 * v['value']:.1f}", f"{100 * se:.1f}" if isinstance(se, (int, float)) else "", "")
    return t


def register(app: typer.Typer) -> None:
    @app.command("lmeval")
    def lmeval(
        model: str = typer.Option("smollm2-135m", help="alias, local HF dir, .gguf file or hub id"),
        tasks: str = typer.Option(..., help="comma-separated lm-eval tasks, groups or tags, e.g. mmlu,arc_easy"),
        limit: Optional[float] = typer.Option(None, help="documents per lm-eval subtask (below 1: a fraction); default all"),
        num_fewshot: Optional[int] = typer.Option(None, help="few-shot examples; default: each task's own"),
        include_path: list[Path] = typer.Option([], help="directory of extra lm-eval task YAMLs (repeatable)"),
        builtin_tasks: bool = typer.Option(True, help="index lm-eval's builtin tasks (--no-builtin-tasks: only --include-path; faster)"),
        out_dir: Path = typer.Option(Path("runs"), "--out", help="results store directory"),
        backend: str = typer.Option("hf", help="backend name (log-likelihood tasks need hf)"),
        backend_arg: list[str] = typer.Option([], "--backend-arg", help="KEY=VALUE passed to the backend (repeatable)"),
        batch_size: Optional[int] = typer.Option(None, help="inputs per forward pass (default: the backend's)"),
        apply_chat_template: bool = typer.Option(False, help="let lm-eval apply the model's chat template (papers: off)"),
        metric: Optional[str] = typer.Option(None, help="per-sample metric stored as the score (default acc, else the task's first)"),
        seed: int = typer.Option(42, help="python, numpy, torch and few-shot seeds"),
        bootstrap_iters: int = typer.Option(100000, help="lm-eval's bootstrap resamples for stderrs (0 = none)"),
        label: Optional[str] = typer.Option(None, help="model name shown on the board (default: --model)"),
        fresh: bool = typer.Option(False, help="discard earlier results of this run and start over"),
    ):
        """Run lm-evaluation-harness tasks through a ctxbench backend; results go to the store beside long-context runs."""
        if limit is not None and limit <= 0:
            raise ConfigError("--limit: must be positive")
        if num_fewshot is not None and num_fewshot < 0:
            raise ConfigError("--num-fewshot: must be 0 or more")
        for p in include_path:
            if not p.is_dir():
                raise ConfigError(f"--include-path: {p} is not a directory")
        if not builtin_tasks and not include_path:
            raise ConfigError("--no-builtin-tasks: give the tasks' directory with --include-path")
        args: dict[str, Any] = {"limit": limit, "num_fewshot": num_fewshot,
                                "include_path": [str(p.resolve()) for p in include_path] or None, "builtin_tasks": builtin_tasks,
                                "batch_size": batch_size, "apply_chat_template": apply_chat_template or None, "metric": metric,
                                "bootstrap_iters": bootstrap_iters}
        store = run_lmeval(model=model, tasks=_tasks(tasks), out_dir=out_dir, backend=backend,
                           backend_args=_kv(backend_arg, "--backend-arg"), task_args=args, seed=seed, fresh=fresh,
                           label=label, console=err)
        out.print(summary_table(store.dir, title=f"{label or model}: lm-eval (×100, lm-eval's stderr)"))
        out.print(f"results: {store.dir}")
