"""The `ctxbench` command line. User errors print one line and exit non-zero, with no traceback.

Exit codes: 0 success; 2 bad input (a one-line error naming the field and the fix); 3 a run finished but
some samples failed (rerun the same command to retry them); 130 interrupted (rerun to resume).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from ctxbench.harness import cli_score
from ctxbench.harness.cli_backend_help import BackendHelpCommand
from ctxbench.harness.cli_common import (
    _data_dir,
    _ints,
    _kv,
    err,
    out,
    writable_dir,
)
from ctxbench.harness.cli_score import (
    AlphaOpt,
    BackendArgOpt,
    BackendOpt,
    BatchSizeOpt,
    DataDirOpt,
    DeviceOpt,
    DtypeOpt,
    FreshOpt,
    GenKwargsOpt,
    JudgeBudgetOpt,
    LabelOpt,
    LengthsOpt,
    LogSamplesOpt,
    MaxCostOpt,
    MaxThinkingTokensOpt,
    MaxTokensOpt,
    ModelArgsOpt,
    ModelOpt,
    NumFewshotOpt,
    OutputPathOpt,
    PricesOpt,
    RepeatsOpt,
    RopeScalingOpt,
    SamplesOpt,
    SeedOpt,
    ShardOpt,
    StoreDirOpt,
    SuiteOpt,
    SystemPromptOpt,
    TasksOpt,
    TemplateOpt,
    ThinkingOpt,
    ThreadsOpt,
    ThresholdOpt,
    TruncationOpt,
    UntilOpt,
    VsOpt,
)
from ctxbench.harness.core.errors import (
    DISK_ERRORS,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    ConfigError,
    CtxbenchError,
    exit_internal,
    os_error_line,
)
from ctxbench.harness.core.io import atomic_write
from ctxbench.harness.core.prompting import check_template_name
from ctxbench.harness.core.redact import printable, redact

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Measure how much of its context a language model can really use.")


def _version(value: bool) -> None:
    if value:
        from ctxbench.harness.core.provenance import git_commit, version

        commit = git_commit()
        out.print(f"ctxbench {version('ctxbench') or 'unknown'}" + (f" ({commit})" if commit else ""), highlight=False)
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="print the version and exit")):
    """Measure how much of its context a language model can really use."""


@app.command(cls=BackendHelpCommand)
def score(
    model: ModelOpt = None,
    suite: SuiteOpt = None,
    lengths: LengthsOpt = None,
    samples: SamplesOpt = None,
    tasks: TasksOpt = None,
    store_dir: StoreDirOpt = None,
    backend: BackendOpt = None,
    backend_arg: BackendArgOpt = None,
    dtype: DtypeOpt = None,
    batch_size: BatchSizeOpt = None,
    device: DeviceOpt = None,
    threads: ThreadsOpt = None,
    template: TemplateOpt = None,
    truncation: TruncationOpt = None,
    seed: SeedOpt = None,
    data_dir: DataDirOpt = None,
    fresh: FreshOpt = False,
    label: LabelOpt = None,
    judge_budget: JudgeBudgetOpt = None,
    prices: PricesOpt = None,
    max_cost: MaxCostOpt = None,
    max_tokens: MaxTokensOpt = None,
    rope_scaling: RopeScalingOpt = None,
    shard: ShardOpt = None,
    model_args: ModelArgsOpt = None,
    output_path: OutputPathOpt = None,
    num_fewshot: NumFewshotOpt = None,
    gen_kwargs: GenKwargsOpt = None,
    repeats: RepeatsOpt = 1,
    log_samples: LogSamplesOpt = False,
    system_prompt: SystemPromptOpt = None,
    thinking: ThinkingOpt = "off",
    max_thinking_tokens: MaxThinkingTokensOpt = None,
    until: UntilOpt = None,
    alpha: AlphaOpt = None,
    threshold: ThresholdOpt = None,
    vs: VsOpt = None,
):
    """Score a model on a suite; rerunning the same command resumes."""
    cli_score.score(cli_score.ScoreOptions(**locals()))


@app.command()
def generate(
    task: str = typer.Option(..., help="registered task, e.g. ruler/niah_single_2"),
    length: str = typer.Option(..., help="target length in tokens (prompt + generation), e.g. 4096 or 4k"),
    samples: int = typer.Option(5, help="number of samples"),
    tokenizer: str = typer.Option("smollm2-135m", help="alias, local dir, .gguf or hub id"),
    out_file: Path = typer.Option(..., "--out", help="output .jsonl"),
    seed: int = typer.Option(42),
    arg: list[str] = typer.Option([], "--arg", help="task argument KEY=VALUE (repeatable)"),
    template: str = typer.Option("auto", help="auto, chat, or a plain template for base models (plain, llama2-inst, vicuna)"),
    data_dir: Optional[Path] = typer.Option(None, help="local data dir; env CTXBENCH_DATA_DIR"),
    verify: str = typer.Option("auto", help="fast: trust exact piece counts where the tokenizer is additive (checked once); full: tokenize every prompt; auto: fast from 32 samples"),
    fmt: str = typer.Option("ctxbench", "--format", help="ctxbench (every field) or ruler (RULER's index/input/outputs/length)"),
):
    """Write a task's samples as JSON lines (the exact prompts a model would see)."""
    from ctxbench.harness.core import datasets
    from ctxbench.harness.core.config import TaskSpec, build_task
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.fitting import resolve_mode
    from ctxbench.harness.core.models import load_tokenizer
    from ctxbench.harness.core.prompting import PromptRenderer
    from ctxbench.harness.run.plan_bounds import check_generate

    tokens = (_ints(length, "--length") or [0])[0]
    if tokens < 64 or samples < 1:
        raise ConfigError("--length must be >= 64 and --samples >= 1")
    if verify not in ("auto", "fast", "full", "first"):
        raise ConfigError("--verify: use auto, fast or full")
    if fmt not in ("ctxbench", "ruler"):
        raise ConfigError("--format: use ctxbench or ruler")
    check_template_name(template, field="--template")
    check_generate(samples, tokens)  # arithmetic, before a prompt is built
    if out_file.is_dir():
        raise ConfigError(f"--out: {out_file} is a directory; give a .jsonl file path")
    writable_dir(out_file.parent, "--out")
    t = build_task(TaskSpec(task=task, args=_kv(arg, "--arg")), where="--task")
    tok = load_tokenizer(tokenizer)
    ctx = GenContext(tok, PromptRenderer(tok, template), data_dir=_data_dir(data_dir), verify=resolve_mode(verify, samples))
    rows = datasets.generate(t, length=tokens, indices=range(samples), seed=seed, ctx=ctx)
    lines = [s.to_json() if fmt == "ctxbench" else ruler_row(s, tok) for s in rows]
    atomic_write(out_file, "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
    err.print(f"wrote {len(rows)} samples to {out_file}", highlight=False)


def ruler_row(s, tok) -> dict:
    """A sample in RULER's field names: `input` is the task text (no model template), `answer_prefix` apart,
    `length` its tokens, `length_w_model_temp` the rendered prompt's, `token_position_answer` (needle tasks)."""
    row = {"index": s.index, "input": s.user_text, "outputs": list(s.answers),
           "length": len(tok(s.user_text + s.answer_prefix, add_special_tokens=False)["input_ids"]) + s.max_new_tokens,
           "length_w_model_temp": s.prompt_tokens + s.max_new_tokens, "answer_prefix": s.answer_prefix}
    at = s.user_text.find(s.answers[0]) if s.answers else -1
    if "niah" in s.task and at >= 0:
        row["token_position_answer"] = len(tok(s.user_text[:at], add_special_tokens=False)["input_ids"])
    return row


def _load_commands() -> None:
    """Each module in harness/commands/ adds its commands with register(app)."""
    import importlib
    import pkgutil

    import ctxbench.harness.commands as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        importlib.import_module(f"ctxbench.harness.commands.{info.name}").register(app)


_load_commands()


def _one_line_usage(e: Exception) -> tuple[str, int]:
    """A click/typer usage error as one line, or (help text, 0) for a bare `ctxbench`."""
    ctx = getattr(e, "ctx", None)
    if type(e).__name__ == "NoArgsIsHelpError":  # bare `ctxbench`: typer has printed the help
        return "", 0
    msg = " ".join(e.format_message().split()) if hasattr(e, "format_message") else str(e)
    where = ctx.command_path if ctx is not None else "ctxbench"
    return f"error: {msg} (see {where} --help)", EXIT_USAGE


def _warn_one_line(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings (a skipped corrupt line, a rebuilt cache entry) as one line each, without the source excerpt; during a
    score session a third-party library's go to the run log instead (harness/run_log.py)."""
    from ctxbench.harness.run_log import is_third_party, log_warning

    if is_third_party(filename) and log_warning(f"{category.__name__}: {message} ({filename}:{lineno})"):
        return
    err.print(f"warning: {printable(' '.join(str(message).split()))}", highlight=False, soft_wrap=True, markup=False)


def _interrupted(e: BaseException | None, *, say: bool = True) -> None:
    """Ctrl-C or SIGTERM (harness/core/signals.py), however it reached here: one line, exit 130 or 143."""
    from ctxbench.harness.core.signals import exit_code

    if say:
        outcome = getattr(e, "outcome", None)  # the runner's RunInterrupted, raised inside a study
        where = f"at {outcome.done}/{outcome.planned}" if outcome is not None else getattr(e, "where", "")
        err.print(f"interrupted{' ' + where if where else ''}; rerun the same command to resume", highlight=False,
                  soft_wrap=True, markup=False)
    sys.exit(exit_code(e))


def main() -> None:
    import warnings

    from ctxbench.harness.core import signals

    signals.install()
    warnings.showwarning = _warn_one_line
    try:
        code = app(standalone_mode=False)  # typer.Exit(n) comes back as a return value here
    except CtxbenchError as e:
        err.print(f"error: {printable(redact(e), keep_lines=True)}", highlight=False, soft_wrap=True, markup=False)
        sys.exit(EXIT_USAGE)
    except OSError as e:  # a path the user gave cannot be read or written (permissions, a full disk, a file as a dir)
        if e.filename is None and e.errno not in DISK_ERRORS:
            exit_internal(e)
        err.print(f"error: {os_error_line(e)}", highlight=False, soft_wrap=True, markup=False)
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt as e:
        _interrupted(e)
    except SystemExit:
        raise
    except Exception as e:  # usage errors from typer's (vendored) click
        names = {c.__name__ for c in type(e).__mro__}
        if isinstance(e, signals.Interrupted):
            _interrupted(e)
        if type(e).__name__ == "Exit" or "Exit" in names and hasattr(e, "exit_code"):
            if e.exit_code == EXIT_INTERRUPTED:  # typer turns Ctrl-C into Exit(130), unsaid
                _interrupted(e, say=not signals.announced())
            sys.exit(e.exit_code)
        if "Abort" in names:
            _interrupted(e)
        if "ClickException" in names:
            text, code = _one_line_usage(e)
            if text:
                err.print(text, highlight=False, soft_wrap=True, markup=False)
            sys.exit(code)
        exit_internal(e)  # a bug: exit 1, one line, the traceback saved to a file it names
    if code == EXIT_INTERRUPTED:  # typer returns Ctrl-C in a command as 130, unsaid unless the command said it
        _interrupted(None, say=not signals.announced())
    if isinstance(code, int) and code:
        sys.exit(code)


if __name__ == "__main__":
    main()
