"""`ctxbench data hqa --config FILE [--out DIR]`: hierarchical-QA long conversations (trainers/hqa)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ctxbench.harness.cli_common import _data_dir, err, out, writable_dir
from ctxbench.harness.commands.data import data_app


def data_hqa(
    config: Path = typer.Option(..., "--config", help="hqa data YAML (see configs/data/hqa-*.yaml)"),
    out_dir: Optional[str] = typer.Option(None, "--out", help="override out_dir"),
    data_dir: Optional[Path] = typer.Option(None, help="where relative document paths are looked up; env CTXBENCH_DATA_DIR"),
):
    """Split, summarize and question long documents with a generator model, then concatenate them into long
    conversations (JSONL shards + manifest.json); rerunning repeats no finished generator call."""
    from ctxbench.harness.core.progress import progress
    from ctxbench.trainers.data.synthesis import get_synthesis
    from ctxbench.trainers.hqa.data import load_data_config, synthesize

    get_synthesis("hqa").require_extra(for_="ctxbench data hqa")
    cfg = load_data_config(config, out_dir=out_dir)
    writable_dir(Path(cfg.out_dir), "--out" if out_dir else "out_dir")
    bar = progress(err, unit="calls")
    job = bar.add_task(f"hqa -> {cfg.out_dir} (generator calls)", total=None)

    def advance(n: int) -> None:  # the bar starts with the first call: bad input fails first, as one line
        if not bar.live.is_started:
            bar.start()
        bar.advance(job, n)

    try:
        m = synthesize(cfg, data_dir=_data_dir(data_dir), on_calls=advance)
    finally:
        bar.stop()
    c = m["counts"]
    out.print(f"{m['samples']} conversations, {c['tokens']['total']:,} tokens ({c['tokens']['answer']:,} answer tokens, "
              f"longest {c['tokens']['max']:,}) from {c['documents_used']} documents in {cfg.out_dir}", highlight=False)
    g = c["generator"]
    asked = sum(c["qas_requested"].values())
    dropped = sum(v for k, v in m["drops"].items() if k.startswith(("hierarchical:", "diverse:")))
    out.print(f"generator: {g['calls']} calls, {g['prompt_tokens']:,} prompt + {g['generated_tokens']:,} generated tokens; "
              f"QAs dropped {dropped}/{asked} ({dropped / max(asked, 1):.0%})", highlight=False)
    if m["drops"]:
        out.print("drops: " + ", ".join(f"{k} {v}" for k, v in m["drops"].items()), highlight=False)


def register(app: typer.Typer) -> None:
    data_app.command("hqa")(data_hqa)
