"""`ctxbench fit`: scaling-law fits (Quest's α·exp(−β·D) + γ and a power law) of validation loss vs tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ctxbench.harness.cli_common import out
from ctxbench.harness.core.errors import ConfigError


def fit(
    store: Path = typer.Option(Path("runs"), "--store", help="results store holding `ctxbench train` runs"),
    csv: Optional[Path] = typer.Option(None, "--csv", help="read points from a CSV (model/size/group, tokens, loss) instead"),
    runs: Optional[str] = typer.Option(None, help="comma-separated training run ids (default: every training run)"),
    points: str = typer.Option("final", help="final: each finished run's last loss vs tokens trained, a curve per group; "
                               "curve: every logged loss of each run"),
    split: str = typer.Option("eval", help="eval (validation loss) or train"),
    forms: str = typer.Option("exp,power", help="comma-separated forms: exp, power"),
    holdout: str = typer.Option("largest", help="largest (each group's largest D), none, or a token count to hold out above"),
    out_dir: Path = typer.Option(Path("fit"), "--out", help="where fit.md, fit.html and fit.json go"),
    title: str = typer.Option("Scaling-law fits"),
):
    """Fit loss against training tokens per group, predict held-out points, write a report with plots."""
    from rich.table import Table

    from ctxbench.leaderboard.fits import FORMS, SYMBOLS, fit_frame, read_points_csv, write_fit_report

    chosen = [f.strip() for f in forms.split(",") if f.strip()]
    bad = [f for f in chosen if f not in FORMS]
    if bad or not chosen:
        raise ConfigError(f"--forms: unknown form {bad[0] if bad else forms!r}; use {', '.join(FORMS)}")
    if points not in ("final", "curve") or split not in ("eval", "train"):
        raise ConfigError("--points must be final or curve, and --split eval or train")
    hold: str | float = holdout
    if holdout not in ("largest", "none"):
        try:
            hold = float(holdout)
        except ValueError:
            raise ConfigError(f"--holdout: use largest, none or a token count, got {holdout!r}") from None
    if csv is not None:
        if not csv.exists():
            raise ConfigError(f"--csv: {csv} does not exist")
        try:
            df = read_points_csv(csv)
        except ValueError as e:
            raise ConfigError(f"--csv: {e}") from None
        source = f"{csv.name}"
    else:
        from ctxbench.trainers.base import loss_points

        ids = [r for r in runs.split(",") if r] if runs else []
        df = loss_points(store, run_ids=ids, points=points, split=split)
        source = f"{split} losses of {'finished training runs (last point each)' if points == 'final' else 'every logged step'} in {store}"
    if df.empty:
        raise ConfigError(f"fit: no {split} losses found in {csv or store}; train with `ctxbench train` (finished runs) "
                          "or pass --csv, or use --points curve for a single run")
    result = fit_frame(df, forms=chosen, holdout=hold)
    paths = write_fit_report(result, out_dir, title=title, source=source)
    table = Table(title=title)
    for col in ("group", "form", "parameters (± s.e.)", "held-out rel. error"):
        table.add_column(col)
    for f in result.fits:
        held = [h for h in result.heldout if h.group == f.group and h.form == f.form]
        params = ", ".join(f"{SYMBOLS[p]}={f.params[p]:.4g}±{f.stderr[p]:.2g}" for p in FORMS[f.form]) if f.ok else f"no fit: {f.message}"
        table.add_row(f.group, f.form, params, ", ".join(f"{100 * h.rel_error:+.2f}%" for h in held) or "—")
    out.print(table)
    out.print(f"wrote {paths['markdown']}, {paths['html']}, {paths['json']}")


def register(app: typer.Typer) -> None:
    app.command("fit")(fit)
