"""`ctxbench score`, split by meaning: its options (typed once here, so the command's signature is one line each),
the checks that turn them into a run plan before anything is written, and the run with its report.

harness/cli.py registers the command; the help text it prints is these options' help, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ctxbench.harness.cli_common import _data_dir, _ints, _kv, err, lmeval_model, log_samples_note, out, writable_dir
from ctxbench.harness.cli_generation import generation as protocol
from ctxbench.harness.core.errors import EXIT_FAILED, EXIT_INTERRUPTED, ConfigError, CtxbenchError
from ctxbench.harness.core.prompting import check_template_name
from ctxbench.harness.core.redact import printable

ModelOpt = Annotated[Optional[str], typer.Option(help="alias, local HF dir, .gguf file or hub id (default smollm2-135m)")]
SuiteOpt = Annotated[Optional[str], typer.Option(help="shipped suite name (see `ctxbench suites`) or a YAML path "
        "(default ruler-quick; --tasks without --suite: an ad-hoc suite of those tasks)")]
LengthsOpt = Annotated[Optional[str], typer.Option(help="override the suite's lengths, e.g. 1024,2048 or 4k,8k (ad-hoc: 4k)")]
SamplesOpt = Annotated[Optional[int], typer.Option(help="override samples per task and length (ad-hoc: 10); real-data "
        "tasks (LongBench, judge/qa) score their first N records")]
TasksOpt = Annotated[Optional[str], typer.Option(help="comma-separated task names or globs: the suite's to keep, e.g. "
        "'ruler/niah*', or without --suite the registered tasks to score (`ctxbench tasks`)")]
StoreDirOpt = Annotated[Optional[Path], typer.Option("--store", help="results store directory (default runs)")]
BackendOpt = Annotated[Optional[str], typer.Option(help="backend, hf by default; `ctxbench backends` lists each with its "
        "arguments (lmeval:<type> for any lm-eval model type)")]
BackendArgOpt = Annotated[list[str], typer.Option("--backend-arg", help="KEY=VALUE passed to the backend (repeatable)")]
DtypeOpt = Annotated[Optional[str], typer.Option(help="model dtype (backend arg dtype), e.g. bfloat16, float32")]
BatchSizeOpt = Annotated[Optional[int], typer.Option("--batch-size", "--batch_size", help="requests per batch (backend arg batch_size)")]
DeviceOpt = Annotated[Optional[str], typer.Option(help="device (backend arg device), e.g. cpu, cuda, cuda:1")]
ThreadsOpt = Annotated[Optional[int], typer.Option(help="torch CPU threads (backend arg threads)")]
TemplateOpt = Annotated[Optional[str], typer.Option(help="auto, chat, or a plain template for base models")]
TruncationOpt = Annotated[Optional[str], typer.Option(help="refuse (default) or middle")]
SeedOpt = Annotated[Optional[int], typer.Option(help="override the suite's seed")]
DataDirOpt = Annotated[Optional[Path], typer.Option(help="local data (pg_essays/, squad/, hotpotqa/); env CTXBENCH_DATA_DIR")]
FreshOpt = Annotated[bool, typer.Option(help="discard earlier results of this run and start over")]
LabelOpt = Annotated[Optional[str], typer.Option(help="display name on leaderboards (default: the model); control "
        "characters are kept as visible escapes (\\x1b)")]
JudgeBudgetOpt = Annotated[Optional[str], typer.Option("--judge-budget", help="LLM-judge tasks (judge/*): the paid judge "
        "calls allowed, N or calls=N,tokens=N; a run over it is refused before it starts")]
PricesOpt = Annotated[Optional[Path], typer.Option("--prices", help="price table YAML (USD per million input, cached-input "
        "and output tokens, dated; default the shipped examples configs/prices.yaml)")]
MaxCostOpt = Annotated[Optional[float], typer.Option("--max-cost", help="ceiling in USD for the whole run (rows already "
        "stored count): refused before it starts when the plan's estimate exceeds "
        "it, stopped resumably when real spending reaches it")]
MaxTokensOpt = Annotated[Optional[str], typer.Option("--max-tokens", help="ceiling in prompt + generated tokens for the "
        "whole run (e.g. 2M), held like --max-cost")]
RopeScalingOpt = Annotated[Optional[str], typer.Option(help="zero-shot context extension TYPE:FACTOR (linear, dynamic, yarn, llama3)")]
ShardOpt = Annotated[Optional[str], typer.Option(help="score part i of n (e.g. 0/4); parts share one run directory")]
ModelArgsOpt = Annotated[Optional[str], typer.Option("--model_args", "--model-args", help="lm-eval's K=V,K=V: pretrained= is "
        "the model (then --model hf|vllm is the backend), the rest backend args")]
OutputPathOpt = Annotated[Optional[Path], typer.Option("--output_path", "--output-path", help="lm-eval's spelling of --store")]
NumFewshotOpt = Annotated[Optional[int], typer.Option("--num_fewshot", "--num-fewshot", help="few-shot examples, for the "
        "tasks with a num_fewshot argument (ruler/cwe, lmeval/*)")]
GenKwargsOpt = Annotated[list[str], typer.Option("--gen-kwargs", "--gen_kwargs", help="sampling K=V,...: temperature, "
        "top_p, top_k, seed (default greedy, as RULER decodes); repeatable")]
RepeatsOpt = Annotated[int, typer.Option(help="generations per sample (with --gen-kwargs sampling); a cell averages each "
        "sample's repeats first")]
LogSamplesOpt = Annotated[bool, typer.Option("--log_samples", "--log-samples", help="accepted for lm-eval users; ctxbench "
        "always logs every sample (samples.jsonl)")]
SystemPromptOpt = Annotated[Optional[str], typer.Option("--system-prompt", "--system_instruction", "--system-instruction",
        help="a system turn before every prompt (its tokens count in each length)")]
ThinkingOpt = Annotated[str, typer.Option(help="reasoning models: on (no answer prefix, a thinking budget, reasoning "
        "stripped before scoring and stored), off, or auto (on where the chat template has a "
        "thinking switch); see docs/thinking.md")]
MaxThinkingTokensOpt = Annotated[Optional[int], typer.Option("--max-thinking-tokens", help="thinking budget on top of "
        "each task's answer budget (default 4096 with --thinking on)")]
UntilOpt = Annotated[Optional[str], typer.Option(help="sequential scoring: stop each length once its answer is known: "
        "effective-length (settled above or below --threshold) or width=W (interval "
        "narrower than W points); rerun without it to extend to N (docs/sequential.md)")]
AlphaOpt = Annotated[Optional[float], typer.Option(help="error rate of a settled sequential verdict (default 0.05)")]
ThresholdOpt = Annotated[Optional[float], typer.Option(help="--until effective-length: the score to settle each length "
        "above or below (default 85.6, RULER's)")]
VsOpt = Annotated[Optional[Path], typer.Option(help="sequential scoring against an earlier run directory: stop each length "
        "once the sign of the paired difference is settled")]


@dataclass(frozen=True)
class ScoreOptions:
    """What the user gave `ctxbench score`, one field per option, as typer parsed it."""

    model: Optional[str]
    suite: Optional[str]
    lengths: Optional[str]
    samples: Optional[int]
    tasks: Optional[str]
    store_dir: Optional[Path]
    backend: Optional[str]
    backend_arg: Optional[list[str]]  # None when not given
    dtype: Optional[str]
    batch_size: Optional[int]
    device: Optional[str]
    threads: Optional[int]
    template: Optional[str]
    truncation: Optional[str]
    seed: Optional[int]
    data_dir: Optional[Path]
    fresh: bool
    label: Optional[str]
    judge_budget: Optional[str]
    prices: Optional[Path]
    max_cost: Optional[float]
    max_tokens: Optional[str]
    rope_scaling: Optional[str]
    shard: Optional[str]
    model_args: Optional[str]
    output_path: Optional[Path]
    num_fewshot: Optional[int]
    gen_kwargs: Optional[list[str]]  # None when not given
    repeats: int
    log_samples: bool
    system_prompt: Optional[str]
    thinking: str
    max_thinking_tokens: Optional[int]
    until: Optional[str]
    alpha: Optional[float]
    threshold: Optional[float]
    vs: Optional[Path]


@dataclass(frozen=True)
class ScoreJob:
    """A checked plan and what its run needs beside it: the judge budget, the price table and the cost ceiling."""

    plan: Any  # harness/run/planning.RunPlan
    budget: Any
    prices: Any
    ceiling: Any
    name: str  # how the report names the model: its label, or the model


def plan_score(o: ScoreOptions) -> ScoreJob:
    """Every refusal the options alone allow, in one line each and before anything is written; then the plan."""
    from ctxbench.harness.core.prices import load_prices
    from ctxbench.harness.run.cost_guard import parse_ceiling
    from ctxbench.harness.run.judge_budget import parse_budget
    from ctxbench.harness.run.runner import RunPlan
    from ctxbench.harness.run.until import parse_until
    from ctxbench.harness.run_log import session_log_name

    if o.samples is not None and o.samples < 1:
        raise ConfigError("--samples: must be at least 1")
    budget = parse_budget(o.judge_budget)  # checked against the plan's judge calls before anything is written
    ceiling = parse_ceiling(o.max_cost, o.max_tokens)  # checked against the plan's tokens and cost before anything is written
    price_table = load_prices(o.prices)
    choice = lmeval_model(model=o.model, backend=o.backend, store=o.store_dir, model_args=o.model_args,
                          output_path=o.output_path)
    generation = protocol(thinking=o.thinking, max_thinking_tokens=o.max_thinking_tokens, system_prompt=o.system_prompt,
                          gen_kwargs=",".join(o.gen_kwargs or []) or None, repeats=o.repeats, backend=choice.backend)
    if o.template is not None:
        check_template_name(o.template, field="--template")
    writable_dir(choice.store, "--output_path" if o.output_path else "--store")
    sequential = parse_until(o.until, alpha=o.alpha, threshold=o.threshold, vs=o.vs, shard=_shard(o.shard),
                             repeats=o.repeats)
    s = _suite(o.suite, o.tasks, o.num_fewshot, lengths=_ints(o.lengths, "--lengths"), samples=o.samples,
               template=o.template, truncation=o.truncation, seed=o.seed)
    args = _backend_args(choice, o.backend_arg or [], dtype=o.dtype, batch_size=o.batch_size, device=o.device, threads=o.threads)
    if o.rope_scaling:
        from ctxbench.harness.backends.rope import parse_rope_scaling

        parse_rope_scaling(o.rope_scaling, field="--rope-scaling")  # fail early, with one line
        args["rope_scaling"] = o.rope_scaling
    log_samples_note(o.log_samples)
    label = printable(o.label) if o.label else o.label  # escape codes never reach a terminal, a record or a board
    plan = RunPlan(s, choice.model, choice.backend, args, choice.store, _data_dir(o.data_dir), label or "", _shard(o.shard),
                   generation, sequential, sample_cap=o.samples, log=session_log_name())
    return ScoreJob(plan, budget, price_table, ceiling, printable(label or choice.model))


def run_score(job: ScoreJob, *, fresh: bool) -> Any:
    """Run the plan with third-party output (transformers', DeepSpeed's, ...) in the run's log, not the terminal; an
    interruption says where it stopped and how to resume (exit 130)."""
    from ctxbench.harness.run.runner import RunInterrupted, run
    from ctxbench.harness.run_log import keep_log, third_party_log

    log = job.plan.log
    with third_party_log() as log_file:
        try:
            outcome = run(job.plan, fresh=fresh, console=err, judge_budget=job.budget, prices=job.prices,
                          ceiling=job.ceiling)
        except RunInterrupted as e:
            o = e.outcome
            keep_log(log_file, o.store.dir, log)
            err.print(f"interrupted at {o.done}/{o.planned}; rerun the same command to resume", highlight=False)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except CtxbenchError:
            keep_log(log_file, None, log)  # refused before the run existed
            raise
        keep_log(log_file, outcome.store.dir, log)
    return outcome


def score(options: ScoreOptions) -> None:
    """Plan (every check), run, report: the body of `ctxbench score`."""
    job = plan_score(options)
    outcome = run_score(job, fresh=options.fresh)
    plan = job.plan
    _print_outcome(outcome, job.name, plan.suite.name, plan.until is not None, plan.out_dir)


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
