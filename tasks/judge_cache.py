"""What the LLM judge has been paid for: the verdict cache (shared by every run on this machine) and the meter of
real spending that `--judge-budget` is held to while a run goes (harness/judge.py arms it).

The cache keeps an accepted verdict under its key (the judge, its settings and the exact prompt) and, apart, every
verdict that was refused (a verdict HELMET's script would not score): a refusal is never read back as a verdict,
and its count gives a retry its own seed, so a judge that samples deterministically is not asked the same question
in the same way forever.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any


class JudgeCache:
    """Verdicts already paid for, one JSON line each (cache_dir/judge/<model>.jsonl)."""

    def __init__(self, model: str):
        from ctxbench.harness.core.io import slug
        from ctxbench.harness.core.models import cache_dir

        self.path = cache_dir("judge") / f"{slug(model, max_len=80)}.jsonl"
        self._entries: dict[str, dict[str, Any]] | None = None
        self._refused: Counter[str] = Counter()

    def _load(self) -> dict[str, dict[str, Any]]:
        if self._entries is None:
            from ctxbench.harness.core.io import read_jsonl

            self._entries = {}
            for row in read_jsonl(self.path, require=("key",)) if self.path.exists() else []:
                if row.get("refused"):
                    self._refused[row["key"]] += 1
                else:
                    self._entries[row["key"]] = row
        return self._entries

    def get(self, key: str) -> dict[str, Any] | None:
        """The accepted verdict of `key`, if one was paid for (a refused one never comes back)."""
        return self._load().get(key)

    def refusals(self, key: str) -> int:
        """How many verdicts of `key` were refused so far (the next attempt's seed offset)."""
        self._load()
        return self._refused[key]

    def put(self, key: str, entry: dict[str, Any]) -> None:
        self._append({"key": key, **entry})
        self._load()[key] = {"key": key, **entry}

    def put_refused(self, key: str, entry: dict[str, Any]) -> None:
        self._append({"key": key, **entry, "refused": True})
        self._load()
        self._refused[key] += 1

    def _append(self, line: dict[str, Any]) -> None:
        from filelock import FileLock

        from ctxbench.harness.core.io import append_jsonl, cut_torn_tail

        with FileLock(str(self.path) + ".lock"):
            cut_torn_tail(self.path)
            append_jsonl(self.path, [line])


class JudgeBudgetSpent(KeyboardInterrupt):
    """Real judge spending reached --judge-budget: the run stops as an interrupt does (rows so far kept, a rerun
    resumes); a KeyboardInterrupt so that no `except Exception` turns it into an error row."""


@dataclass
class JudgeSpend:
    """Calls and tokens (prompt + verdict, as the judge's server counts them) really spent in this run, against
    the budget's limits (None: no limit). Shared by every judged task of the run."""

    calls_limit: int | None = None
    tokens_limit: int | None = None
    calls: int = 0
    tokens: int = 0

    def add(self, calls: int, tokens: int) -> None:
        self.calls += calls
        self.tokens += tokens

    def reached(self) -> str | None:
        """Which limit real spending has reached, if any."""
        for what, spent, limit in (("calls", self.calls, self.calls_limit), ("tokens", self.tokens, self.tokens_limit)):
            if limit is not None and spent >= limit:
                return f"{what} {spent:,} of {limit:,}"
        return None

    def check(self) -> None:
        """Stop the run before another paid call once real spending has reached the budget."""
        reached = self.reached()
        if reached:
            print(f"judge: --judge-budget reached by real use ({reached}; calls {self.calls:,}, tokens {self.tokens:,} "
                  "spent in this run); the run stops here: rerun to resume, with a larger budget to go further",
                  file=sys.stderr)
            raise JudgeBudgetSpent(reached)
