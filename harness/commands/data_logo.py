"""`ctxbench data logo --config FILE [--out DIR]`: LOGO preference data (trainers/logo), added to the `data` group."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ctxbench.harness.cli_common import _data_dir, err, out, writable_dir
from ctxbench.harness.commands.data import data_app


def data_logo(
    config: Path = typer.Option(..., "--config", help="LOGO data YAML (see configs/data/logo-tiny.yaml)"),
    out_dir: Optional[str] = typer.Option(None, "--out", help="override out_dir"),
    data_dir: Optional[Path] = typer.Option(None, help="where hotpotqa/ lives; env CTXBENCH_DATA_DIR"),
    max_samples: Optional[int] = typer.Option(None, help="override max_samples"),
):
    """Chunk, score and split QA contexts, let the policy answer from relevant / irrelevant / mixed chunks, and write
    chosen + M rejected responses with synthetic position ids; rerunning resumes (generations are cached)."""
    from ctxbench.harness.backends.args import check_backend_args
    from ctxbench.harness.core.progress import progress
    from ctxbench.trainers.data.synthesis import get_synthesis
    from ctxbench.trainers.logo.data import load_config, synthesize

    get_synthesis("logo").require_extra(for_="ctxbench data logo")
    cfg = load_config(config, out_dir=out_dir, max_samples=max_samples,
                      data_dir=str(d) if (d := _data_dir(data_dir)) else None)
    writable_dir(Path(cfg.out_dir), "--out" if out_dir else "out_dir")
    check_backend_args(cfg.generator.backend, cfg.generator.backend_args, where="generator.")
    bar = progress(err)
    task = bar.add_task(f"logo -> {cfg.out_dir}", total=None)

    def advance(done: int, total: int) -> None:  # the bar starts with the generator: bad input fails first, as one line
        if not bar.live.is_started:
            bar.start()
        bar.update(task, completed=done, total=total)

    try:
        m = synthesize(cfg, progress=advance)
    finally:
        bar.stop()
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
