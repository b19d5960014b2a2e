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

from ctxbench.harness.cli_backend_help import BackendHelpCommand
from ctxbench.harness.cli_common import (
    _data_dir,
    _ints,
    _kv,
    err,
    lmeval_model,
    log_samples_note,
    out,
    writable_dir,
)
from ctxbench.harness.cli_generation import generation as protocol
from ctxbench.harness.core.errors import (
    DISK_ERRORS,
    EXIT_FAILED,
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
    model: Optional[str] = typer.Option(None, help="alias, local HF dir, .gguf file or hub id (default smollm2-135m)"),
    suite: Optional[str] = typer.Option(None, help="shipped suite name (see `ctxbench suites`) or a YAML path "
                                        "(default ruler-quick; --tasks without --suite: an ad-hoc suite of those tasks)"),
    lengths: Optional[str] = typer.Option(None, help="override the suite's lengths, e.g. 1024,2048 or 4k,8k (ad-hoc: 4k)"),
    samples: Optional[int] = typer.Option(None, help="override samples per task and length (ad-hoc: 10); real-data "
                                          "tasks (LongBench, judge/qa) score their first N records"),
    tasks: Optional[str] = typer.Option(None, help="comma-separated task names or globs: the suite's to keep, e.g. "
                                        "'ruler/niah*', or without --suite the registered tasks to score (`ctxbench tasks`)"),
    store_dir: Optional[Path] = typer.Option(None, "--store", help="results store directory (default runs)"),
    backend: Optional[str] = typer.Option(None, help="backend, hf by default; `ctxbench backends` lists each with its "
                                          "arguments (lmeval:<type> for any lm-eval model type)"),
    backend_arg: list[str] = typer.Option([], "--backend-arg", help="KEY=VALUE passed to the backend (repeatable)"),
    dtype: Optional[str] = typer.Option(None, help="model dtype (backend arg dtype), e.g. bfloat16, float32"),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", "--batch_size", help="requests per batch (backend arg batch_size)"),
    device: Optional[str] = typer.Option(None, help="device (backend arg device), e.g. cpu, cuda, cuda:1"),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads (backend arg threads)"),
    template: Optional[str] = typer.Option(None, help="auto, chat, or a plain template for base models"),
    truncation: Optional[str] = typer.Option(None, help="refuse (default) or middle"),
    seed: Optional[int] = typer.Option(None, help="override the suite's seed"),
    data_dir: Optional[Path] = typer.Option(None, help="local data (pg_essays/, squad/, hotpotqa/); env CTXBENCH_DATA_DIR"),
    fresh: bool = typer.Option(False, help="discard earlier results of this run and start over"),
    label: Optional[str] = typer.Option(None, help="display name on leaderboards (default: the model); control "
                                         "characters are kept as visible escapes (\\x1b)"),
    judge_budget: Optional[str] = typer.Option(None, "--judge-budget", help="LLM-judge tasks (judge/*): the paid judge "
                                               "calls allowed, N or calls=N,tokens=N; a run over it is refused before it starts"),
    prices: Optional[Path] = typer.Option(None, "--prices", help="price table YAML (USD per million input, cached-input "
                                          "and output tokens, dated; default the shipped examples configs/prices.yaml)"),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="ceiling in USD for the whole run (rows already "
                                             "stored count): refused before it starts when the plan's estimate exceeds "
                                             "it, stopped resumably when real spending reaches it"),
    max_tokens: Optional[str] = typer.Option(None, "--max-tokens", help="ceiling in prompt + generated tokens for the "
                                             "whole run (e.g. 2M), held like --max-cost"),
    rope_scaling: Optional[str] = typer.Option(None, help="zero-shot context extension TYPE:FACTOR (linear, dynamic, yarn, llama3)"),
    shard: Optional[str] = typer.Option(None, help="score part i of n (e.g. 0/4); parts share one run directory"),
    model_args: Optional[str] = typer.Option(None, "--model_args", "--model-args", help="lm-eval's K=V,K=V: pretrained= is "
                                             "the model (then --model hf|vllm is the backend), the rest backend args"),
    output_path: Optional[Path] = typer.Option(None, "--output_path", "--output-path", help="lm-eval's spelling of --store"),
    num_fewshot: Optional[int] = typer.Option(None, "--num_fewshot", "--num-fewshot", help="few-shot examples, for the "
                                              "tasks with a num_fewshot argument (ruler/cwe, lmeval/*)"),
    gen_kwargs: list[str] = typer.Option([], "--gen-kwargs", "--gen_kwargs", help="sampling K=V,...: temperature, "
                                         "top_p, top_k, seed (default greedy, as RULER decodes); repeatable"),
    repeats: int = typer.Option(1, help="generations per sample (with --gen-kwargs sampling); a cell averages each "
                                "sample's repeats first"),
    log_samples: bool = typer.Option(False, "--log_samples", "--log-samples", help="accepted for lm-eval users; ctxbench "
                                     "always logs every sample (samples.jsonl)"),
    system_prompt: Optional[str] = typer.Option(None, "--system-prompt", "--system_instruction", "--system-instruction",
                                                help="a system turn before every prompt (its tokens count in each length)"),
    thinking: str = typer.Option("off", help="reasoning models: on (no answer prefix, a thinking budget, reasoning "
                                 "stripped before scoring and stored), off, or auto (on where the chat template has a "
                                 "thinking switch); see docs/thinking.md"),
    max_thinking_tokens: Optional[int] = typer.Option(None, "--max-thinking-tokens", help="thinking budget on top of "
                                                      "each task's answer budget (default 4096 with --thinking on)"),
    until: Optional[str] = typer.Option(None, help="sequential scoring: stop each length once its answer is known: "
                                        "effective-length (settled above or below --threshold) or width=W (interval "
                                        "narrower than W points); rerun without it to extend to N (docs/sequential.md)"),
    alpha: Optional[float] = typer.Option(None, help="error rate of a settled sequential verdict (default 0.05)"),
    threshold: Optional[float] = typer.Option(None, help="--until effective-length: the score to settle each length "
                                              "above or below (default 85.6, RULER's)"),
    vs: Optional[Path] = typer.Option(None, help="sequential scoring against an earlier run directory: stop each length "
                                      "once the sign of the paired difference is settled"),
):
    """Score a model on a suite; rerunning the same command resumes."""
    from ctxbench.harness.run.judge_budget import parse_budget
    from ctxbench.harness.run.runner import RunInterrupted, RunPlan, run
    from ctxbench.harness.run_log import keep_log, session_log_name, third_party_log

    if samples is not None and samples < 1:
        raise ConfigError("--samples: must be at least 1")
    budget = parse_budget(judge_budget)  # checked against the plan's judge calls before anything is written
    from ctxbench.harness.core.prices import load_prices
    from ctxbench.harness.run.cost_guard import parse_ceiling

    ceiling = parse_ceiling(max_cost, max_tokens)  # checked against the plan's tokens and cost before anything is written
    price_table = load_prices(prices)
    choice = lmeval_model(model=model, backend=backend, store=store_dir, model_args=model_args, output_path=output_path)
    generation = protocol(thinking=thinking, max_thinking_tokens=max_thinking_tokens, system_prompt=system_prompt,
                          gen_kwargs=",".join(gen_kwargs) or None, repeats=repeats, backend=choice.backend)
    if template is not None:
        check_template_name(template, field="--template")
    writable_dir(choice.store, "--output_path" if output_path else "--store")
    from ctxbench.harness.run.until import parse_until

    sequential = parse_until(until, alpha=alpha, threshold=threshold, vs=vs, shard=_shard(shard), repeats=repeats)
    s = _suite(suite, tasks, num_fewshot, lengths=_ints(lengths, "--lengths"), samples=samples, template=template,
               truncation=truncation, seed=seed)
    args = _backend_args(choice, backend_arg, dtype=dtype, batch_size=batch_size, device=device, threads=threads)
    if rope_scaling:
        from ctxbench.harness.backends.rope import parse_rope_scaling

        parse_rope_scaling(rope_scaling, field="--rope-scaling")  # fail early, with one line
        args["rope_scaling"] = rope_scaling
    log_samples_note(log_samples)
    model, store_dir = choice.model, choice.store
    label = printable(label) if label else label  # escape codes never reach a terminal, a record or a board
    log = session_log_name()
    plan = RunPlan(s, model, choice.backend, args, store_dir, _data_dir(data_dir), label or "", _shard(shard), generation,
                   sequential, sample_cap=samples, log=log)
    with third_party_log() as log_file:  # transformers', DeepSpeed's, ... output: to <run>/<log>, not the terminal
        try:
            outcome = run(plan, fresh=fresh, console=err, judge_budget=budget, prices=price_table, ceiling=ceiling)
        except RunInterrupted as e:
            o = e.outcome
            keep_log(log_file, o.store.dir, log)
            err.print(f"interrupted at {o.done}/{o.planned}; rerun the same command to resume", highlight=False)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except CtxbenchError:
            keep_log(log_file, None, log)  # refused before the run existed
            raise
        keep_log(log_file, outcome.store.dir, log)
    _print_outcome(outcome, printable(label or model), s.name, sequential is not None, store_dir)


def _print_outcome(outcome, name: str, suite: str, sequential: bool, store_dir: Path) -> None:
    """After a run: the score table (the protocol beside the model's name), sequential verdicts, failures, next step."""
    from rich.markup import escape

    from ctxbench.harness.summary import table
    from ctxbench.leaderboard.store_frame import protocol_text

    mode = protocol_text(outcome.store.read_record().get("generation") or {})  # thinking, sampling: as the board shows it
    name = f"{name} [{mode}]" if mode else name
    out.print(table(outcome.store, title=escape(f"{name} on {suite} (score ×100)"), width=out.width), soft_wrap=False)
    if sequential:
        _sequential_summary(outcome.store.dir)
    out.print(f"results: {outcome.store.dir}", highlight=False)
    if outcome.unfinished:
        err.print(f"{outcome.unfinished} samples never closed their reasoning (thinking_unfinished): each counts 0, "
                  "never scored as an answer; raise --max-thinking-tokens to give them room", highlight=False)
    if outcome.failed:
        reasons = ", ".join(f"{k}: {v}" for k, v in outcome.errors.most_common())
        err.print(f"{outcome.failed} samples failed ({reasons}); rerun the same command to retry them", highlight=False)
        raise typer.Exit(EXIT_FAILED)
    out.print(f"next: ctxbench board build --store {store_dir}", highlight=False)


def _sequential_summary(run_dir: Path) -> None:
    """After a run scored with --until: each length's verdict in words, and how to extend the prefix to N."""
    from ctxbench.harness.run.until import read_state, summary_lines

    state = read_state(run_dir)
    if not state:
        return
    rule = state.get("rule") or {}
    flag = f"--vs {Path(str(rule['vs'])).name}" if rule.get("vs") else f"--until {rule.get('until')}"
    out.print(f"sequential ({flag}, alpha {rule.get('alpha')}: {state.get('target')}):", highlight=False)
    for line in summary_lines(state):
        out.print(f"  {line}", highlight=False)
    out.print("  a stopped length is a prefix of the suite's N; rerun without --until to extend it", highlight=False)


def _suite(name: Optional[str], tasks: Optional[str], num_fewshot: Optional[int], **overrides):
    """The suite to score: a shipped or YAML suite (its tasks filtered by --tasks), or with --tasks alone an ad-hoc
    suite of the registered tasks; --num_fewshot set on the tasks that take it, refused where none does."""
    from ctxbench.harness.core.config import adhoc_suite, build_task, load_suite, select_tasks

    s = adhoc_suite(tasks, **overrides) if tasks and name is None else select_tasks(load_suite(name or "ruler-quick", **overrides), tasks)
    if num_fewshot is None:
        return s
    if num_fewshot < 0:
        raise ConfigError("--num_fewshot: must be 0 or more")
    takes = [i for i, spec in enumerate(s.tasks) if "num_fewshot" in type(build_task(spec).args).model_fields]
    if not takes:
        raise ConfigError("--num_fewshot: none of this run's tasks takes few-shot examples (those with a num_fewshot argument "
                          "do, e.g. ruler/cwe and lmeval/*; icl/* take shots); drop it")
    specs = [t.model_copy(update={"args": {**t.args, "num_fewshot": num_fewshot}}) if i in takes else t for i, t in enumerate(s.tasks)]
    return s.model_copy(update={"tasks": specs})


def _backend_args(choice, backend_arg: list[str], **options) -> dict:
    """--backend-arg, --model_args and the named options (--dtype ...) as one dict, each key given once, checked
    (names, types, dtype and template values, the device against this torch) before anything loads."""
    from ctxbench.harness.backends.args import check_backend_args

    args = _kv(backend_arg, "--backend-arg")
    for key, value in [*choice.backend_args.items(), *options.items()]:
        if value is not None:
            if key in args and args[key] != value:
                raise ConfigError(f"--{key.replace('_', '-')}: also given as {key}={args[key]} (--backend-arg or "
                                  "--model_args); give it once")
            args[key] = value
    check_backend_args(choice.backend, args)
    return args


def _shard(spec: Optional[str]) -> tuple[int, int]:
    if not spec:
        return (0, 1)
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise ConfigError(f"--shard: expected i/n like 0/4, got {spec!r}") from None
    if not 0 <= i < n:
        raise ConfigError(f"--shard: need 0 <= i < n, got {spec!r}")
    return (i, n)


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
