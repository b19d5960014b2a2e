"""`ctxbench export lm-eval DIR`: our long-context tasks as lm-evaluation-harness tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ctxbench.harness.cli_common import _ints, out
from ctxbench.harness.core.errors import ConfigError

export_app = typer.Typer(help="Export tasks for other harnesses.")


@export_app.command("lm-eval")
def export_lm_eval_cmd(
    out_dir: Path = typer.Argument(..., help="directory to write the task YAMLs into (pass it to lm_eval --include_path)"),
    suite: str = typer.Option("ruler-quick", help="shipped suite name (see `ctxbench suites`) or a YAML path"),
    tasks: Optional[str] = typer.Option(None, help="comma-separated task names or globs to keep, e.g. 'ruler/niah*'"),
    lengths: Optional[str] = typer.Option(None, help="override the suite's lengths, e.g. 4k,8k"),
    samples: Optional[int] = typer.Option(None, help="override samples per task and length"),
    seed: Optional[int] = typer.Option(None, help="override the suite's seed"),
    template: Optional[str] = typer.Option(None, help="auto, chat, or a plain template (default: the suite's)"),
    tokenizer: Optional[str] = typer.Option(None, help="default tokenizer (alias, dir, hub id) if lm_eval's model_args name none"),
    data_dir: Optional[Path] = typer.Option(None, help="default data dir (pg_essays/, squad/, hotpotqa/); env CTXBENCH_DATA_DIR wins"),
):
    """Write lm-eval task YAMLs, one per (task, length), that generate and score with ctxbench."""
    from ctxbench.harness.core.config import load_suite, select_tasks
    from ctxbench.harness.lmeval_export import export_lm_eval

    if samples is not None and samples < 1:
        raise ConfigError("--samples: must be at least 1")
    if data_dir is not None and not data_dir.is_dir():
        raise ConfigError(f"--data-dir: {data_dir} is not a directory")
    s = load_suite(suite, lengths=_ints(lengths, "--lengths"), samples=samples, seed=seed, template=template)
    s = select_tasks(s, tasks)
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"export: {out_dir} exists and is not a directory")
    done = export_lm_eval(out_dir, s, tokenizer=tokenizer, data_dir=str(data_dir.resolve()) if data_dir else None)
    out.print(f"wrote {len(done.tasks)} lm-eval tasks and {len(done.groups)} groups to {out_dir}")
    out.print(f"run: lm_eval --model hf --model_args pretrained=<model dir> --include_path {out_dir} --tasks {done.groups[0]}")


def register(app: typer.Typer) -> None:
    app.add_typer(export_app, name="export")
