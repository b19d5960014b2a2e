"""`ctxbench plan`: what scoring a suite will cost, full protocol vs `--until`, and what a comparison can detect."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ctxbench.harness.cli_common import out
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.lengths import format_length, parse_length


def _timing(samples_per_second: Optional[float], run: Optional[Path], lengths: list[int], rows):
    """Seconds per sample at each length, as given or measured from a run's rows (mean `seconds` per scored sample
    at each length it timed; other lengths projected)."""
    from ctxbench.harness.run.plan_inputs import given_timing, measured_timing

    if samples_per_second is not None and run is not None:
        raise ConfigError("--samples-per-second and --from: give one throughput, not both")
    if samples_per_second is not None:
        if not 0 < samples_per_second < float("inf"):
            raise ConfigError(f"--samples-per-second: {samples_per_second:g} must be above 0; e.g. 2.5")
        return given_timing(samples_per_second, lengths)
    if run is None:
        return None
    timing = measured_timing(rows(run, "--from"), lengths, run.name)
    if timing is None:
        raise ConfigError(f"--from: {run} has no timed samples (its backend records 0 s); pass --samples-per-second")
    return timing


def _expected(pilot: Optional[Path], scores: Optional[str], lengths: list[int], rows) -> dict[int, tuple[float, ...]]:
    """Expected score (points) and its interval per suite length: a pilot run's (the interval of its few samples)
    or --scores 4k=92,8k=81 (taken as exact)."""
    from ctxbench.harness.run.plan_inputs import pilot_scores

    if pilot is not None and scores is not None:
        raise ConfigError("--pilot and --scores: give one source of expected scores, not both")
    if pilot is not None:
        known = pilot_scores(rows(pilot, "--pilot"), lengths)
        if not known:
            raise ConfigError(f"--pilot: {pilot.name} scored none of the suite's lengths "
                              f"({', '.join(map(format_length, lengths))}); pilot the same suite with --samples 20")
        return {n: (s.points, s.lo, s.hi) for n, s in known.items()}
    if scores is None:
        return {}
    return {n: (p, p, p) for n, p in _parse_scores(scores, lengths).items()}


def _reader():
    """Each run directory read (and checked) once, though --from and --pilot may name the same run."""
    from ctxbench.harness.run.plan_inputs import read_pilot

    seen: dict[Path, list] = {}

    def rows(run: Path, field: str) -> list:
        if run not in seen:
            seen[run] = read_pilot(run, field)
        return seen[run]
    return rows


def _parse_scores(scores: str, lengths: list[int]) -> dict[int, float]:
    parsed: dict[int, float] = {}
    for item in (s for s in scores.split(",") if s.strip()):
        key, sep, value = item.partition("=")
        try:
            length, points = parse_length(key), float(value)
        except ValueError:
            raise ConfigError(f"--scores: expected LENGTH=POINTS like 4k=92,8k=81, got {item!r}") from None
        if not sep or not 0 <= points <= 100:
            raise ConfigError(f"--scores: {item!r}: give a score in points (0-100) per length, e.g. 4k=92")
        if length not in lengths:
            raise ConfigError(f"--scores: {format_length(length)} is not a length of the suite "
                              f"({', '.join(map(format_length, lengths))})")
        parsed[length] = points
    return parsed


def _check(alpha: float, threshold: float, width: Optional[float], n: Optional[int], detect: Optional[float],
           power: float) -> None:
    if not 0 < alpha < 0.5:
        raise ConfigError(f"--alpha: must be between 0 and 0.5, got {alpha:g}")
    if not 0 < threshold < 100:
        raise ConfigError(f"--threshold: a score in points between 0 and 100 (e.g. 85.6), got {threshold:g}")
    if width is not None and not 0 < width <= 100:
        raise ConfigError(f"--width: an interval width in points (e.g. 10), got {width:g}")
    if n is not None and n < 1:
        raise ConfigError(f"--n: samples per task and length, at least 1, got {n}")
    if detect is not None and not 0.5 <= detect <= 100:
        raise ConfigError(f"--detect: a difference in points between 0.5 and 100 (5 = five points), got {detect:g}")
    if not 0.5 <= power < 1:
        raise ConfigError(f"--power: between 0.5 and 1 (e.g. 0.8), got {power:g}")


def plan(
    suite: str = typer.Option(..., help="the suite to plan (a shipped name or a YAML path)"),
    samples_per_second: Optional[float] = typer.Option(None, "--samples-per-second", help="throughput of the model "
                                                       "and machine you will score on"),
    run: Optional[Path] = typer.Option(None, "--from", help="measure the throughput from a run directory "
                                       "(mean seconds per sample of its rows)"),
    pilot: Optional[Path] = typer.Option(None, help="expected scores per length from a pilot run of the suite"),
    scores: Optional[str] = typer.Option(None, help="expected scores per length in points, e.g. 4k=92,8k=81"),
    threshold: float = typer.Option(85.6, help="--until effective-length's threshold in points"),
    width: Optional[float] = typer.Option(None, help="also plan --until width=W (points)"),
    alpha: float = typer.Option(0.05, help="error rate of a settled verdict, and the level of a comparison"),
    n: Optional[int] = typer.Option(None, "--n", help="samples per task and length for the detectable difference "
                                    "(default the suite's)"),
    detect: Optional[float] = typer.Option(None, help="a difference in points: the samples needed to detect it"),
    power: float = typer.Option(0.8, help="power of the comparison"),
    model: Optional[str] = typer.Option(None, help="the model to price the plan's tokens for (its name in the price "
                                        "table, e.g. gpt-4o-mini)"),
    prices: Optional[Path] = typer.Option(None, "--prices", help="price table YAML (default the shipped examples "
                                          "configs/prices.yaml)"),
    as_json: bool = typer.Option(False, "--json", help="print the plan as JSON"),
):
    """Expected samples and time to each target beside the full protocol's, and what a comparison can detect."""
    from ctxbench.harness.cli_common import _data_dir
    from ctxbench.harness.core.config import load_suite
    from ctxbench.harness.run.plan_inputs import planned_cells
    from ctxbench.harness.run.sequential_checks import declared_cluster_refusal
    from ctxbench.leaderboard.sequential_plan import build_plan

    _check(alpha, threshold, width, n, detect, power)
    from ctxbench.harness.core.prices import load_prices

    price_table = load_prices(prices)  # a bad table is one line, before the suite is read
    loaded = load_suite(suite)
    rows = _reader()
    timing = _timing(samples_per_second, run, list(loaded.lengths), rows)
    expected = _expected(pilot, scores, list(loaded.lengths), rows)
    cells = planned_cells(loaded, _data_dir(None))
    report = build_plan(loaded, cells=cells, seconds=timing.seconds if timing else None, expected=expected,
                        threshold=threshold, width=width, alpha=alpha, n=n, detect=detect, power=power)
    refused = declared_cluster_refusal(loaded)
    if refused:  # score --until refuses this suite: no --until table, the full protocol only
        report["targets"], report["until_refused"] = [], refused
    if timing is not None:
        report["measured_lengths"] = list(timing.measured)
        report["projected_lengths"] = list(timing.projected)
    from ctxbench.harness.run.plan_tokens import length_tokens, token_lines, token_plan

    report["tokens"] = token_plan(length_tokens(loaded, _data_dir(None)), report, model,
                                  price_table.price_for(model) if model else None)
    if as_json:
        out.print(json.dumps(report, indent=1), highlight=False, soft_wrap=True)
        return
    print_plan(report, timing=timing, pilot=pilot.name if pilot else None)
    for line in token_lines(report["tokens"]):
        out.print(line, highlight=False, soft_wrap=True)


def _when(seconds: float | None, projected: str = "") -> str:
    from ctxbench.harness.run.plan_size import _duration

    return "" if seconds is None else f" · {_duration(seconds)}{projected}"


def _range(low: float, high: float, fmt: str = "{:,.0f}") -> str:
    return fmt.format(low) if fmt.format(low) == fmt.format(high) else f"{fmt.format(low)}–{fmt.format(high)}"


def _header(report: dict, timing) -> None:
    counts = ", ".join(f"{n} at {format_length(int(k))}" for k, n in report["tasks_per_length"].items())
    per_task = report["samples_per_task"]
    note = _projection_note(timing, all_lengths=True)
    out.print(f"{report['suite']}: tasks {counts}; N={_range(min(per_task), max(per_task))} samples per task and "
              f"length; full protocol {report['full_samples']:,} samples{_when(report['full_seconds'], note)}",
              highlight=False)
    if timing is None:
        out.print("throughput: unknown (pass --samples-per-second or --from RUN_DIR for times)", highlight=False)
        return
    out.print(f"throughput: {timing.source}", highlight=False)
    if timing.projected:
        out.print(f"  measured at {', '.join(map(format_length, timing.measured))}; times at "
                  f"{', '.join(map(format_length, timing.projected))} are projected from {timing.projected_from()} at "
                  "the same time per prompt token (a lower bound: attention makes long prompts slower still)",
                  highlight=False)


def _projection_note(timing, *, length: int | None = None, all_lengths: bool = False) -> str:
    """' (projected from 1K–2K)' where a time rests on lengths the run did not measure."""
    if timing is None or not timing.projected:
        return ""
    if all_lengths or length in timing.projected:
        return f" (projected from {timing.projected_from()})"
    return ""


def print_plan(report: dict, *, timing, pilot: str | None) -> None:
    """The plan as a user reads it: one table per target, then the comparison's power."""
    from rich.table import Table

    _header(report, timing)
    if report.get("until_refused"):
        out.print(report["until_refused"], highlight=False, soft_wrap=True)
    for target in report["targets"]:
        by_length = target["rows"][0]["length"] is not None
        title = (f"--until {target['target']}: expected samples per length" +
                 (f" (scores from {pilot}, planned over their 95% intervals)" if pilot else " (your scores)"
                  if by_length else ", if a length scores…"))
        table = Table(title=title, title_justify="left")
        for column in ("length" if by_length else "score", *(("score",) if by_length else ()), "expected samples",
                       "settles before N", "full protocol"):
            table.add_column(column, justify="right")
        for row in target["rows"]:
            table.add_row(*_row_cells(row, by_length, timing))
        out.print(table)
        _print_total(target, report, timing)
    _print_compare(report["compare"])


def _row_cells(row: dict, by_length: bool, timing) -> list[str]:
    note = _projection_note(timing, length=row["length"]) if by_length else _projection_note(timing, all_lengths=True)
    score = f"{row['score']:.1f}"
    if row["score_lo"] != row["score_hi"]:
        score += f" [{row['score_lo']:.0f}, {row['score_hi']:.0f}]"
    samples = _range(row["samples_lo"], row["samples_hi"])
    when = _when(row["seconds"] if row["samples_lo"] == row["samples_hi"] else row["seconds_hi"], note)
    if row["samples_lo"] != row["samples_hi"] and when.startswith(" · ~"):
        when = f" · ≤ {when[3:]}"  # the time of the range's top
    first = [format_length(row["length"]), score] if by_length else [score]
    return [*first, f"{samples}{when}", f"{row['settled_before_n']:.0%}",
            f"{row['full_samples']:,}{_when(row['full_seconds'], note)}"]


def _print_total(target: dict, report: dict, timing) -> None:
    if target["total_samples"] is None:
        return
    share = target["total_samples"] / report["full_samples"]
    unscored = f"; {target['unscored_samples']:,} of them at lengths without a score, counted at N" \
        if target["unscored_samples"] else ""
    spread = "" if target["total_samples_lo"] == target["total_samples_hi"] else \
        f", {_range(target['total_samples_lo'], target['total_samples_hi'])} over the pilot's intervals"
    out.print(f"  whole suite: {target['total_samples']:,} samples ({share:.0%} of the full protocol){spread}"
              f"{_when(target['total_seconds'], _projection_note(timing, all_lengths=True))}{unscored}",
              highlight=False)


def _print_compare(c: dict) -> None:
    out.print(f"comparing two models (paired, alpha {c['alpha']:g}, power {c['power']:.0%}, scores near "
              f"{100 * c['mean']:.0f}): at N={c['n']} the smallest detectable difference is "
              f"{c['detectable_one_length']:.1f} points at one length ({c['tasks']} tasks), "
              f"{c['detectable_all_lengths']:.1f} over all lengths", highlight=False)
    if "detect" in c:
        settles = f"in about {c['vs_rounds']:,} rounds" if c["vs_settled"] >= 0.5 else f"before {c['vs_cap']:,} rounds in {c['vs_settled']:.0%} of runs"
        out.print(f"to detect {c['detect']:g} points at one length: N={c['samples_to_detect']:,} samples per task "
                  f"(fixed N); --vs settles the sign {settles}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
