"""What `ctxbench plan` reads: a pilot run's rows (checked before use), the time per sample at each length, the
pilot's scores with their uncertainty, and the samples the suite plans (counted as `score` counts them).

A pilot store is user input: a row whose score is outside [0, 1], whose time is not a finite number, or a line
that is not a row is refused in one line naming the file, so a plan never shows "scores near 500" or "~nan h".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.lengths import format_length

PILOT_LEVEL = 0.95  # the pilot interval planned at its ends


@dataclass(frozen=True)
class PilotRow:
    task: str
    length: int
    score: float
    seconds: float | None


def _number(value, *, low: float, high: float = math.inf) -> float | None:
    """A finite number in [low, high] (never a bool or a string), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and low <= value <= high else None


def _shown(value) -> str:
    return repr(value)[:40] if isinstance(value, str) else str(value)[:40]


def _checked(raw: dict, where: str, field: str) -> PilotRow | None:
    """One stored row as the plan reads it; None where it holds no score yet (pending or failed)."""
    if raw.get("score") is None or raw.get("error"):
        return None
    fix = f"{field}: {where}: sample {str(raw.get('id'))[:60]!r}"
    score = _number(raw["score"], low=0.0, high=1.0)
    if score is None:
        raise ConfigError(f"{fix}: score {_shown(raw['score'])} is not a number in [0, 1]; the store is corrupt: "
                          "score the pilot again, or give --scores")
    length = raw.get("length")
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ConfigError(f"{fix}: length {_shown(length)} is not a positive whole number of tokens; the store is "
                          "corrupt: score the pilot again")
    task = raw.get("task")
    if not isinstance(task, str) or not task:
        raise ConfigError(f"{fix}: no task name; the store is corrupt: score the pilot again")
    seconds = raw.get("seconds")
    if seconds is not None and _number(seconds, low=0.0) is None:
        raise ConfigError(f"{fix}: seconds {_shown(seconds)} is not a finite time; the store is corrupt: "
                          "score the pilot again, or give --samples-per-second")
    return PilotRow(task, length, score, float(seconds) if seconds else None)


def read_pilot(run: Path, field: str) -> list[PilotRow]:
    """The scored rows of a run directory (the last row per sample id), each checked; the record is not read."""
    from ctxbench.harness.core.io import ReadStats, read_jsonl

    if not (run / "record.json").is_file():
        raise ConfigError(f"{field}: {run} is not a run directory (no record.json); pass runs/<run id>")
    latest: dict[str, tuple[dict, Path]] = {}
    for path in sorted(run.glob("samples*.jsonl")):
        stats = ReadStats()
        try:
            for raw in read_jsonl(path, stats=stats, require=("id",), warn=False):
                latest[str(raw["id"])] = (raw, path)
        except OSError as e:
            raise ConfigError(f"{field}: {path}: cannot be read ({e.__class__.__name__}); pass another run") from None
        if stats.bad:
            raise ConfigError(f"{field}: {stats.bad[0]}: not a run row (the store is corrupt); score the pilot again")
    rows = [row for raw, path in latest.values() if (row := _checked(raw, str(path), field)) is not None]
    if not rows:
        raise ConfigError(f"{field}: {run} has no scored samples yet; score a short pilot first (--samples 20)")
    return rows


@dataclass(frozen=True)
class Timing:
    """Seconds per sample at each of the suite's lengths, and the lengths that were measured (the rest projected)."""

    seconds: dict[int, float]
    measured: tuple[int, ...]
    source: str

    @property
    def projected(self) -> tuple[int, ...]:
        return tuple(n for n in sorted(self.seconds) if n not in self.measured)

    def projected_from(self) -> str:
        """'1K–2K': the measured lengths a projection extends."""
        lo, hi = min(self.measured), max(self.measured)
        return format_length(lo) if lo == hi else f"{format_length(lo)}–{format_length(hi)}"


def given_timing(samples_per_second: float, lengths: list[int]) -> Timing:
    return Timing({n: 1 / samples_per_second for n in lengths}, tuple(sorted(lengths)),
                  f"{samples_per_second:g} samples/s (given)")


def measured_timing(rows: list[PilotRow], lengths: list[int], name: str) -> Timing | None:
    """Mean seconds per sample at each length the run timed; other lengths projected at the same time per prompt
    token as the nearest longer-or-shorter measured length (linear in length: a lower bound where attention makes
    long prompts slower still; never below the shortest measured length's time)."""
    timed: dict[int, list[float]] = {}
    for r in rows:
        if r.seconds:
            timed.setdefault(r.length, []).append(r.seconds)
    if not timed:
        return None
    mean = {n: sum(v) / len(v) for n, v in timed.items()}
    known = sorted(mean)
    seconds = {}
    for n in lengths:
        if n in mean:
            seconds[n] = mean[n]
        elif n > known[-1]:
            seconds[n] = mean[known[-1]] * n / known[-1]
        elif n < known[0]:
            seconds[n] = mean[known[0]]
        else:
            lo = max(k for k in known if k < n)
            hi = min(k for k in known if k > n)
            seconds[n] = mean[lo] + (mean[hi] - mean[lo]) * (n - lo) / (hi - lo)
    count = sum(len(v) for v in timed.values())
    overall = sum(sum(v) for v in timed.values()) / count
    measured = tuple(n for n in sorted(lengths) if n in mean) or tuple(known)
    return Timing(seconds, measured, f"{1 / overall:.3g} samples/s (mean {overall:.3g} s per sample over {count} rows "
                                     f"of {name}, at {', '.join(map(format_length, known))})")


@dataclass(frozen=True)
class PilotScore:
    """A length's expected score (points) from a pilot, with the interval planned at its ends."""

    points: float
    lo: float
    hi: float
    n: int  # pilot samples per task (the fewest)


def pilot_scores(rows: list[PilotRow], lengths: list[int]) -> dict[int, PilotScore]:
    """Per suite length: the mean over tasks of each task's pilot mean, and the mean over tasks of each task's
    Clopper–Pearson bounds (fractional successes for partial-credit scores), so a 20-sample pilot is not read as
    exact."""
    from ctxbench.harness.core.stats.proportions import clopper_pearson

    by_task: dict[tuple[int, str], list[float]] = {}
    for r in rows:
        by_task.setdefault((r.length, r.task), []).append(r.score)
    per_length: dict[int, list[tuple[float, float, float, int]]] = {}
    for (length, _), values in by_task.items():
        k, n = sum(values), len(values)
        lo, hi = clopper_pearson(k, n, level=PILOT_LEVEL)
        per_length.setdefault(length, []).append((k / n, lo, hi, n))
    out = {}
    for length, cells in per_length.items():
        if length in lengths:
            out[length] = PilotScore(*(100 * sum(c[i] for c in cells) / len(cells) for i in range(3)),
                                     min(c[3] for c in cells))
    return out


def planned_cells(suite, data_dir: Path | None) -> dict[int, list[int]]:
    """Samples per task at each length, as `score` plans them (harness/planning.plan_cells: grids, fixed items,
    binned lengths). Tasks that read a dataset are counted at the suite's N without reading it (a plan downloads
    nothing)."""
    from ctxbench.harness.core.config import build_task
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.run.planning import plan_cells

    generated = [spec for i, spec in enumerate(suite.tasks)
                 if not getattr(build_task(spec, where=f"tasks.{i}"), "requires_data", False)]
    ctx = GenContext(tokenizer=None, renderer=None, data_dir=data_dir)
    cells, _ = plan_cells(suite.model_copy(update={"tasks": generated}), ctx) if generated else ([], [])
    counts: dict[int, list[int]] = {}
    for c in cells:
        counts.setdefault(c.length, []).append(c.planned)
    for i, spec in enumerate(suite.tasks):
        task = build_task(spec, where=f"tasks.{i}")
        if getattr(task, "requires_data", False) and not task.external:
            for length in spec.lengths or suite.lengths:
                counts.setdefault(length, []).append(suite.samples)
    return dict(sorted(counts.items()))
