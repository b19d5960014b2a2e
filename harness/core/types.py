"""Core value types. Frozen, so a sample or a score cannot drift after it is recorded."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ctxbench.harness.core import registry
from ctxbench.harness.core.identity import DEFAULT_EXECUTION_ARGS
from ctxbench.harness.core.rows import ROW_VERSION

SCHEMA_VERSION = 3  # 3: identity_args and kind in the record, execution settings and an end time per session

# Backend arguments that change only how fast a run goes, never what it predicts: the run id and the resume check
# leave them out, and each session records its own (harness/run/planning.py). Each backend declares its own on its Args
# model (json_schema_extra=EXECUTION, harness/core/identity.py); this is the rule for a backend that declares none.
# Where batch composition can change greedy outputs (bf16/fp16 on a GPU, batches > 1), the session says so.
EXECUTION_ARGS = DEFAULT_EXECUTION_ARGS


def model_free(backend: str) -> bool:
    """Whether a backend produces no model output (echo answers with the end of its prompt): a run of one never shares
    a model's identity, label or board row, whatever model named its tokenizer. The backend declares it when it
    registers (register("backend", NAME, model_free=True)), a plugin's too."""
    return registry.model_free(backend)


def run_fingerprint(backend: str, fingerprint: str) -> str:
    """The fingerprint a run is filed under: a model-free backend's names that backend (`echo:...`), so its rows never
    merge with the model's; a record an older ctxbench wrote (echo under the real weights' hash) is read the same way."""
    name = str(backend or "").split(":", 1)[0]
    if not model_free(name) or fingerprint.startswith(f"{name}:"):
        return fingerprint
    return f"{name}:{fingerprint}"


def board_name(label: str, backend: str, model: str = "") -> str:
    """A run's name on the board: `echo(smollm2-135m)` for a model-free backend under the model's own name (the default
    label), so it is never read as the model; a label the user chose stays (its fingerprint still keeps it apart)."""
    head = str(backend or "").split(":", 1)[0]
    name = label or model
    if not model_free(head) or (label and model and label != model) or name.startswith(f"{head}("):
        return name
    return f"{head}({name})"


THINKING_MODES = ("off", "on", "auto")
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "seed")


@dataclass(frozen=True)
class Generation:
    """How a run generates, beyond each task's own prompt and answer budget: its protocol. Part of the run's
    identity (a run with thinking on and one with it off are two runs, two rows on the board)."""

    thinking: str = "off"  # off | on | auto (resolved to on or off by the plan step from the chat template)
    max_thinking_tokens: int = 0  # on top of each task's answer budget; 0 with thinking on: DEFAULT_THINKING_TOKENS
    system_prompt: str | None = None
    gen_kwargs: tuple[tuple[str, Any], ...] = ()  # sorted (key, value): temperature, top_p, top_k, seed; () greedy
    repeats: int = 1

    @property
    def on(self) -> bool:
        return self.thinking == "on"

    @property
    def thinking_budget(self) -> int:
        return (self.max_thinking_tokens or DEFAULT_THINKING_TOKENS) if self.on else 0

    def identity(self) -> dict[str, Any]:
        """The settings that differ from the default protocol ({} for a greedy, non-thinking, one-turn run)."""
        out: dict[str, Any] = {}
        if self.thinking != "off":
            out.update(thinking=self.thinking, max_thinking_tokens=self.thinking_budget)
        if self.system_prompt is not None:
            out["system_prompt"] = self.system_prompt
        if self.gen_kwargs:
            out["gen_kwargs"] = dict(self.gen_kwargs)
        if self.repeats != 1:
            out["repeats"] = self.repeats
        return out


DEFAULT_THINKING_TOKENS = 4096


def repeat_id(sample_id: str, repeat: int) -> str:
    """A repeat's row id: the sample's id for the first, `<id>~<r>` for the others (the store keeps every repeat)."""
    return sample_id if repeat == 0 else f"{sample_id}~{repeat}"


def sample_of(row_id: str) -> str:
    """The sample a row id (a repeat's included) belongs to."""
    return row_id.split("~", 1)[0]


@dataclass(frozen=True)
class Sample:
    """One generated test item. Length and depth are axes of the sample, never part of a metric name."""

    task: str
    length: int
    index: int
    prompt: str  # exact text sent to the model: chat template + task text + answer prefix
    answers: tuple[str, ...]
    prompt_tokens: int
    max_new_tokens: int
    depths: tuple[float, ...] = ()  # realised depth (percent of context tokens) of each needle
    metric: str = "string_match_all"
    add_special_tokens: bool = False  # whether the backend must let the tokenizer add BOS/EOS
    # Where the task text sits inside the prompt (for chat APIs): prompt = template(user_text) + answer_prefix.
    # Offsets, so the prompt is stored once; None when a template rewrote the text (then it is in meta["user_text"]).
    user_span: tuple[int, int] | None = None
    answer_prefix: str = ""
    meta: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    turns: tuple[tuple[str, str], ...] = ()  # (role, content) of a conversation's turns before user_text (multi-message)
    # leading characters of `prompt` shared with the sample scheduled before it, declared by the schedule
    # (harness/run/prefix.py) for prefix reuse; 0: none. Scheduling, not content: never in the sample cache
    shared_prefix: int = field(default=0, compare=False)

    @property
    def id(self) -> str:
        return f"{self.task}@{self.length}#{self.index}"

    @property
    def user_text(self) -> str:
        if self.user_span is not None:
            return self.prompt[self.user_span[0]: self.user_span[1]]
        return self.meta.get("user_text", self.prompt)

    @property
    def prompt_hash(self) -> str:
        return hashlib.sha256(self.prompt.encode()).hexdigest()[:16]

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["answers"] = list(self.answers)
        d["depths"] = list(self.depths)
        d["user_span"] = list(self.user_span) if self.user_span is not None else None
        d.pop("shared_prefix")  # the schedule's, not the sample's
        return {"id": self.id, **d}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Sample:
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        kw["answers"] = tuple(kw["answers"])
        kw["depths"] = tuple(kw.get("depths", ()))
        kw["user_span"] = tuple(kw["user_span"]) if kw.get("user_span") is not None else None
        kw["turns"] = tuple(tuple(t) for t in kw.get("turns", ()))
        return cls(**kw)


@dataclass(frozen=True)
class Request:
    """What a backend is asked: the rendered prompt and how much to generate."""

    sample_id: str
    prompt: str
    max_new_tokens: int
    add_special_tokens: bool = False
    prompt_tokens: int | None = None
    user_text: str = ""  # for chat-completion APIs: the user message ...
    answer_prefix: str = ""  # ... and the start of the assistant turn
    # the run's protocol (Generation): thinking mode and its budget on top of max_new_tokens, the system turn,
    # sampling settings (empty: greedy) and the repeat this request is (0-based)
    thinking: bool = False
    max_thinking_tokens: int = 0
    system_prompt: str | None = None
    sampling: tuple[tuple[str, Any], ...] = ()
    repeat: int = 0
    template_kwargs: tuple[tuple[str, Any], ...] = ()  # what the chat template was given (enable_thinking, ...)
    turns: tuple[tuple[str, str], ...] = ()  # a conversation's turns before user_text (chat APIs send them as messages)
    shared_prefix: int = 0  # leading characters of `prompt` shared with the request before it (Sample.shared_prefix)

    @property
    def generation_limit(self) -> int:
        """Tokens the backend may generate: the answer budget, plus the thinking budget in thinking mode."""
        return self.max_new_tokens + (self.max_thinking_tokens if self.thinking else 0)


@dataclass(frozen=True)
class Prediction:
    sample_id: str
    text: str
    prompt_tokens: int
    generated_tokens: int
    seconds: float
    truncated_tokens: int = 0  # tokens removed by a declared truncation policy (0 = none)
    error: str | None = None
    prefill_seconds: float | None = None  # time to the first generated token (None: not measured)
    decode_seconds: float | None = None  # the rest of the generation
    # what the times are: "sample" (this sample alone), "batch-share" (its batch's time / batch size),
    # "request" (a served request's latency, concurrent with others); "" when the backend does not say
    timing: str = ""
    reasoning: str | None = None  # reasoning the server returned apart (an API's reasoning_content), else None
    reasoning_tokens: int | None = None  # the backend's own count of generated reasoning tokens, where it knows it
    over_budget: int = 0  # characters a server sent when it ignored max_tokens; the text was cut to the budget (0: none)
    # the token account a row records (harness/core/rows.py, docs/cost-and-scale.md)
    cached_tokens: int | None = None  # prompt tokens a prefix cache served (None: not known)
    token_source: str = "counted"  # whose counts these are: "server" (the usage report) or "counted" (ctxbench's)
    gpu_seconds: float | None = None  # a GPU backend's device time of the generate call x devices (this sample's share)


@dataclass(frozen=True)
class LogprobRequest:
    """One window of a document for a log-likelihood backend: score ids[score_from:] given what precedes them."""

    sample_id: str
    token_ids: tuple[int, ...]  # the whole window the model sees (at most its context length)
    score_from: int = 1  # first position whose token is scored (>= 1: position 0 has no context)


@dataclass(frozen=True)
class TokenLogprobs:
    """log P(token_ids[i] | token_ids[:i]) for i in score_from..len-1, or an error that a rerun retries."""

    sample_id: str
    logprobs: tuple[float, ...]
    seconds: float
    error: str | None = None


@dataclass(frozen=True)
class RunRecord:
    """Everything needed to reproduce a run."""

    run_id: str
    created: str
    suite: str
    suite_config: dict[str, Any]
    model: str
    backend: str
    backend_args: dict[str, Any]
    tokenizer: str
    tokenizer_fingerprint: str
    template: str
    seed: int
    truncation: str
    versions: dict[str, str]
    command: list[str]
    schema_version: int = SCHEMA_VERSION
    label: str = ""  # display name on leaderboards
    model_fingerprint: str = ""  # hash of the weights (GGUF file, or config + weight files' names, sizes, samples)
    plan: dict[str, dict[str, int]] = field(default_factory=dict)  # task -> {length: planned samples}; the board's denominator
    external: list[str] = field(default_factory=list)  # tasks another harness drives (lm-eval): their size is known only after
    # one entry per invocation that wrote rows (resumes, shards): started, ended, outcome, command, host, pid, and
    # `execution`, the settings that change only speed (EXECUTION_ARGS and the backend's resolved device, dtype, ...)
    sessions: list[dict[str, Any]] = field(default_factory=list)
    losses: list[str] = field(default_factory=list)  # tasks scored by loss (perplexity): rows without a 0..1 score
    # A checkpoint ctxbench trained: its ctxbench_manifest.json's run id, config and data hashes, trainer and base model
    training: dict[str, Any] = field(default_factory=dict)
    # the backend arguments that can change a prediction (the run id hashes them; a resume must match them);
    # backend_args above keeps every argument and the backend's own info as of the first session
    identity_args: dict[str, Any] = field(default_factory=dict)
    kind: str = "score"  # a scored run (trainings write their own records)
    # the run's protocol when it is not the default (greedy, thinking off, no system turn, one repeat): thinking,
    # max_thinking_tokens, system_prompt, gen_kwargs, repeats (Generation.identity); part of the run's identity
    generation: dict[str, Any] = field(default_factory=dict)
    # the plugins behind the registry entries the run used (task, metric, backend, suite): kind, name, distribution,
    # version (harness/core/provenance.py plugins_used); empty when it used only ctxbench's own
    plugins: list[dict[str, str]] = field(default_factory=list)
    # the version of the rows this record's first session wrote (harness/core/rows.py; absent: rows up to 4eafb19)
    row_version: int = ROW_VERSION


@runtime_checkable
class TaskContract(Protocol):
    """What the runner may call on a task (ctxbench.tasks.base.Task implements all of it, with defaults for the
    optional capabilities): the core checks a factory's product against this, and never probes a task with hasattr."""

    name: str
    category: str
    metric: str
    needs: str  # "generate", or "prompt_logprobs" (logprob_requests / score_logprobs)
    external: bool  # another harness produces its rows (run_external / is_complete / write_aggregates)
    extra: str | None
    reads_records: bool  # its samples are a dataset's records in order (`--samples N` keeps the first N)

    def generate(self, *, length: int, index: int, seed: int, ctx: Any) -> Sample: ...
    def score_row(self, prediction: str, sample: Sample) -> tuple[float | None, dict[str, Any], str | None]: ...
    def samples_per_length(self, ctx: Any = None) -> int | None: ...
    def samples_at(self, length: int, ctx: Any) -> int | None: ...
    def prepare(self, ctx: Any) -> None: ...
    def data_files(self, ctx: Any) -> list[Any]: ...
    def logprob_requests(self, sample: Sample) -> list[LogprobRequest]: ...
    def score_logprobs(self, sample: Sample, results: list[TokenLogprobs]) -> dict[str, Any]: ...
    def run_external(self, *, backend: Any, renderer: Any = None, limit: int | float | None = None, seed: int = 42,
                     console: Any = None) -> list[dict[str, Any]]: ...
    def is_complete(self, run_dir: Any) -> bool: ...
    def write_aggregates(self, run_dir: Any) -> Any: ...
