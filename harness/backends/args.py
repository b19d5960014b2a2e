"""Each backend's arguments (`--backend-arg KEY=VALUE`) as a pydantic model, checked before the backend is built.

An unknown or ill-typed key is refused with one line that names it and lists the valid keys: no backend
silently ignores an argument or fails later with a TypeError. `model` and `truncation` are not backend
arguments: they come from `--model` and the suite (`--truncation`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ctxbench.harness.core.identity import DEFAULT_EXECUTION_ARGS, EXECUTION

TORCH_DTYPES = ("auto", "bfloat16", "float16", "float32", "float64")
VLLM_DTYPES = ("auto", "bfloat16", "float16", "half", "float32", "float")


def one_of(value: str, valid: tuple[str, ...]) -> str:
    if value not in valid:
        raise ValueError(f"unknown value; use one of {', '.join(valid)}")
    return value


def device_name(value: str) -> str:
    """auto, cpu, mps, cuda or cuda:N: a misspelling is refused before torch is imported (check_device then asks torch)."""
    kind, _, index = value.partition(":")
    if kind not in ("auto", "cpu", "mps", "cuda") or (index and (kind != "cuda" or not index.isdigit())):
        raise ValueError("unknown device; use auto, cpu, cuda, cuda:N or mps")
    return value


class BackendArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EchoArgs(BackendArgs):
    delay: float = Field(0.0, ge=0, description="seconds to sleep per request (to test progress, interrupts and timeouts)",
                         json_schema_extra=EXECUTION)
    context_length: int = Field(1 << 30, ge=64, description="the context length to claim (to test length refusals)")
    batch_size: int = Field(8, ge=1, description="requests per generate() call from the runner", json_schema_extra=EXECUTION)
    accuracy: float | dict[str, float] | None = Field(None, description="answer correctly (with the whole prompt, "
                                                      "where the answer is) with this probability, drawn per sample id, "
                                                      "else nothing; or per length, e.g. '{\"1024\": 1.0, \"2048\": 0.2}' "
                                                      "(to test sequential scoring)")

    @field_validator("accuracy")
    @classmethod
    def _fraction(cls, v):
        for p in (v.values() if isinstance(v, dict) else [] if v is None else [v]):
            if not 0 <= p <= 1:
                raise ValueError("a probability between 0 and 1")
        return v


class HFArgs(BackendArgs):
    dtype: str = Field("auto", description="torch dtype of the weights: auto (bf16 on CUDA; on CPU the faster of bf16 and fp32, measured once per machine; the run id and the record keep the dtype it picked), bfloat16, float16 or float32")
    device: str = Field("auto", description="auto (cuda if available, else cpu), cpu, cuda or cuda:N",
                        json_schema_extra=EXECUTION)
    batch_size: int = Field(0, ge=0, description="prompts per generate call; 0: 16 on GPU, 8 on CPU (1 with batched_decode off: equal-length buckets only when above 1)",
                            json_schema_extra=EXECUTION)
    batched_decode: bool = Field(True, description="CPU: prefill each prompt alone and decode a batch together from the merged caches; false: one at a time",
                                 json_schema_extra=EXECUTION)
    attn_implementation: str = Field("sdpa", description="transformers attention: sdpa, eager, flash_attention_2",
                                     json_schema_extra=EXECUTION)
    prefix_reuse: bool = Field(True, description="prompts prefilled alone (CPU): keep the KV cache of the prefix a prompt "
                               "shares with the one before it (the schedule declares it) and prefill only the rest; "
                               "false: prefill every prompt whole", json_schema_extra=EXECUTION)
    threads: int = Field(0, ge=0, description="torch CPU threads; 0: the cores not already busy (1-minute load average)",
                         json_schema_extra=EXECUTION)
    max_context: int = Field(0, ge=0, description="override the model's context length (tokens); 0: from its config")
    rope_scaling: dict[str, Any] | str | None = Field(None, description="zero-shot RoPE scaling TYPE:FACTOR (e.g. yarn:4) or a dict")

    _dtype = field_validator("dtype")(lambda v: one_of(v, TORCH_DTYPES))
    _device = field_validator("device")(lambda v: device_name(v))


class VLLMArgs(BackendArgs):
    tensor_parallel_size: int = Field(1, ge=1, description="GPUs per engine (tensor parallel)", json_schema_extra=EXECUTION)
    pipeline_parallel_size: int = Field(1, ge=1, description="pipeline stages per engine", json_schema_extra=EXECUTION)
    data_parallel_size: int = Field(1, ge=1, description="independent engines, each on its own tp x pp GPUs",
                                    json_schema_extra=EXECUTION)
    max_model_len: int = Field(0, ge=0, description="context length; 0: the model's (times the RoPE factor)")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="fraction of GPU memory vLLM may use",
                                          json_schema_extra=EXECUTION)
    enable_prefix_caching: bool = Field(True, description="reuse the KV cache of shared prompt prefixes",
                                        json_schema_extra=EXECUTION)
    enable_chunked_prefill: bool = Field(True, description="split long prefills into chunks", json_schema_extra=EXECUTION)
    rope_scaling: str | dict[str, Any] | None = Field(None, description="TYPE:FACTOR (linear, dynamic, yarn, llama3)")
    hf_overrides: dict[str, Any] | str | None = Field(None, description="a JSON object merged into the HF config")
    dtype: str = Field("auto", description="weights dtype (vLLM's names)")
    max_num_seqs: int = Field(0, ge=0, description="vLLM's max_num_seqs; 0: its default", json_schema_extra=EXECUTION)
    max_num_batched_tokens: int = Field(0, ge=0, description="vLLM's max_num_batched_tokens; 0: its default",
                                        json_schema_extra=EXECUTION)
    enforce_eager: bool = Field(False, description="disable CUDA graphs", json_schema_extra=EXECUTION)
    seed: int = Field(0, description="engine seed (decoding is greedy either way)")
    kv_cache_dtype: str = Field("auto", description="KV cache dtype, e.g. fp8")
    engine_args: dict[str, Any] | str | None = Field(None, description="a JSON object of any other vllm EngineArgs "
                                                     "(e.g. distributed_executor_backend)")
    batch_size: int = Field(512, ge=1, description="requests per generate() call from the runner", json_schema_extra=EXECUTION)

    _dtype = field_validator("dtype")(lambda v: one_of(v, VLLM_DTYPES))


class LMEvalArgs(BaseModel):
    """ctxbench's own keys; every other key is lm-eval's model argument for that model type, passed through
    (lm-eval itself refuses unknown ones, and that refusal is one line too)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    # lm-eval's own keys pass through unchecked: these, wherever given, change only speed (the rule every backend
    # had before each declared its own, so stored lmeval runs keep their ids)
    execution_extras: ClassVar[frozenset[str]] = DEFAULT_EXECUTION_ARGS
    model_type: str = Field("", description="lm-eval model type (hf, vllm, local-completions, ...); or --backend lmeval:<type>")
    tokenizer: str | None = Field(None, description="tokenizer for counting and truncation; default: the model")
    context_length: int = Field(0, ge=0, description="context length; 0: what the lm-eval model states")
    chunk_size: int = Field(64, ge=1, description="requests per generate_until call", json_schema_extra=EXECUTION)


class OpenAIArgs(BackendArgs):
    base_url: str = Field("http://127.0.0.1:8000/v1", description="the server's OpenAI-compatible root, http(s)://host:port/v1")
    api: Literal["completions", "chat"] = Field("completions", description="completions: the exact rendered prompt; chat: messages")
    served_model: str | None = Field(None, description="the model name the server knows; default: --model")
    tokenizer: str | None = Field(None, description="local tokenizer for counting tokens; default: --model")
    api_key_env: str = Field("", description="name of the environment variable that holds the API key (never the key)",
                             json_schema_extra=EXECUTION)
    context_length: int = Field(0, ge=0, description="the model's context; 0: from the server's /models or the local config")
    concurrency: int = Field(8, ge=1, description="requests in flight at once", json_schema_extra=EXECUTION)
    timeout: float = Field(600.0, gt=0, description="seconds to wait for one answer", json_schema_extra=EXECUTION)
    connect_timeout: float = Field(10.0, gt=0, description="seconds to wait for a connection", json_schema_extra=EXECUTION)
    max_retries: int = Field(6, ge=0, description="retries of a timeout, connection error, 429, 5xx or unreadable answer",
                             json_schema_extra=EXECUTION)
    backoff: float = Field(1.0, ge=0, description="first retry delay in seconds (doubled each retry, with jitter)",
                           json_schema_extra=EXECUTION)
    backoff_max: float = Field(60.0, ge=0, description="longest retry delay in seconds", json_schema_extra=EXECUTION)
    rpm: float = Field(0.0, ge=0, description="requests per minute at most; 0: no limit", json_schema_extra=EXECUTION)
    prefill: Literal["auto", "continue", "user"] = Field("auto", description="chat: how the answer prefix is sent (auto probes the server)")
    count_tokens: Literal["local", "server"] = Field("local", description="count prompt tokens locally or with the server's /tokenize")
    prompt_format: Literal["text", "ids"] = Field("text", description="completions: send the prompt as text or as token ids")
    extra_body: dict[str, Any] | None = Field(None, description="a JSON object merged into every request body")
    batch_size: int = Field(0, ge=0, description="requests per generate() call from the runner; 0: 4 x concurrency",
                            json_schema_extra=EXECUTION)
    thinking_switch: bool = Field(True, description="chat with --thinking on/off: send chat_template_kwargs "
                                  "{enable_thinking: ...} (vLLM, SGLang); false for servers that refuse the field")
    reasoning_effort: str | None = Field(None, description="passed as reasoning_effort (gpt-oss, OpenAI reasoning models)")
    cache_control: bool = Field(False, description="chat: mark the prompt prefix each request shares with its neighbours "
                                "(the schedule declares it) with Anthropic-style cache_control breakpoints, for servers that "
                                "cache only there; OpenAI-style servers cache shared prefixes themselves",
                                json_schema_extra=EXECUTION)
    # execution-only: the same request bodies reach the same model, only through the provider's batch queue (half the
    # price where offered), so a run may switch between direct and batch requests and resume either way
    batch_api: bool = Field(False, description="send generation requests as provider batches (OpenAI Batch API: "
                            "/files and /batches); a killed run resumes its submitted batches",
                            json_schema_extra=EXECUTION)
    batch_poll_interval: float = Field(30.0, gt=0, description="seconds between polls of a pending batch (batch_api)",
                                       json_schema_extra=EXECUTION)


def check_backend_args(backend: str, args: dict[str, Any], *, where: str = "") -> None:
    """Refuse a config's unknown backend, or an unknown or ill-typed backend argument, before any work (studies and data
    commands build their backend late, after data and training), against the Args model the backend declared when it
    registered (register("backend", NAME, args=Model): a plugin's too); one that declares none checks when built.
    `where` prefixes the keys in the message, e.g. "study.yaml: eval." gives "study.yaml: eval.backend_args.dtyp: ..."."""
    from ctxbench.harness.core import registry
    from ctxbench.harness.core.backend import parse_backend_args
    from ctxbench.harness.core.errors import ConfigError

    traits = registry.backend_traits(backend, field=f"{where}backend")
    for key, flag in (("model", "--model"), ("truncation", "--truncation")):
        if key in args:
            raise ConfigError(f"{where}backend_args.{key}: set it with {flag}, not as a backend argument")
    model = traits.args
    if model is not None:
        try:
            parsed = parse_backend_args(model, args, backend=backend)
        except ConfigError as e:
            raise ConfigError(f"{where}{e}") from None
        if "device" in args and "device" in model.model_fields:
            check_device(parsed.device, field=f"{where}backend_args.device")


def check_device(device: str, *, field: str = "backend_args.device") -> None:
    """A device that this machine's torch cannot use (`--device cuda` on a CPU-only build) is one line before any
    weights load, instead of a traceback from the first tensor moved there."""
    from ctxbench.harness.core.errors import ConfigError

    kind, _, index = device.partition(":")
    if kind not in ("cuda", "mps"):
        return
    try:
        import torch
    except ImportError:
        return  # no torch at all: the backend's own extras check says which extra to install
    if kind == "mps":
        if not torch.backends.mps.is_available():
            raise ConfigError(f"{field}: {device}: this torch ({torch.__version__}) cannot use an Apple GPU here; use cpu or auto")
        return
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not count:
        build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}, but sees no GPU"
        raise ConfigError(f"{field}: {device}: this torch ({torch.__version__}) is {build}; use cpu or auto, "
                          "or install a CUDA build of torch on a machine with a GPU")
    if index and int(index) >= count:
        raise ConfigError(f"{field}: {device}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}")
