"""`ctxbench plan`: what scoring a suite will cost, full protocol vs `--until`, and what a comparison can detect."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import typer

from ctxbench.harness.cli_common import out
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.lengths import format_length, parse_length


@dataclass(frozen=True)
class Throughput:
    samples_per_second: float
    source: str


def _throughput(samples_per_second: Optional[float], run: Optional[Path]) -> Optional[Throughput]:
    """Samples per second as given, or measured from a run's rows (mean `seconds` per scored sample)."""
    if samples_per_second is not None and run is not None:
        raise ConfigError("--samples-per-second and --from: give one throughput, not both")
    if samples_per_second is not None:
        if samples_per_second <= 0:
            raise ConfigError(f"--samples-per-second: {samples_per_second:g} must be above 0; e.g. 2.5")
        return Throughput(samples_per_second, f"{samples_per_second:g} samples/s (given)")
    if run is None:
        return None
    seconds = [float(r["seconds"]) for r in _scored_rows(run, "--from") if r.get("seconds")]
    if not seconds or sum(seconds) <= 0:
        raise ConfigError(f"--from: {run} has no timed samples (its backend records 0 s); pass --samples-per-second")
    mean = sum(seconds) / len(seconds)
    return Throughput(1 / mean, f"{1 / mean:.3g} samples/s (mean {mean:.3g} s per sample over {len(seconds)} rows of {run.name})")


def _scored_rows(run: Path, field: str) -> list[dict]:
    from ctxbench.harness.core.store import RunStore

    if not (run / "record.json").is_file():
        raise ConfigError(f"{field}: {run} is not a run directory (no record.json); pass runs/<run id>")
    rows = [r for r in RunStore(run.parent, run.name).latest().values() if r.get("score") is not None]
    if not rows:
        raise ConfigError(f"{field}: {run} has no scored samples yet; score a short pilot first (--samples 20)")
    return rows


def _pilot_scores(pilot: Optional[Path], scores: Optional[str], lengths: list[int]) -> dict[int, float]:
    """Expected score (points) per suite length, from a pilot run's rows or from --scores 4k=92,8k=81."""
    if pilot is not None and scores is not None:
        raise ConfigError("--pilot and --scores: give one source of expected scores, not both")
    if pilot is not None:
        by_task: dict[tuple[int, str], list[float]] = {}
        for row in _scored_rows(pilot, "--pilot"):
            by_task.setdefault((int(row["length"]), row["task"]), []).append(float(row["score"]))
        found: dict[int, list[float]] = {}
        for (length, _), values in by_task.items():
            found.setdefault(length, []).append(100 * sum(values) / len(values))
        known = {length: sum(v) / len(v) for length, v in found.items() if length in lengths}
        if not known:
            raise ConfigError(f"--pilot: {pilot.name} scored none of the suite's lengths "
                              f"({', '.join(map(format_length, lengths))}); pilot the same suite with --samples 20")
        return known
    if scores is None:
        return {}
    return _parse_scores(scores, lengths)


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
    as_json: bool = typer.Option(False, "--json", help="print the plan as JSON"),
):
    """Expected samples and time to each target beside the full protocol's, and what a comparison can detect."""
    from ctxbench.harness.core.config import load_suite
    from ctxbench.leaderboard.sequential_plan import build_plan

    _check(alpha, threshold, width, n, detect, power)
    loaded = load_suite(suite)
    speed = _throughput(samples_per_second, run)
    expected = _pilot_scores(pilot, scores, list(loaded.lengths))
    report = build_plan(loaded, speed=speed.samples_per_second if speed else None, expected=expected,
                        threshold=threshold, width=width, alpha=alpha, n=n, detect=detect, power=power)
    if as_json:
        out.print(json.dumps(report, indent=1), highlight=False, soft_wrap=True)
        return
    print_plan(report, source=speed.source if speed else None, pilot=pilot.name if pilot else None)


def _when(seconds: float | None) -> str:
    from ctxbench.harness.plan_size import _duration

    return "" if seconds is None else f" · {_duration(seconds)}"


def print_plan(report: dict, *, source: str | None, pilot: str | None) -> None:
    """The plan as a user reads it: one table per target, then the comparison's power."""
    from rich.table import Table

    counts = ", ".join(f"{n} at {format_length(int(k))}" for k, n in report["tasks_per_length"].items())
    out.print(f"{report['suite']}: tasks {counts}; N={report['samples']} samples per task and length; full protocol "
              f"{report['full_samples']:,} samples{_when(report['full_seconds'])}", highlight=False)
    out.print(f"throughput: {source}" if source else "throughput: unknown (pass --samples-per-second or --from RUN_DIR "
              "for times)", highlight=False)
    for target in report["targets"]:
        by_length = target["rows"][0]["length"] is not None
        title = (f"--until {target['target']}: expected samples per length" +
                 (f" (scores from {pilot})" if pilot else " (your scores)" if by_length else
                  ", if a length scores…"))
        table = Table(title=title, title_justify="left")
        for column in ("length" if by_length else "score", *(("score",) if by_length else ()), "expected samples",
                       "settles before N", "full protocol"):
            table.add_column(column, justify="right")
        for row in target["rows"]:
            first = [format_length(row["length"]), f"{row['score']:.1f}"] if by_length else [f"{row['score']:.1f}"]
            table.add_row(*first, f"{row['samples']:,}{_when(row['seconds'])}", f"{row['settled_before_n']:.0%}",
                          f"{row['full_samples']:,}{_when(row['seconds'] and row['seconds'] * row['full_samples'] / max(row['samples'], 1))}")
        out.print(table)
        if target["total_samples"] is not None:
            share = target["total_samples"] / report["full_samples"]
            unscored = f"; {target['unscored_samples']:,} of them at lengths without a score, counted at N" \
                if target["unscored_samples"] else ""
            out.print(f"  whole suite: {target['total_samples']:,} samples ({share:.0%} of the full protocol)"
                      f"{_when(target['total_seconds'])}{unscored}", highlight=False)
    _print_compare(report["compare"])


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
