"""OpenAI-compatible HTTP backend (`--backend openai`): vLLM, SGLang, `transformers serve`, llama.cpp, hosted APIs.

Two APIs (`api=`):

* `completions` (default): POST {base_url}/completions with the exact rendered prompt (chat template +
  task text + answer prefix) as `prompt`, so the server sees what the HF backend would feed the model.
  `prompt_format=ids` sends the token ids instead (vLLM, SGLang) so nothing is re-tokenized; prefer it
  there, since vLLM adds the tokenizer's BOS to text prompts (its `add_special_tokens` defaults to true)
  even when the chat template already starts with one (or pass extra_body='{"add_special_tokens": false}').
* `chat`: POST {base_url}/chat/completions with the task text as the user message. The answer prefix is
  sent as a final assistant message that the server continues (`continue_final_message: true,
  add_generation_prompt: false`, as vLLM and SGLang accept) when `prefill=continue`; with `prefill=user`
  it is appended to the user turn instead (servers that cannot continue a message, e.g. `transformers
  serve` 5.x, which rejects unknown fields with 422 and always adds a generation prompt; OpenAI's API).
  `prefill=auto` (default) probes the server once at start-up and records the mode in the run record.

Every request is greedy (temperature 0). Requests run concurrently (`concurrency`) on ONE event loop in a
daemon thread and ONE httpx client (one connection pool) for the backend's lifetime, with an optional
requests-per-minute cap (`rpm`). One retry policy (tenacity) serves every call, start-up probes included:
timeouts, connection errors, 429, 5xx, unreadable responses and well-formed JSON without a completion are
retried with exponential backoff and jitter (`max_retries`, `backoff`, `backoff_max`, honouring
Retry-After); a 4xx other than 429 is that sample's error. A sample that still fails is returned as
Prediction(error=...): the runner records it and a rerun fills it in.

The server is untrusted: every reply is validated against a schema of the fields read (openai_replies.py; a wrong
shape or a non-finite count is retried, then that sample's error), `timeout` bounds each whole answer (connect and
every read), a body over 64 MiB is that sample's error, and an answer longer than the request's budget (a server
ignoring max_tokens) is cut to it and flagged (Prediction.over_budget, the row's `over_budget`).

Lengths are checked before sending, with the local tokenizer (`count_tokens=local`) or the server's
/tokenize endpoint (`count_tokens=server`, vLLM): an over-long prompt is refused or cut in the middle
by the suite's truncation policy, never sent to be cut or rejected silently by the server.

The API key is read from the environment variable named by `api_key_env`; its value never reaches
info(), the run record, logs or error messages. Credentials in `base_url` (user:password@) and authorization
values that a server echoes back are masked the same way (core.redact).
"""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

from ctxbench.harness.backends.args import OpenAIArgs
from ctxbench.harness.backends.http_transport import LoopThread, Permanent, RetryingHTTP, Transient, shutdown
from ctxbench.harness.backends.openai_batch import BatchMode
from ctxbench.harness.backends.openai_prompts import CONTINUE_FIELDS, USER_JOIN, PreparedRequest, PromptBuilding  # noqa: F401
from ctxbench.harness.backends.openai_replies import (
    MAX_COUNT,
    MalformedReply,
    parse_completion,
    parse_prompt_logprobs,
    token_account,
    within_budget,
)
from ctxbench.harness.core.backend import check_window, parse_backend_args
from ctxbench.harness.core.errors import ConfigError, CtxbenchError
from ctxbench.harness.core.extras import require_extra
from ctxbench.harness.core.redact import redact, url_secrets
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import LogprobRequest, Prediction, Request, TokenLogprobs

APIS = ("completions", "chat")
PREFILL_MODES = ("auto", "continue", "user")
BATCH_API_SIZE = 256  # requests per provider batch by default (batch_api=true; a batch file stays far below 200 MB)


@register("backend", "openai", args=OpenAIArgs, samples=True, distributions=("httpx",))
def openai_backend(**kwargs):
    return OpenAIBackend(**kwargs)


def check_arguments(a: OpenAIArgs) -> None:
    """The refusals that need no server: before any connection is opened."""
    refuse_two_credentials(a.base_url, a.api_key_env)
    if a.prompt_format == "ids" and a.api == "chat":
        raise ConfigError("backend_args.prompt_format: ids works with api=completions only")
    if a.cache_control and a.api != "chat":
        raise ConfigError("backend_args.cache_control: breakpoints mark chat messages; use it with api=chat")
    if not a.base_url.startswith(("http://", "https://")):
        raise ConfigError(f"backend_args.base_url: expected http(s)://host:port/v1, got {redact(a.base_url)!r}")


def local_tokenizer(a: OpenAIArgs, spec: str) -> Any:
    """The tokenizer that counts prompt tokens here; chat counting needs its chat template."""
    from ctxbench.harness.core.models import load_tokenizer

    try:
        tokenizer = load_tokenizer(spec)
    except CtxbenchError as e:
        hint = "" if a.tokenizer else "; the model name is not loadable locally, pass --backend-arg tokenizer=<alias, dir or hub id>"
        raise ConfigError(f"backend_args.tokenizer: {e}{hint}") from None
    if a.api == "chat" and a.count_tokens == "local" and not getattr(tokenizer, "chat_template", None):
        raise ConfigError(f"backend_args.tokenizer: {spec!r} has no chat template to count chat prompts with; "
                          "pass the model's tokenizer, or count_tokens=server")
    return tokenizer


def refuse_two_credentials(base_url: str, api_key_env: str) -> None:
    """A request has one Authorization header: URL credentials would be sent as Basic auth and the Bearer key dropped."""
    from urllib.parse import urlsplit

    if api_key_env and (urlsplit(base_url).username or urlsplit(base_url).password):
        raise ConfigError("backend_args.base_url: it carries user:password@ and backend_args.api_key_env sets a Bearer key, "
                          "but a request has one Authorization header; drop the credentials from base_url (Bearer) "
                          "or drop api_key_env (Basic)")


class OpenAIBackend(PromptBuilding, BatchMode, RetryingHTTP):
    name = "openai"

    def __init__(self, *, model: str, truncation: str = "refuse", **kwargs: Any):
        a = parse_backend_args(OpenAIArgs, kwargs, backend="openai")
        require_extra("serve", for_="backend openai")
        import httpx

        check_arguments(a)

        self.model = model
        self.served_model = a.served_model or model
        self.base_url = a.base_url.rstrip("/")
        self.api = a.api
        # prompt logprobs come from completions with echo + logprobs, which vLLM and SGLang serve
        self.capabilities = frozenset({"generate", "chat"} if a.api == "chat" else {"generate", "prompt_logprobs"})
        self.truncation = truncation
        self.concurrency, self.timeout, self.connect_timeout = a.concurrency, a.timeout, a.connect_timeout
        self.max_retries, self.backoff, self.backoff_max, self.rpm = a.max_retries, a.backoff, a.backoff_max, a.rpm
        self.count_tokens = a.count_tokens
        self.prompt_format = a.prompt_format
        self.extra_body = dict(a.extra_body or {})
        self.thinking_switch, self.reasoning_effort = a.thinking_switch, a.reasoning_effort
        self.cache_control = a.cache_control  # breakpoints at the declared shared prefixes (openai_prompts.py)
        self.batch_api, self.batch_poll_interval = a.batch_api, a.batch_poll_interval
        # batch mode: one provider batch per generate() call, so larger calls (each batch waits its turn at the provider)
        self.batch_size = a.batch_size or (BATCH_API_SIZE if a.batch_api else self.concurrency * 4)
        self.api_key_env = a.api_key_env
        self._api_key = ""
        if a.api_key_env:
            self._api_key = os.environ.get(a.api_key_env, "")
            if not self._api_key:
                raise ConfigError(f"backend_args.api_key_env: environment variable {a.api_key_env} is not set or empty")
        self._secrets = [self._api_key, *url_secrets(self.base_url)]

        self.tokenizer_spec = a.tokenizer or model
        self.tokenizer = local_tokenizer(a, self.tokenizer_spec)
        # the clock and sleep of the rate limiter and the retry waits (tests replace them with fake ones)
        self._clock: Callable[[], float] = time.monotonic
        self._sleep: Callable[[float], Coroutine[Any, Any, None]] = asyncio.sleep
        self._next_slot = 0.0
        self._io = LoopThread()
        self._client = self._io.run(self._open(httpx))
        self._finalizer = weakref.finalize(self, shutdown, self._io, self._client)

        self.server_context = self._io.run(self._probe_models())
        self.context_length = a.context_length or self.server_context or self._local_context()
        if not self.context_length:
            raise ConfigError(f"backend_args.context_length: cannot tell the context length of {self.served_model!r} "
                              "from the server or a local config; pass --backend-arg context_length=N")
        self.prefill = a.prefill if a.api == "chat" else "n/a"
        if a.api == "chat" and a.prefill == "auto":
            self.prefill = "continue" if self._io.run(self._probe_continue()) else "user"
        if a.count_tokens == "server":
            self._io.run(self._probe_tokenize())
        if a.batch_api:
            self._io.run(self._probe_batches())

    async def _open(self, httpx) -> Any:
        """The one client (and its pool), the concurrency semaphore and the rate limiter's lock, on the backend's loop."""
        self._sem = asyncio.Semaphore(self.concurrency)
        self._rl_lock = asyncio.Lock()
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        timeout = httpx.Timeout(self.timeout, connect=self.connect_timeout)
        return httpx.AsyncClient(timeout=timeout, limits=limits, headers=self._headers())

    def close(self) -> None:
        """Close the HTTP client and stop the backend's event loop (also done at exit)."""
        self._finalizer()

    # ---------------------------------------------------------------- record

    def info(self) -> dict[str, Any]:
        """What the run record stores. Never the API key (only the name of its variable)."""
        return {
            "model": self.model,
            "served_model": self.served_model,
            "base_url": redact(self.base_url, self._secrets),
            "api": self.api,
            "answer_prefix": {"continue": "continued assistant message", "user": "appended to the user turn",
                              "n/a": "in the raw prompt"}[self.prefill],
            "prefill": self.prefill,
            "tokenizer": self.tokenizer_spec,
            "count_tokens": self.count_tokens,
            "prompt_format": self.prompt_format,
            "context_length": self.context_length,
            "server_context_length": self.server_context,
            "concurrency": self.concurrency,
            "rpm": self.rpm,
            "timeout": self.timeout,
            "max_retries": self.max_retries,
            "api_key_env": self.api_key_env or None,
            "extra_body": self.extra_body,
            "thinking_switch": self.thinking_switch,
            "reasoning_effort": self.reasoning_effort,
            "batch_api": self.batch_api,
            "decoding": "greedy",  # unless the run's protocol samples (record.generation.gen_kwargs)
        }

    # ---------------------------------------------------------------- http helpers

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json"}
        if self._api_key:
            h["Authorization"] = f"Bearer {self._api_key}"
        return h

    # ---------------------------------------------------------------- start-up probes

    async def _probe_models(self) -> int:
        """Check that the server answers; return the model's context length if /models states it (vLLM: max_model_len)."""
        # any answer counts (transformers serve: 500 without a hub cache); only an unreachable server is an error
        status, data = await self._probe("GET", f"{self.base_url}/models", retry_status=False)
        if status in (401, 403):
            raise ConfigError(f"backend_args.api_key_env: the server refused the credentials (HTTP {status})")
        if status >= 400 or not isinstance(data, dict):
            return 0
        models = data.get("data")
        for m in models if isinstance(models, list) else []:  # an untrusted listing: anything else is no listing
            if isinstance(m, dict) and m.get("id") == self.served_model:
                for key in ("max_model_len", "context_length", "context_window", "max_context_length"):
                    if isinstance(m.get(key), int) and 0 < m[key] <= MAX_COUNT:
                        return int(m[key])
        return 0

    def _local_context(self) -> int:
        """The context of the local model config (only when the tokenizer is the model's own)."""
        try:
            from transformers import AutoConfig

            from ctxbench.harness.core.models import materialize, resolve

            config = AutoConfig.from_pretrained(materialize(resolve(self.tokenizer_spec)))
        except Exception:  # noqa: BLE001 - no local config: the caller asks for context_length
            return 0
        return int(getattr(config, "max_position_embeddings", 0) or 0)

    async def _probe_continue(self) -> bool:
        """Whether the server continues a final assistant message (vLLM/SGLang fields); 4xx means it cannot."""
        body = {"model": self.served_model, "max_tokens": 1, "temperature": 0, "stream": False,
                "messages": [{"role": "user", "content": "Say OK."}, {"role": "assistant", "content": "O"}],
                **CONTINUE_FIELDS, **self.extra_body}
        status, data = await self._probe("POST", f"{self.base_url}/chat/completions", body)
        return status < 400 and isinstance(data, dict) and bool(data.get("choices"))

    async def _probe_tokenize(self) -> None:
        status, data = await self._probe("POST", f"{self._root()}/tokenize", {"model": self.served_model, "prompt": "hello"})
        if status >= 400 or not isinstance(data, dict) or "count" not in data:
            raise ConfigError(f"backend_args.count_tokens: the server has no usable {self._root()}/tokenize endpoint "
                              f"(HTTP {status}); use count_tokens=local")

    # ---------------------------------------------------------------- sending

    async def _one(self, p: PreparedRequest) -> Prediction:
        url = f"{self.base_url}/{'chat/completions' if self.api == 'chat' else 'completions'}"
        r = p.request
        start = time.perf_counter()
        timing: list[float] = []
        try:
            answer = await self._call(url, p.body, lambda data: parse_completion(data, self.api), timing)
        except Permanent as e:
            return Prediction(r.sample_id, "", p.prompt_tokens, 0, time.perf_counter() - start, p.truncated, error=str(e))
        except Transient as e:
            return Prediction(r.sample_id, "", p.prompt_tokens, 0, time.perf_counter() - start, p.truncated,
                              error=f"gave up after {self.max_retries + 1} attempts: {e}")
        # a server that ignores max_tokens: cut to the budget here (counted locally where the server gives no count)
        a = within_budget(answer, r.generation_limit, self.tokenizer)
        # the latency of the attempt that answered (retries' waits are not the model's time)
        return Prediction(r.sample_id, a.text, a.prompt_tokens or p.prompt_tokens, a.completion_tokens or 0, timing[-1],
                          p.truncated, reasoning=a.reasoning, over_budget=a.over_budget,
                          **token_account(answer, a))  # cached, reasoning tokens; the server's or counted

    async def _run(self, requests: list[Request]) -> list[Prediction]:
        prepared: list[PreparedRequest | Prediction] = []
        self.plan_breakpoints(requests)
        for r in requests:  # sequential: local tokenization is CPU-bound; PromptTooLongError stops before sending
            try:
                prepared.append(await self._prepare(r))
            except (Permanent, Transient) as e:  # server-side counting failed for this sample
                prepared.append(Prediction(r.sample_id, "", r.prompt_tokens or 0, 0, 0.0, error=f"tokenize: {e}"))
        if self.batch_api:
            return await self._batched(prepared)
        jobs = [self._one(p) if isinstance(p, PreparedRequest) else _done(p) for p in prepared]
        return list(await asyncio.gather(*jobs))

    def generate(self, requests: list[Request]) -> list[Prediction]:
        """Predictions in request order, from the backend's one loop and client (callable from any thread)."""
        if not requests:
            return []
        return self._io.run(self._run(requests))

    # ---------------------------------------------------------------- prompt log-probabilities

    def token_logprobs(self, requests: list[LogprobRequest]) -> list[TokenLogprobs]:
        """log P(ids[i] | ids[:i]) of each window's scored tokens: POST /completions with the token ids as the prompt,
        echo=true, logprobs=1 and one generated token (discarded); the echoed prompt's token_logprobs are read back
        (OpenAI's legacy completions format: null for the first token). A server that echoes no prompt logprobs
        fails that window with an error naming the fix; transport failures are retried as generation's are."""
        for r in requests:
            check_window(r, self.context_length)
        if not requests:
            return []
        return self._io.run(self._logprobs_all(requests))

    async def _logprobs_all(self, requests: list[LogprobRequest]) -> list[TokenLogprobs]:
        return list(await asyncio.gather(*(self._logprobs_one(r) for r in requests)))

    async def _logprobs_one(self, r: LogprobRequest) -> TokenLogprobs:
        body = {"model": self.served_model, "prompt": list(r.token_ids), "max_tokens": 1, "temperature": 0, "echo": True,
                "logprobs": 1, "stream": False, **self.extra_body}
        start = time.perf_counter()
        try:
            data = await self._call(f"{self.base_url}/completions", body)
        except (Permanent, Transient) as e:
            return TokenLogprobs(r.sample_id, (), time.perf_counter() - start, error=str(e))
        seconds = time.perf_counter() - start
        try:
            found = parse_prompt_logprobs(data, len(r.token_ids))
        except MalformedReply as e:
            return TokenLogprobs(r.sample_id, (), seconds, error=self._clean(e))
        if found is None:
            return TokenLogprobs(r.sample_id, (), seconds, error="no prompt logprobs: the server must echo the prompt's "
                                 "token_logprobs for completions with echo=true and logprobs (vLLM and SGLang do)")
        return TokenLogprobs(r.sample_id, tuple(float(x) for x in found[r.score_from: len(r.token_ids)]), seconds)


async def _done(p: Prediction) -> Prediction:
    return p
