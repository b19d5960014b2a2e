"""`ctxbench study configs/studies/NAME.yaml`: packing methods head to head (synthesize, train, score, report)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from ctxbench.harness.cli_common import _data_dir, err, out


def study(
    config: Path = typer.Argument(..., help="study YAML, e.g. configs/studies/cpu-stdlib.yaml"),
    data_dir: Optional[Path] = typer.Option(None, help="task data for scoring (pg_essays/, ...); env CTXBENCH_DATA_DIR"),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="override the study's out_dir"),
    check: bool = typer.Option(False, help="only validate the study config (methods, trainer settings, suite) and exit"),
):
    """Run a study; rerunning resumes, skipping every finished step."""
    from ctxbench.harness.study import load_study, run_study

    s = load_study(config)
    if out_dir is not None:
        s = s.model_copy(update={"out_dir": str(out_dir)})
    if check:
        out.print(f"{config}: valid; {len(s.methods)} methods ({', '.join(m.label for m in s.methods)}), "
                  f"baseline {s.baseline}, output {s.root()}")
        return
    start = time.perf_counter()
    result = run_study(s, console=err, data_dir=_data_dir(data_dir))
    if result is None:  # a torchrun rank other than 0: trained its share; rank 0 scores and reports
        return
    out.print(_table(s, result))
    out.print(f"summary: {result.summary}; report: {result.report.markdown} and {result.report.html} "
              f"({time.perf_counter() - start:.0f}s)")


def _table(s, result):
    """Per method: losses, overall score per length with CIs, and the paired delta against the baseline."""
    import json

    from rich.table import Table

    from ctxbench.leaderboard.tables import ci_text, comparison_text

    res = json.loads(result.report.json.read_text())
    deltas = {c["model_a"]: c for c in res["comparisons"]}
    table = Table(title=f"study {s.name} (scores ×100, 95% CIs)")
    for col in ("method", "train loss", "val loss", "score by length", f"Δ vs {s.baseline}"):
        table.add_column(col)
    for m in result.methods:
        by_len = "\n".join(f"{x['length']}: {ci_text(x)}" for x in res["lengths"] if x["model"] == m.name)
        d = deltas.get(m.name)
        delta = comparison_text(d) if d else "baseline"
        loss = [f"{v:.3f}" if v is not None else "—" for v in (m.train_loss, m.eval_loss)]
        table.add_row(m.name, *loss, by_len, delta)
    return table


def register(app: typer.Typer) -> None:
    app.command("study")(study)
