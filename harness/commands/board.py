"""`ctxbench board build|import`: leaderboards from the results store."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ctxbench.harness.cli_common import err, out, writable_dir
from ctxbench.harness.core.errors import ConfigError

FORMATS = ("board", "json")
board_app = typer.Typer(help="Leaderboards from the results store: tables, curves, heatmaps.")


@board_app.command("build")
def board_build(
    runs_dir: Path = typer.Option(Path("runs"), "--store", help="results store directory"),
    runs: Optional[str] = typer.Option(None, help="comma-separated run ids (default: every run in the store)"),
    out_dir: Path = typer.Option(Path("board"), "--out", help="where to write leaderboard.md, index.html, results.csv/json"),
    threshold: str = typer.Option("85.6", help="effective-length threshold: a score, or 'model=NAME@4096'"),
    compare: list[str] = typer.Option([], help="paired comparison 'MODEL_A:MODEL_B' (repeatable)"),
    title: str = typer.Option("ctxbench leaderboard"),
    relative_effective: Optional[float] = typer.Option(
        None, "--relative-effective", help="also show NoLiMa's relative effective length: the longest length scoring at "
        "least this % of the model's own score at its shortest length (NoLiMa: 85)"),
    auc: Optional[str] = typer.Option(
        None, "--auc", help="AUC@L columns to add, e.g. 128K,1M: the area under the score-by-length curve up to L "
        "(default: the largest of 128K and 1M that the board's lengths reach)"),
    auc_scale: str = typer.Option(
        "tokens", "--auc-scale", help="what the AUC integrates over: tokens (as Context Arena) or log2 (every "
        "doubling of the length weighs the same)"),
    fmt: str = typer.Option(
        "board", "--format", help="board: the whole board (leaderboard.md, index.html, results.csv/json, summaries); "
        "json: only board.json, one file under the versioned schema ctxbench-board/1 (docs: publishing)"),
    prompts: bool = typer.Option(
        True, "--prompts/--no-prompts", help="regenerate each sample's prompt for the sample viewer from the run's "
        "suite and seed, shown where its hash is the stored one (docs: board); --no-prompts builds faster and shows "
        "the hashes"),
):
    """Build the leaderboard report from runs (and imported published results)."""
    import tempfile

    from ctxbench.leaderboard import build_report
    from ctxbench.leaderboard.board_json import write_board_json
    from ctxbench.leaderboard.store_frame import examples, select_runs
    from ctxbench.leaderboard.viewer import sample_details

    if fmt not in FORMATS:
        raise ConfigError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}; json writes board.json only")
    if relative_effective is not None and not 0 < relative_effective <= 100:
        raise ConfigError(f"--relative-effective: {relative_effective:g} is not a percentage in (0, 100]; NoLiMa uses 85")
    auc_lengths = _auc_lengths(auc, auc_scale)
    writable_dir(out_dir, "--out")
    pairs = []
    for c in compare:
        if ":" not in c:
            raise ConfigError(f"--compare: expected MODEL_A:MODEL_B, got {c!r}")
        pairs.append(tuple(c.split(":", 1)))
    thr: float | str = float(threshold) if threshold.replace(".", "", 1).isdigit() else threshold
    run_ids = [r for r in runs.split(",") if r] if runs else None
    frames, df, notes = _scores(runs_dir, run_ids)
    # what the user can fix (--threshold, --compare) is a ConfigError from here; any other exception is a bug
    scratch = None if fmt == "board" else tempfile.TemporaryDirectory(prefix="ctxbench-board-")  # json: built aside
    board_dir = out_dir if scratch is None else Path(scratch.name) / "board"
    report = build_report(df, out_dir=board_dir, cells=frames.cells, runs=frames.runs, notes=notes, threshold=thr,
                          title=title, comparisons=pairs, examples=examples(frames.scores), relative=relative_effective,
                          auc=auc_lengths, auc_scale=auc_scale,
                          sample_details=sample_details(select_runs(runs_dir, run_ids), prompts=prompts and fmt == "board"))
    if scratch is not None:
        with scratch:
            out.print(f"wrote {write_board_json(board_dir, out_dir)}", highlight=False, markup=False, soft_wrap=True)
        return
    out.print(f"wrote {report.markdown}, {report.html}, {report.csv}, {report.json} and "
              f"{out_dir / 'summary'}/<model>/<length>/summary.csv", highlight=False, markup=False, soft_wrap=True)
    out.print(f"open {report.html} in a browser to see the board", highlight=False, markup=False, soft_wrap=True)


def _scores(runs_dir: Path, run_ids: list[str] | None):
    """The store's frames, the score frame with imported published rows, and the notes (printed): refused in one
    line when nothing on the board could be drawn from them."""
    import pandas as pd

    from ctxbench.leaderboard.store_frame import load_store, reported_frame

    frames = load_store(runs_dir, run_ids)
    reported = reported_frame(runs_dir)
    parts = [x for x in (frames.scores, reported) if not x.empty]
    if not parts and any("(perplexity) is not on the board" in n for n in frames.notes):
        raise ConfigError(f"board build: the runs in {runs_dir} hold only perplexity tasks (ppl/*), which the board does "
                          "not show; `ctxbench score` prints their perplexities, `ctxbench study` reports them")
    if not parts:
        skipped = [n for n in frames.notes if "which this ctxbench does not know" in n]
        why = f" ({len(skipped)} skipped: {skipped[0]})" if skipped else ""
        raise ConfigError(f"board build: no scored runs in {runs_dir}{why}; run `ctxbench score` first or "
                          "`ctxbench board import`")
    df = pd.concat(parts, ignore_index=True)
    notes = list(frames.notes)
    if frames.skipped:
        notes.append(f"{len(frames.skipped)} corrupt stored lines were skipped (first: {frames.skipped[0]})")
    for note in notes:
        err.print(f"note: {note}", highlight=False, markup=False)
    return frames, df, notes


def _auc_lengths(auc: str | None, scale: str) -> tuple[int, ...]:
    """--auc and --auc-scale checked before anything is read or written."""
    from ctxbench.leaderboard.auc import SCALES, parse_auc

    if scale not in SCALES:
        raise ConfigError(f"--auc-scale: {scale!r} is not one of {', '.join(SCALES)}; tokens is Context Arena's AUC")
    try:
        return parse_auc(auc) if auc is not None else ()
    except ValueError as e:
        raise ConfigError(f"--auc: {e}") from None


@board_app.command("import")
def board_import(
    csv: Path = typer.Argument(..., help="CSV with columns model, task (or avg), length, score[, claimed_length]"),
    runs_dir: Path = typer.Option(Path("runs"), "--store", help="results store directory"),
):
    """Add published results (marked 'reported') so they sit in the same table as measured runs."""
    from ctxbench.harness.core.config import resolve_config
    from ctxbench.leaderboard.store_frame import import_reported

    csv = resolve_config(csv, kind="reported", field="board import")  # configs/reported/hqa-table1.csv from anywhere
    writable_dir(runs_dir, "--store")
    n, same = import_reported(runs_dir, csv)
    if same is not None:
        out.print(f"{csv} is already in the store (as {same}); nothing imported", highlight=False, markup=False, soft_wrap=True)
    else:
        out.print(f"imported {n} reported rows from {csv}", highlight=False, markup=False, soft_wrap=True)




@board_app.command("push")
def board_push(
    repo_id: str = typer.Argument(..., help="Hugging Face dataset repository, NAME or OWNER/NAME (created if missing)"),
    board: Path = typer.Option(Path("board"), "--board", help="the built board folder (ctxbench board build --out)"),
    runs_dir: Path = typer.Option(Path("runs"), "--store", help="results store whose run records go with the board"),
    private: bool = typer.Option(False, "--private", help="create the repository private (an existing one is kept)"),
    endpoint: Optional[str] = typer.Option(None, "--endpoint", help="the Hub's URL (default: $HF_ENDPOINT or "
                                           "https://huggingface.co)"),
):
    """Upload the board, results.csv and the run records (tokens and local paths removed) to a Hub dataset repo."""
    from ctxbench.harness.core.extras import require_extra

    require_extra("realdata", for_="ctxbench board push", modules=("huggingface_hub",))
    from ctxbench.leaderboard.hub_push import check_repo_id, hub_token, push, upload_plan

    check_repo_id(repo_id)
    token = hub_token()  # before anything is read: no token, nothing read, nothing sent
    files = upload_plan(board, runs_dir, token)
    url = push(repo_id, files, token=token, endpoint=endpoint, private=private)
    out.print(f"pushed {len(files)} files ({sum(len(f.content) for f in files):,} bytes) to dataset {repo_id}: {url}",
              highlight=False, markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.add_typer(board_app, name="board")
