"""Before a study trains: every dataset its eval suite reads is read once; while it runs: where it is, so that
Ctrl-C or SIGTERM says where it stopped.

A study trains every (method, seed) before it scores any. An eval task whose data is missing (offline without
--data-dir) would otherwise fail only at the first scoring, after every training; the check builds the first
sample of each eval task as scoring will, with the study's tokenizer, before anything is written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from ctxbench.harness.core.errors import CtxbenchError
from ctxbench.harness.core.signals import Interrupted


def check_eval_data(suite, tokenizer: str, data_dir: Path | None) -> None:
    """Read (or download once) every dataset the eval suite needs, and build each task's first sample at its
    shortest length: a failure is one line before the first training."""
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.models import load_tokenizer
    from ctxbench.harness.core.prompting import PromptRenderer
    from ctxbench.harness.run.planning import _check_tasks, plan_cells

    tok = load_tokenizer(tokenizer)
    ctx = GenContext(tok, PromptRenderer(tok, suite.template), data_dir=data_dir)
    try:
        cells, _ = plan_cells(suite, ctx)
        _check_tasks(cells, ctx, suite.seed, frozenset())
    except CtxbenchError as e:
        raise type(e)(f"eval.suite {suite.name}: {e} (checked before any training; nothing was trained)") from None


class StudyProgress:
    """The step a study is in (making data, training, scoring, reporting), for its interrupt line."""

    def __init__(self, name: str):
        self.name = name
        self.step = "preparing its corpus"

    def at(self, step: str) -> None:
        self.step = step

    def line(self, e: BaseException) -> str:
        outcome = getattr(e, "outcome", None)  # the runner's RunInterrupted: how many samples of this run
        if outcome is not None:
            detail = f" (at {outcome.done}/{outcome.planned} samples)"
        else:
            where = getattr(e, "where", "") or ""
            detail = "" if not where else " (before its first step)" if "step 0/0" in where else f" ({where})"
        return f"in study {self.name} while {self.step}{detail}; its finished steps are kept"

    @contextlib.contextmanager
    def stopped_here(self) -> Iterator[None]:
        """Ctrl-C or SIGTERM anywhere inside: one Interrupted that says which step of the study it stopped."""
        try:
            yield
        except (KeyboardInterrupt, Interrupted) as e:
            raise Interrupted(self.line(e)) from None
