"""`ctxbench data logo --config FILE [--out DIR]`: LOGO preference data (trainers/logo), a spelling of
`data pack --method logo` (one code path, harness/commands/data.py), and how either shows a LOGO run."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from ctxbench.harness.cli_common import _data_dir, out
from ctxbench.harness.commands.data import LazyBar, MethodView, add_method_view, data_app, run_method


def data_logo(
    config: Path = typer.Option(..., "--config", help="LOGO data YAML (see configs/data/logo-tiny.yaml)"),
    out_dir: Optional[str] = typer.Option(None, "--out", help="override out_dir"),
    data_dir: Optional[Path] = typer.Option(None, help="where hotpotqa/ lives; env CTXBENCH_DATA_DIR"),
    max_samples: Optional[int] = typer.Option(None, help="override max_samples"),
):
    """Chunk, score and split QA contexts, let the policy answer from relevant / irrelevant / mixed chunks, and write
    chosen + M rejected responses with synthetic position ids; rerunning resumes (generations are cached). Same as
    `data pack --method logo`."""
    d = _data_dir(data_dir)
    run_method("logo", config, command="ctxbench data logo",
               overrides={"out_dir": out_dir, "max_samples": max_samples, "data_dir": str(d) if d else None})


def _progress(bar: LazyBar) -> dict[str, Any]:
    return {"progress": bar.update}  # the bar starts with the generator: bad input fails first, as one line


def _report(m: dict[str, Any], cfg: Any) -> None:
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
    add_method_view("logo", MethodView(_progress, _report))
    data_app.command("logo")(data_logo)
