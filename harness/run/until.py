"""Sequential scoring (`ctxbench score --until ...`): the stopping rule, its checks, and the per-length verdicts.

A round is one sample of each task at a length, at index 0, 1, 2, ...: an adaptive run is always a prefix of the full
protocol, so it resumes, compares and extends to the suite's N by rerunning without the flag (the rule is an
execution setting, never part of the run's identity). After each round the round means of a length go to an
anytime-valid confidence sequence (harness/core/stats/sequential.py); the length stops once its verdict is settled or at N.

The rows are the truth: the verdicts are recomputed from them on every resume (a confidence sequence is valid at any
stopping time). `adaptive.json` in the run directory records the rule, alpha, the target and, per length and cell,
the stopping round and the decision, for the board and for the user.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxbench.harness.core.adaptive_state import (  # noqa: F401
    ADAPTIVE_FILE,
    FINAL,
    read_state,
    stopped_samples,
    summary_lines,
    with_task_sets,
)
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.io import atomic_write_json

DEFAULT_ALPHA = 0.05
DEFAULT_THRESHOLD = 85.6  # RULER's effective-length threshold (Llama-2-7B at 4K), in points


@dataclass(frozen=True)
class Until:
    """The stopping rule of an adaptive run. Points (0..100) as the user types them; fractions for the statistics."""

    kind: str  # effective-length | width | vs
    alpha: float = DEFAULT_ALPHA
    threshold: float = DEFAULT_THRESHOLD  # effective-length: settle each length above or below this score
    width: float | None = None  # width: stop once the interval is narrower than this many points
    vs: str | None = None  # vs: the earlier run directory whose paired difference's sign settles

    def settings(self) -> dict[str, Any]:
        """What the record's session and adaptive.json store about the rule."""
        out: dict[str, Any] = {"until": self.kind, "alpha": self.alpha}
        out.update({"effective-length": {"threshold": self.threshold}, "width": {"width": self.width},
                    "vs": {"vs": self.vs}}[self.kind])
        return out

    def rule(self, lengths: int) -> Any:
        """The statistics' StopRule; effective length and vs decide at every length at once (looks = lengths)."""
        from ctxbench.harness.core.stats.sequential import StopRule  # numpy on first use, not at --help

        return StopRule(kind=self.kind, alpha=self.alpha, threshold=self.threshold / 100,
                        width=None if self.width is None else self.width / 100,
                        looks=1 if self.kind == "width" else max(1, lengths))

    def target(self) -> str:
        """The rule in words: `score above or below 85.6`, `interval narrower than 10`, `sign vs RUN`."""
        if self.kind == "effective-length":
            return f"score above or below {self.threshold:g}"
        if self.kind == "width":
            return f"interval narrower than {self.width:g} points"
        return f"sign of the difference with {Path(str(self.vs)).name}"


def parse_until(until: str | None, *, alpha: float | None, threshold: float | None, vs: Path | None,
                shard: tuple[int, int], repeats: int) -> Until | None:
    """--until, --alpha, --threshold and --vs checked before anything is written; None for a full-protocol run."""
    if until is None and vs is None:
        for flag, value in (("--alpha", alpha), ("--threshold", threshold)):
            if value is not None:
                raise ConfigError(f"{flag}: only with --until or --vs (a sequential run); add --until effective-length, "
                                  f"or drop {flag}")
        return None
    if until is not None and vs is not None:
        raise ConfigError("--vs: is its own stopping rule (the sign of the difference); drop --until or --vs")
    alpha = DEFAULT_ALPHA if alpha is None else alpha
    if not 0 < alpha < 0.5:
        raise ConfigError(f"--alpha: must be between 0 and 0.5 (the error rate of a settled verdict), got {alpha:g}")
    if shard[1] > 1:
        raise ConfigError("--until: a round spans every task at a length, so shards cannot stop it; drop --shard")
    if repeats > 1:
        raise ConfigError("--until: scores one generation per sample; drop --repeats")
    if vs is not None:
        if threshold is not None:
            raise ConfigError("--threshold: only with --until effective-length; drop it")
        return Until("vs", alpha, vs=str(earlier_run(vs)))
    kind, width = _kind(until)
    if kind == "width" and threshold is not None:
        raise ConfigError("--threshold: only with --until effective-length; drop it")
    threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    if not 0 < threshold < 100:
        raise ConfigError(f"--threshold: a score between 0 and 100 (points), got {threshold:g}")
    return Until(kind, alpha, threshold, width)


def _kind(until: str) -> tuple[str, float | None]:
    fix = "use effective-length or width=W (W in points, e.g. width=10)"
    text = until.strip().lower()
    if text == "effective-length":
        return "effective-length", None
    if text.startswith("width="):
        try:
            width = float(text.split("=", 1)[1])
        except ValueError:
            raise ConfigError(f"--until: {until!r} has no number after width=; {fix}") from None
        if not 0 < width <= 100:
            raise ConfigError(f"--until: width must be between 0 and 100 points, got {width:g}; {fix}")
        return "width", width
    raise ConfigError(f"--until: unknown rule {until!r}; {fix}")


def earlier_run(path: Path) -> Path:
    """The run directory --vs names: a scored run with rows (its record read with the store's one reader)."""
    from ctxbench.harness.core.store import RunStore, record_kind

    path = Path(path)
    if not (path / "record.json").is_file():
        raise ConfigError(f"--vs: {path} is not a run directory (no record.json); name one under your store, "
                          "e.g. runs/<run id>")
    store = RunStore(path.parent, path.name)
    if record_kind(store.read_record()) != "score" or not store.has_rows():
        raise ConfigError(f"--vs: {path} holds no scored samples; name a scored run")
    return path.resolve()


def clip(score: float, lower: float = 0.0, upper: float = 1.0) -> float:
    return min(max(float(score), lower), upper)


def round_values(scores: dict[tuple[str, int], float], tasks: dict[str, int], rounds: int) -> list[list[float]]:
    """Each round's scores, one per task (a task with fewer samples than the round leaves that round). The verdict
    takes them whole: a round counts as its tasks' samples, not as one mean (which would settle several times later)."""
    return [[scores[(t, r)] for t, n in tasks.items() if r < n] for r in range(rounds)]


def round_means(scores: dict[tuple[str, int], float], tasks: dict[str, int], rounds: int) -> list[float]:
    """The mean over tasks of each round's scores."""
    return [sum(values) / len(values) for values in round_values(scores, tasks, rounds)]


def complete_rounds(scores: dict[tuple[str, int], float], tasks: dict[str, int], limit: int) -> int:
    """How many rounds from 0 have every task's score (an errored or missing sample ends the prefix)."""
    r = 0
    while r < limit and all((t, r) in scores for t, n in tasks.items() if r < n):
        r += 1
    return r


def write_state(run_dir: Path, until: Until, lengths: dict[int, dict[str, Any]], cells: dict[str, dict[str, int]],
                earlier: dict[str, Any]) -> dict[str, Any]:
    """Write adaptive.json: the rule, alpha, target, and per length and cell the stopping round and the decision.
    A rule that differs from the one stored is kept in `history` (the rows of both stay valid prefixes)."""
    settings = until.settings()
    history = list(earlier.get("history") or [])
    if earlier.get("rule") and earlier["rule"] != settings:
        history.append(earlier["rule"])
    state = with_task_sets({"rule": settings, "target": until.target(), "history": history,
                            "lengths": {str(k): dict(v) for k, v in sorted(lengths.items())}, "cells": cells})
    atomic_write_json(Path(run_dir) / ADAPTIVE_FILE, state)
    return state
