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

Lengths are checked before sending, with the local tokenizer (`count_tokens=local`) or the server's
/tokenize endpoint (`count_tokens=server`, vLLM): an over-long prompt is refused or cut in the middle
by the suite's truncation policy, never sent to be cut or rejected silently by the server.

The API key is read from the environment variable named by `api_key_env`; its value never reaches
info(), the run record, logs or error messages. Credentials in `base_url` (user:password@) and authorization
values that a server echoes back are masked the same way (core.redact).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
import weakref
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from ctxbench.harness.backends.args import OpenAIArgs
from ctxbench.harness.backends.http_transport import LoopThread, Permanent, RetryingHTTP, Transient, shutdown
from ctxbench.harness.core.backend import apply_truncation, check_window, parse_backend_args
from ctxbench.harness.core.errors import ConfigError, CtxbenchError, PromptTooLongError
from ctxbench.harness.core.extras import require_extra
from ctxbench.harness.core.redact import redact, url_secrets
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import LogprobRequest, Prediction, Request, TokenLogprobs

APIS = ("completions", "chat")
PREFILL_MODES = ("auto", "continue", "user")
CONTINUE_FIELDS = {"continue_final_message": True, "add_generation_prompt": False}
USER_JOIN = "\n"  # user-turn mode: user_text + USER_JOIN + answer prefix (stripped)


@register("backend", "openai")
def openai_backend(**kwargs):
    return OpenAIBackend(**kwargs)


def refuse_two_credentials(base_url: str, api_key_env: str) -> None:
    """A request has one Authorization header: URL credentials would be sent as Basic auth and the Bearer key dropped."""
    from urllib.parse import urlsplit

    if api_key_env and (urlsplit(base_url).username or urlsplit(base_url).password):
        raise ConfigError("backend_args.base_url: it carries user:password@ and backend_args.api_key_env sets a Bearer key, "
                          "but a request has one Authorization header; drop the credentials from base_url (Bearer) "
                          "or drop api_key_env (Basic)")


@dataclass
class _Prepared:
    request: Request
    body: dict[str, Any]
    prompt_tokens: int
    truncated: int


class OpenAIBackend(RetryingHTTP):
    name = "openai"

    def __init__(self, *, model: str, truncation: str = "refuse", **kwargs: Any):
        a = parse_backend_args(OpenAIArgs, kwargs, backend="openai")
        require_extra("serve", for_="backend openai")
        import httpx

        refuse_two_credentials(a.base_url, a.api_key_env)
        if a.prompt_format == "ids" and a.api == "chat":
            raise ConfigError("backend_args.prompt_format: ids works with api=completions only")
        if not a.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"backend_args.base_url: expected http(s)://host:port/v1, got {redact(a.base_url)!r}")

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
        self.batch_size = a.batch_size or self.concurrency * 4
        self.api_key_env = a.api_key_env
        self._api_key = ""
        if a.api_key_env:
            self._api_key = os.environ.get(a.api_key_env, "")
            if not self._api_key:
                raise ConfigError(f"backend_args.api_key_env: environment variable {a.api_key_env} is not set or empty")
        self._secrets = [self._api_key, *url_secrets(self.base_url)]

        from ctxbench.harness.core.models import load_tokenizer

        self.tokenizer_spec = a.tokenizer or model
        try:
            self.tokenizer = load_tokenizer(self.tokenizer_spec)
        except CtxbenchError as e:
            hint = "" if a.tokenizer else "; the model name is not loadable locally, pass --backend-arg tokenizer=<alias, dir or hub id>"
            raise ConfigError(f"backend_args.tokenizer: {e}{hint}") from None

        if a.api == "chat" and a.count_tokens == "local" and not getattr(self.tokenizer, "chat_template", None):
            raise ConfigError(f"backend_args.tokenizer: {self.tokenizer_spec!r} has no chat template to count chat prompts with; "
                              "pass the model's tokenizer, or count_tokens=server")
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
        for m in data.get("data") or []:
            if isinstance(m, dict) and m.get("id") == self.served_model:
                for key in ("max_model_len", "context_length", "context_window", "max_context_length"):
                    if isinstance(m.get(key), int) and m[key] > 0:
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

    # ---------------------------------------------------------------- request building

    def _messages(self, r: Request) -> list[dict[str, str]]:
        user = r.user_text or r.prompt
        system = [{"role": "system", "content": r.system_prompt}] if r.system_prompt is not None else []
        system += [{"role": role, "content": content} for role, content in r.turns]  # a conversation's earlier turns
        if not r.answer_prefix:
            return [*system, {"role": "user", "content": user}]
        if self.prefill == "continue":
            return [*system, {"role": "user", "content": user}, {"role": "assistant", "content": r.answer_prefix}]
        return [*system, {"role": "user", "content": user + USER_JOIN + r.answer_prefix.strip()}]

    def _protocol(self, r: Request) -> dict[str, Any]:
        """Body fields of the run's protocol: sampling (else greedy), the thinking switch passed through (chat: the
        server applies the template), reasoning effort, and the generation limit (answer + thinking budget)."""
        sampling = dict(r.sampling)
        body: dict[str, Any] = {"max_tokens": r.generation_limit, "temperature": sampling.pop("temperature", 0), **sampling}
        if "seed" in body:
            body["seed"] = int(body["seed"]) + r.repeat  # each repeat its own draw, reproducibly
        kwargs = dict(r.template_kwargs)
        if self.api == "chat" and self.thinking_switch and (r.thinking or "enable_thinking" in kwargs):
            kwargs["enable_thinking"] = r.thinking
        if self.api == "chat" and kwargs and self.thinking_switch:
            body["chat_template_kwargs"] = kwargs
        if self.reasoning_effort:
            body["reasoning_effort"] = self.reasoning_effort
        return body

    def _continuing(self, r: Request) -> bool:
        return self.api == "chat" and self.prefill == "continue" and bool(r.answer_prefix)

    def _local_chat_ids(self, messages: list[dict[str, str]], continuing: bool, template_kwargs=()) -> list[int]:
        out = self.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=not continuing,
                                                 continue_final_message=continuing, **dict(template_kwargs))
        if isinstance(out, dict) or hasattr(out, "keys"):
            out = out["input_ids"]
        return list(out)

    async def _count(self, r: Request, messages: list[dict] | None, prompt: str) -> tuple[int, list[int] | None]:
        """(token count, ids if cheaply known). Server counting asks /tokenize; local counting the local tokenizer."""
        if self.count_tokens == "server":
            payload: dict[str, Any] = {"model": self.served_model}
            if messages is None:
                payload.update(prompt=prompt, add_special_tokens=r.add_special_tokens)
            else:
                cont = self._continuing(r)
                payload.update(messages=messages, add_generation_prompt=not cont, continue_final_message=cont)
            data = await self._call(f"{self._root()}/tokenize", payload)
            ids = data.get("tokens")
            return int(data["count"]), (list(ids) if isinstance(ids, list) else None)
        if messages is None:
            if r.prompt_tokens is not None and self.prompt_format == "text":
                return int(r.prompt_tokens), None  # counted by this tokenizer when the sample was generated
            ids = self.tokenizer(prompt, add_special_tokens=r.add_special_tokens)["input_ids"]
            return len(ids), ids
        ids = self._local_chat_ids(messages, self._continuing(r), r.template_kwargs)
        return len(ids), ids

    async def _prepare(self, r: Request) -> _Prepared:
        """Body for one request, after the length check (refuse raises PromptTooLongError; middle cuts, recorded)."""
        limit = self.context_length - r.generation_limit
        body: dict[str, Any] = {"model": self.served_model, **self._protocol(r), "stream": False}
        if self.api == "completions":
            n, ids = await self._count(r, None, r.prompt)
            truncated = 0
            if n > limit or self.prompt_format == "ids":
                if ids is None or (self.count_tokens == "server" and self.prompt_format == "text"):
                    ids = self.tokenizer(r.prompt, add_special_tokens=r.add_special_tokens)["input_ids"]
                ids, truncated = apply_truncation(list(ids), max_new_tokens=r.generation_limit, context_length=self.context_length,
                                                  policy=self.truncation, sample_id=r.sample_id)
                n = len(ids)
            if self.prompt_format == "ids":
                body["prompt"] = list(ids)
            elif truncated:
                body["prompt"], n = self._fit_text(r, limit)
                truncated = max(truncated, len(self.tokenizer(r.prompt, add_special_tokens=r.add_special_tokens)["input_ids"]) - n)
            else:
                body["prompt"] = r.prompt
            body.update(self.extra_body)
            return _Prepared(r, body, n, truncated)

        if not r.user_text:
            raise ConfigError(f"backend_args.api: chat needs samples that carry their user text; {r.sample_id} has none "
                              "(samples from an older ctxbench): regenerate them, or use api=completions")
        messages = self._messages(r)
        n, _ = await self._count(r, messages, "")
        truncated = 0
        if n > limit:
            # refuse, or cut the middle of the task text until the whole chat fits
            if self.truncation != "middle":
                apply_truncation(range(n), max_new_tokens=r.generation_limit, context_length=self.context_length,
                                 policy=self.truncation, sample_id=r.sample_id)  # raises PromptTooLongError
            original = n
            user_ids = self.tokenizer(r.user_text or r.prompt, add_special_tokens=False)["input_ids"]
            over = n - limit
            for _ in range(4):
                keep = max(len(user_ids) - over, 0)
                cut_ids, _ = apply_truncation(user_ids, max_new_tokens=0, context_length=keep, policy="middle", sample_id=r.sample_id)
                cut_req = dataclasses.replace(r, prompt_tokens=None, user_text=self.tokenizer.decode(cut_ids))
                messages = self._messages(cut_req)
                n, _ = await self._count(cut_req, messages, "")
                if n <= limit:
                    break
                over += n - limit
            else:
                raise PromptTooLongError(f"{r.sample_id}: cannot cut the chat prompt below {limit} tokens")
            truncated = original - n
        body["messages"] = messages
        if self._continuing(r):
            body.update(CONTINUE_FIELDS)
        body.update(self.extra_body)
        return _Prepared(r, body, n, truncated)

    def _fit_text(self, r: Request, limit: int) -> tuple[str, int]:
        """The prompt with its middle cut, as text that re-tokenizes to at most limit tokens (and that count).

        Decoding a cut and tokenizing it again can merge tokens differently at the cut, so check and cut more.
        Special tokens the tokenizer adds itself (BOS of plain templates) are left to the server to add.
        """
        special = len(self.tokenizer("", add_special_tokens=r.add_special_tokens)["input_ids"])
        ids = self.tokenizer(r.prompt, add_special_tokens=False)["input_ids"]
        keep = limit - special
        for _ in range(4):
            ids, _ = apply_truncation(ids, max_new_tokens=0, context_length=keep, policy="middle", sample_id=r.sample_id)
            text = self.tokenizer.decode(ids)
            n = len(self.tokenizer(text, add_special_tokens=r.add_special_tokens)["input_ids"])
            if n <= limit:
                return text, n
            keep -= n - limit
        raise PromptTooLongError(f"{r.sample_id}: cannot cut the prompt below {limit} tokens as text; use prompt_format=ids")

    # ---------------------------------------------------------------- sending

    def _parse(self, data: dict[str, Any]) -> tuple[str, int | None, int | None, str | None, int | None]:
        """(text, completion tokens, prompt tokens, reasoning, reasoning tokens) from a (chat) completion response;
        reasoning is what the server returned apart (vLLM/SGLang `reasoning_content`, others `reasoning`)."""
        choice = data["choices"][0]
        reasoning = None
        if self.api == "chat":
            message = choice.get("message") or {}
            text = message.get("content")
            reasoning = message.get("reasoning_content") or message.get("reasoning")
        else:
            text = choice.get("text")
        if text is None:
            text = ""
        if not isinstance(text, str):
            raise TypeError("text is not a string")
        usage = data.get("usage") or {}
        ct, pt = usage.get("completion_tokens"), usage.get("prompt_tokens")
        rt = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
        return (text, (int(ct) if ct is not None else None), (int(pt) if pt is not None else None),
                reasoning if isinstance(reasoning, str) else None, (int(rt) if isinstance(rt, int) and reasoning else None))

    async def _one(self, p: _Prepared) -> Prediction:
        url = f"{self.base_url}/{'chat/completions' if self.api == 'chat' else 'completions'}"
        r = p.request
        start = time.perf_counter()
        timing: list[float] = []
        try:
            text, completion_tokens, server_prompt_tokens, reasoning, reasoning_tokens = await self._call(
                url, p.body, self._parse, timing)
        except Permanent as e:
            return Prediction(r.sample_id, "", p.prompt_tokens, 0, time.perf_counter() - start, p.truncated, error=str(e))
        except Transient as e:
            return Prediction(r.sample_id, "", p.prompt_tokens, 0, time.perf_counter() - start, p.truncated,
                              error=f"gave up after {self.max_retries + 1} attempts: {e}")
        if completion_tokens is None:  # servers without usage: count locally
            completion_tokens = len(self.tokenizer((reasoning or "") + text, add_special_tokens=False)["input_ids"])
        # the latency of the attempt that answered (retries' waits are not the model's time)
        return Prediction(r.sample_id, text, server_prompt_tokens or p.prompt_tokens, completion_tokens, timing[-1], p.truncated,
                          reasoning=reasoning, reasoning_tokens=reasoning_tokens)

    async def _run(self, requests: list[Request]) -> list[Prediction]:
        prepared: list[_Prepared | Prediction] = []
        for r in requests:  # sequential: local tokenization is CPU-bound; PromptTooLongError stops before sending
            try:
                prepared.append(await self._prepare(r))
            except (Permanent, Transient) as e:  # server-side counting failed for this sample
                prepared.append(Prediction(r.sample_id, "", r.prompt_tokens or 0, 0, 0.0, error=f"tokenize: {e}"))
        jobs = [self._one(p) if isinstance(p, _Prepared) else _done(p) for p in prepared]
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
            found = data["choices"][0]["logprobs"]["token_logprobs"]
        except (KeyError, IndexError, TypeError):
            found = None
        if not isinstance(found, list) or len(found) < len(r.token_ids):
            return TokenLogprobs(r.sample_id, (), seconds, error="no prompt logprobs: the server must echo the prompt's "
                                 "token_logprobs for completions with echo=true and logprobs (vLLM and SGLang do)")
        return TokenLogprobs(r.sample_id, tuple(float(x) for x in found[r.score_from: len(r.token_ids)]), seconds)


async def _done(p: Prediction) -> Prediction:
    return p
