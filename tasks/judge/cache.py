"""What the LLM judge has been paid for: where its verdict cache lives (shared by every run on this machine) and the
meter of real spending that `--judge-budget` is held to while a run goes (harness/run/judge_budget.py arms it).

The cache keeps an accepted verdict under its key (the judge, its settings and the exact prompt) and, apart, every
verdict that was refused (a verdict HELMET's script would not score): a refusal is never read back as a verdict,
and its count gives a retry its own seed, so a judge that samples deterministically is not asked the same question
in the same way forever.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def verdict_key(judge: dict[str, Any], prompt: str) -> str:
    """A verdict's cache key: the judge's identity (model, version, protocol and the settings that change a verdict:
    sampling and its token limit) and the exact prompt, by the one content_hash (all 64 hex digits, as every cached
    verdict was keyed). Where the judge is reached and how fast (base_url, api_key_env, its backend's concurrency,
    retries, timeouts) are execution-only (json_schema_extra=EXECUTION on JudgeArgs) and never enter it."""
    from ctxbench.harness.core.identity import content_hash

    return content_hash({**judge, "prompt": prompt}, None)


def judge_cache_file(model: str) -> Path:
    """Where the verdicts of judge `model` are kept (cache_dir/judge/<model>.jsonl), one JSON line each, by the one
    cached client's KeyedCache (harness/backends/client.py): appended under the file's lock, refused verdicts
    counted apart and never read back."""
    from ctxbench.harness.core.io import slug
    from ctxbench.harness.core.models import cache_dir

    return cache_dir("judge") / f"{slug(model, max_len=80)}.jsonl"


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
