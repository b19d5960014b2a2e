"""`ctxbench study configs/studies/NAME.yaml`: methods head to head (data, training, scoring, report), with seeds."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from ctxbench.harness.cli_common import _data_dir, err, out, writable_dir


def study(
    config: Path = typer.Argument(..., help="study YAML, e.g. configs/studies/cpu-stdlib.yaml"),
    data_dir: Optional[Path] = typer.Option(None, help="task data for scoring (pg_essays/, ...); env CTXBENCH_DATA_DIR"),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="override the study's out_dir"),
    store: Path = typer.Option(Path("runs"), "--store", help="results store: without --out or out_dir the study "
                               "writes to <store>/studies/<name>"),
    check: bool = typer.Option(False, help="only validate the study config (methods, trainer settings, suite) and exit"),
):
    """Run a study; rerunning resumes, skipping every finished step."""
    from ctxbench.harness.studies import load_study, run_study
    from ctxbench.harness.studies.config import default_root

    s = load_study(config)
    field = "--out" if out_dir is not None else "out_dir" if s.out_dir is not None else "--store"
    if out_dir is not None or s.out_dir is None:
        s = s.model_copy(update={"out_dir": str(out_dir if out_dir is not None else default_root(s.name, store))})
    writable_dir(s.root(), field)
    if check:
        out.print(f"{config}: valid; {len(s.methods)} methods ({', '.join(m.name for m in s.methods)}) × "
                  f"{len(s.seeds)} seeds, reference {s.reference}, output {s.root()}")
        return
    from ctxbench.harness.core.extras import require_extra

    require_extra("train", for_="ctxbench study")  # it trains and scores: before the study's directory exists
    start = time.perf_counter()
    result = run_study(s, console=err, data_dir=_data_dir(data_dir))
    if result is None:  # a torchrun rank other than 0: trained its share; rank 0 scores and reports
        return
    out.print(_verdicts(result))
    out.print(f"report: {result.summary} and {result.html} ({time.perf_counter() - start:.0f}s)")


def _verdicts(result) -> str:
    """The report's verdicts section, as printed text."""
    import json

    res = json.loads(result.json.read_text())
    lines = [f"{c['measure']}: {c['a']} − {c['b']} = {c['diff']:+.4f}, p = {c['p_adjusted']:.3g} (Holm), {c['method']}"
             f"{_power(c)}" for c in res["comparisons"]]
    return "\n".join(lines) or "no comparisons"


def _power(c: dict) -> str:
    """Against one fixed run: the difference this design detects, and the seeds that would detect the observed one."""
    p = c.get("power")
    if not p:
        return ""
    seeds = f"{p['seeds_for_target']} seeds" if p["seeds_for_target"] else "no seed count"
    return (f"; detects {p['detectable']:.4f} at {p['power']:.0%} power ({p['power_at_target']:.0%} for "
            f"{p['target']:.4f}, the observed size; {seeds} would reach {p['power']:.0%})")


def register(app: typer.Typer) -> None:
    app.command("study")(study)
