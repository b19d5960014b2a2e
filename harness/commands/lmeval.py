"""`ctxbench lmeval`: lm-evaluation-harness tasks (MMLU, ARC, ...) through our backends, stored as a normal run."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from ctxbench.harness.cli_common import _kv, err, greedy_gen_kwargs, lmeval_model, log_samples_note, out
from ctxbench.harness.core.errors import ConfigError


def _tasks(spec: str) -> list[str]:
    names = list(dict.fromkeys(t.strip().removeprefix("lmeval/") for t in spec.split(",") if t.strip()))
    if not names:
        raise ConfigError("--tasks: name at least one lm-eval task, e.g. mmlu,arc_easy")
    return names


def run_lmeval(*, model: str, tasks: list[str], out_dir: Path, backend: Any = "hf", backend_args: dict | None = None,
               task_args: dict | None = None, seed: int = 42, fresh: bool = False, label: str | None = None, console=None):
    """Run lm-eval tasks into a run directory (record.json, samples.jsonl, lmeval_results.json); returns the RunStore.

    Each name in `tasks` becomes the ctxbench task lmeval/<name> with `task_args` (LMEvalArgs), in a suite of
    short-context tasks (length 0) scored by the one run loop: same record, store, lock and resume as any run.
    `backend` is a registered name or a backend object (tests, notebooks).
    """
    from pydantic import ValidationError

    from ctxbench.harness.core import registry
    from ctxbench.harness.core.config import Suite, TaskSpec, one_line
    from ctxbench.harness.core.extras import require_extra
    from ctxbench.harness.run.runner import RunPlan, run

    require_extra("lmeval", for_="ctxbench lmeval")  # before the run directory exists

    known = set(registry.names("task"))
    task_args = {k: v for k, v in (task_args or {}).items() if v is not None}
    specs = [TaskSpec(task=f"lmeval/{n}", args=task_args) if f"lmeval/{n}" in known else
             TaskSpec(task="lmeval/custom", name=f"lmeval/{n}", args={**task_args, "tasks": [n]}) for n in tasks]
    try:
        suite = Suite(name="lmeval", seed=seed, lengths=[0], samples=1, tasks=specs)
    except ValidationError as e:
        raise ConfigError(one_line(e, "lmeval")) from None
    name = backend if isinstance(backend, str) else getattr(backend, "name", type(backend).__name__)
    plan = RunPlan(suite, model, name, dict(backend_args or {}), out_dir, label=label or "")
    outcome = run(plan, fresh=fresh, console=console, backend=None if isinstance(backend, str) else backend)
    return outcome.store


def summary_table(run_dir: Path, *, title: str):
    """lm-eval's aggregates of a run: every group and task, metric value and lm-eval's stderr (×100)."""
    from rich.table import Table

    from ctxbench.tasks.lmeval.results import read_aggregates

    t = Table(title=title)
    for col, just in (("task", "left"), ("metric", "left"), ("value", "right"), ("± stderr", "right"), ("n", "right")):
        t.add_column(col, justify=just)
    for _name, entry in sorted(read_aggregates(run_dir).get("tasks", {}).items()):
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
        model: Optional[str] = typer.Option(None, help="alias, local HF dir, .gguf file or hub id (default smollm2-135m)"),
        tasks: str = typer.Option(..., help="comma-separated lm-eval tasks, groups or tags, e.g. mmlu,arc_easy"),
        limit: Optional[float] = typer.Option(None, help="documents per lm-eval subtask (below 1: a fraction); default all"),
        num_fewshot: Optional[int] = typer.Option(None, "--num-fewshot", "--num_fewshot", help="few-shot examples; default: each task's own"),
        include_path: list[Path] = typer.Option([], "--include-path", "--include_path", help="directory of extra lm-eval task YAMLs (repeatable)"),
        builtin_tasks: bool = typer.Option(True, help="index lm-eval's builtin tasks (--no-builtin-tasks: only --include-path; faster)"),
        out_dir: Optional[Path] = typer.Option(None, "--store", help="results store directory (default runs)"),
        backend: Optional[str] = typer.Option(None, help="backend name (default hf; log-likelihood tasks need hf)"),
        backend_arg: list[str] = typer.Option([], "--backend-arg", help="KEY=VALUE passed to the backend (repeatable)"),
        batch_size: Optional[int] = typer.Option(None, "--batch-size", "--batch_size", help="inputs per forward pass (default: the backend's)"),
        apply_chat_template: bool = typer.Option(False, "--apply-chat-template", "--apply_chat_template",
                                                 help="let lm-eval apply the model's chat template (papers: off)"),
        metric: Optional[str] = typer.Option(None, help="per-sample metric stored as the score (default acc, else the task's first)"),
        seed: int = typer.Option(42, help="python, numpy, torch and few-shot seeds"),
        bootstrap_iters: int = typer.Option(100000, "--bootstrap-iters", "--bootstrap_iters", help="lm-eval's bootstrap resamples for stderrs (0 = none)"),
        label: Optional[str] = typer.Option(None, help="model name shown on the board (default: --model)"),
        fresh: bool = typer.Option(False, help="discard earlier results of this run and start over"),
        model_args: Optional[str] = typer.Option(None, "--model_args", "--model-args", help="lm-eval's K=V,K=V: pretrained= is "
                                                 "the model (then --model hf|vllm is the backend), the rest backend args"),
        output_path: Optional[Path] = typer.Option(None, "--output_path", "--output-path", help="lm-eval's spelling of --store"),
        gen_kwargs: Optional[str] = typer.Option(None, "--gen_kwargs", "--gen-kwargs", help="lm-eval's K=V,K=V for generative "
                                                 "tasks: max_gen_toks, until, and greedy settings (ctxbench decodes greedily)"),
        system_instruction: Optional[str] = typer.Option(None, "--system_instruction", "--system-instruction",
                                                         help="system prompt lm-eval prepends (lm-eval's meaning)"),
        log_samples: bool = typer.Option(False, "--log_samples", "--log-samples", help="accepted; every sample is logged anyway"),
    ):
        """Run lm-evaluation-harness tasks through a ctxbench backend; results go to the store beside long-context runs."""
        from ctxbench.harness.backends.args import check_backend_args

        choice = lmeval_model(model=model, backend=backend, store=out_dir, model_args=model_args, output_path=output_path)
        gen_kwargs = greedy_gen_kwargs(gen_kwargs, also=("max_gen_toks", "until"))
        if limit is not None and limit <= 0:
            raise ConfigError("--limit: must be positive")
        if num_fewshot is not None and num_fewshot < 0:
            raise ConfigError("--num_fewshot: must be 0 or more")
        for p in include_path:
            if not p.is_dir():
                raise ConfigError(f"--include-path: {p} is not a directory")
        if not builtin_tasks and not include_path:
            raise ConfigError("--no-builtin-tasks: give the tasks' directory with --include-path")
        args: dict[str, Any] = {"limit": limit, "num_fewshot": num_fewshot,
                                "include_path": [str(p.resolve()) for p in include_path] or None, "builtin_tasks": builtin_tasks,
                                "batch_size": batch_size, "apply_chat_template": apply_chat_template or None, "metric": metric,
                                "bootstrap_iters": bootstrap_iters, "gen_kwargs": gen_kwargs, "system_instruction": system_instruction}
        backend_args = _kv(backend_arg, "--backend-arg")
        for key, value in choice.backend_args.items():
            if backend_args.get(key, value) != value:
                raise ConfigError(f"--model_args: {key} is also given as --backend-arg {key}={backend_args[key]}; give it once")
            backend_args[key] = value
        check_backend_args(choice.backend, backend_args)  # a bad key, or --backend-arg device=cuda without CUDA: one line
        log_samples_note(log_samples)
        store = run_lmeval(model=choice.model, tasks=_tasks(tasks), out_dir=choice.store, backend=choice.backend,
                           backend_args=backend_args, task_args=args, seed=seed, fresh=fresh, label=label, console=err)
        out.print(summary_table(store.dir, title=f"{label or choice.model}: lm-eval (×100, lm-eval's stderr)"))
        out.print(f"results: {store.dir}")
