"""`ctxbench data logo --config FILE [--out DIR]`: LOGO preference data (trainers/logo), added to the `data` group."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ctxbench.harness.cli_common import _data_dir, err, out
from ctxbench.harness.commands.data import data_app


def data_logo(
    config: Path = typer.Option(..., "--config", help="LOGO data YAML (see configs/data/logo-tiny.yaml)"),
    out_dir: Optional[str] = typer.Option(None, "--out", help="override out_dir"),
    data_dir: Optional[Path] = typer.Option(None, help="where hotpotqa/ lives; env CTXBENCH_DATA_DIR"),
    max_samples: Optional[int] = typer.Option(None, help="override max_samples"),
):
    """Chunk, score and split QA contexts, let the policy answer from relevant / irrelevant / mixed chunks, and write
    chosen + M rejected responses with synthetic position ids; rerunning resumes (generations are cached)."""
    from ctxbench.harness.core.progress import progress
    from ctxbench.trainers.logo.data import load_config, synthesize

    cfg = load_config(config, out_dir=out_dir, max_samples=max_samples,
                      data_dir=str(d) if (d := _data_dir(data_dir)) else None)
    with progress(err) as bar:
        task = bar.add_task(f"logo -> {cfg.out_dir}", total=None)
        m = synthesize(cfg, progress=lambda done, total: bar.update(task, completed=done, total=total))
    if m.get("reused"):
        out.print(f"already built with the same inputs: {cfg.out_dir}", highlight=False)
    drops = ", ".join(f"{k} {v}" for k, v in sorted(m.get("drops", {}).items())) or "none"
    out.print(f"logo: {m['samples']} of {m['input_samples']} samples x {m['responses_per_sample']} responses, "
              f"{m['real_tokens']:,} real tokens (longest {m['max_real_length']}) spread over K={m['target_window']} "
              f"in {len(m['shards'])} shards at {cfg.out_dir}", highlight=False)
    out.print(f"dropped: {drops}; positions: {m['modes']['continuous']} continuous, {m['modes']['sparse']} sparse; "
              f"generator calls: {m['calls']['generated']} new, {m['calls']['cached']} cached ({m['generator']['decoding']})",
              highlight=False)


def register(app: typer.Typer) -> None:
    data_app.command("logo")(data_logo)
