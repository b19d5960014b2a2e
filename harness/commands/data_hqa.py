"""`ctxbench data hqa --config FILE [--out DIR]`: hierarchical-QA long conversations (trainers/hqa), a spelling of
`data pack --method hqa` (one code path, harness/commands/data.py), and how either shows an hqa run."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from ctxbench.harness.cli_common import _data_dir, out
from ctxbench.harness.commands.data import LazyBar, MethodView, add_method_view, data_app, run_method


def data_hqa(
    config: Path = typer.Option(..., "--config", help="hqa data YAML (see configs/data/hqa-*.yaml)"),
    out_dir: Optional[str] = typer.Option(None, "--out", help="override out_dir"),
    data_dir: Optional[Path] = typer.Option(None, help="where relative document paths are looked up; env CTXBENCH_DATA_DIR"),
):
    """Split, summarize and question long documents with a generator model, then concatenate them into long
    conversations (JSONL shards + manifest.json); rerunning repeats no finished generator call. Same as
    `data pack --method hqa`."""
    run_method("hqa", config, command="ctxbench data hqa", overrides={"out_dir": out_dir},
               run_kwargs={"data_dir": _data_dir(data_dir)})


def _progress(bar: LazyBar) -> dict[str, Any]:
    return {"on_calls": bar.advance}  # the bar starts with the first generator call: bad input fails first, as one line


def _report(m: dict[str, Any], cfg: Any) -> None:
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
    add_method_view("hqa", MethodView(_progress, _report, unit="calls", label=" (generator calls)"))
    data_app.command("hqa")(data_hqa)
