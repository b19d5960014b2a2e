"""HTTP transport for the OpenAI-compatible backend: one event loop in a daemon thread, one retry policy.

Split from openai_compat.py so that the request building stays readable there. `RetryingHTTP` is a mixin: the
backend sets the attributes it reads (base_url, max_retries, backoff, backoff_max, rpm, timeout, _secrets, and on
its loop _client, _sem, _rl_lock; _clock and _sleep, which tests replace with fake ones).

The server is not trusted: `timeout` is a deadline for each whole answer (connect, headers and every byte of the
body), not for each read, so a server that trickles bytes or never stops fails the attempt; a body over
MAX_REPLY_BYTES is refused unread; a reply of another shape than the schema (openai_replies.py) is retried.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

from ctxbench.harness.backends.openai_replies import MalformedReply
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.redact import redact

MAX_REPLY_BYTES = 64 * 2 ** 20  # a reply body larger than this is refused unread: no answer within a budget is so long
# headers that describe the body as sent, not as read back (httpx has decoded it already)
DECODED_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class Transient(Exception):
    """A transient failure: retry after a backoff (delay: the server's Retry-After, if any)."""

    def __init__(self, msg: str, delay: float | None = None):
        super().__init__(msg)
        self.delay = delay


class Permanent(Exception):
    """A permanent failure for this sample (a 4xx other than 429)."""


class LoopThread:
    """One asyncio event loop in a daemon thread, for a backend's lifetime: its client, connection pool, semaphore
    and rate limiter live there. Synchronous callers submit coroutines and wait; Ctrl-C cancels what is in flight."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="ctxbench-openai", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise


def shutdown(io: LoopThread, client: Any) -> None:
    """Close the client on its loop, then stop the loop (at close(), garbage collection or interpreter exit)."""
    if not io.loop.is_running():
        return
    if threading.current_thread() is io.thread:  # the last reference died on the loop itself: close without waiting
        async def close_then_stop() -> None:
            await client.aclose()
            io.loop.stop()

        io.loop.create_task(close_then_stop())
        return
    try:
        asyncio.run_coroutine_threadsafe(client.aclose(), io.loop).result(timeout=5)
    except Exception:  # noqa: BLE001 - best effort while shutting down
        pass
    io.loop.call_soon_threadsafe(io.loop.stop)
    io.thread.join(timeout=5)


class RetryingHTTP:
    """Calls under the one retry policy (tenacity), rate-limited; error text cleaned of secrets."""

    def _clean(self, text: Any) -> str:
        """Error text safe to record: no key, no URL credentials, no echoed authorization, one line, bounded."""
        return redact(" ".join(str(text).split()), self._secrets)[:300]

    def _root(self) -> str:
        """Server root (vLLM serves /tokenize there, not under /v1)."""
        return self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url

    # ---------------------------------------------------------------- the one retry policy

    def _delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Exponential backoff with full jitter, at least the server's Retry-After, at most backoff_max."""
        base = min(self.backoff_max, self.backoff * (2 ** attempt))
        d = base / 2 + random.uniform(0, base / 2)
        if retry_after is not None:
            d = max(d, retry_after)
        return min(d, self.backoff_max) if self.backoff_max else d

    def _retrying(self):
        """Up to max_retries + 1 attempts of anything that raises Transient; waits per _delay; the last Transient re-raised."""
        from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

        def wait(state) -> float:
            return self._delay(state.attempt_number - 1, getattr(state.outcome.exception(), "delay", None))

        return AsyncRetrying(stop=stop_after_attempt(self.max_retries + 1), wait=wait, reraise=True,
                             retry=retry_if_exception_type(Transient), sleep=lambda d: self._sleep(d))

    async def _request(self, method: str, url: str, body: dict | None = None, *, probe: bool = False,
                       retry_status: bool = True, parse: Callable[[dict[str, Any]], Any] | None = None,
                       timing: list[float] | None = None) -> Any:
        """One HTTP call under the retry policy: timeouts, connection errors and (retry_status) 429/5xx are retried.

        probe=False (requests of samples): rate-limited; unreadable or non-object JSON is retried, another 4xx
        raises Permanent; returns parse(data) (a parse error is retried too); `timing` gets each attempt's seconds.
        probe=True (start-up): the HTTP answer counts whatever its status (but 429/5xx with retry_status); a
        2xx/3xx whose body is not JSON is retried; returns (status, parsed JSON or None).
        """
        async for attempt in self._retrying():
            with attempt:
                return await self._exchange(method, url, body, probe, retry_status, parse, timing)
        raise Transient("no attempt made")  # unreachable: reraise=True ends the loop with the last error

    async def _exchange(self, method: str, url: str, body: dict | None, probe: bool, retry_status: bool, parse,
                        timing: list[float] | None = None) -> Any:
        if not probe:
            await self._throttle()
        async with self._sem:
            t0 = time.perf_counter()
            resp = await self._whole_answer(method, url, body)
            if timing is not None:
                timing.append(time.perf_counter() - t0)
        status = resp.status_code
        if retry_status and (status == 429 or status >= 500):
            raise Transient(f"HTTP {status}: {self._clean(resp.text)}", retry_after_seconds(resp))
        if probe:
            try:
                return status, resp.json()
            except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
                if status < 400 and retry_status:
                    raise Transient("unreadable JSON response") from None
                return status, None
        if status >= 400:
            raise Permanent(f"HTTP {status}: {self._clean(detail(resp))}")
        try:
            data = resp.json()
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            raise Transient(f"unreadable JSON in a {status} response ({len(resp.content)} bytes)") from None
        if not isinstance(data, dict):
            raise Transient(f"unexpected JSON in a {status} response")
        if parse is None:
            return data
        try:
            return parse(data)
        except MalformedReply as e:  # well-formed JSON of another shape than ctxbench reads (schema: openai_replies.py)
            raise Transient(self._clean(e)) from None
        except (KeyError, IndexError, TypeError, ValueError) as e:  # a parse of its own (tests, plugins)
            raise Transient(f"malformed completion response: {type(e).__name__}: {self._clean(e)}") from None

    async def _whole_answer(self, method: str, url: str, body: dict | None) -> Any:
        """The whole answer (connect, headers and every byte of the body) within one deadline of `timeout` seconds,
        and at most MAX_REPLY_BYTES of it: a server that trickles bytes, or never stops, fails the attempt."""
        import httpx

        try:
            if sys.version_info < (3, 11):
                return await asyncio.wait_for(self._read_capped(method, url, body), self.timeout)
            async with asyncio.timeout(self.timeout):  # in this task: sent as soon as the rate limiter allows
                return await self._read_capped(method, url, body)
        except asyncio.TimeoutError:
            raise Transient(f"timed out after {self.timeout:g}s (the deadline for a whole answer)") from None
        except httpx.TimeoutException:
            raise Transient(f"timed out after {self.timeout:g}s") from None
        except httpx.TransportError as e:
            raise Transient(f"connection error ({type(e).__name__}: {self._clean(e)})") from None

    async def _read_capped(self, method: str, url: str, body: dict | None) -> Any:
        import httpx

        async with self._client.stream(method, url, json=body) as resp:
            announced = resp.headers.get("content-length", "")
            if announced.isdigit() and int(announced) > MAX_REPLY_BYTES:
                raise Permanent(oversized(int(announced)))
            chunks, size = [], 0
            async for chunk in resp.aiter_bytes():
                size += len(chunk)
                if size > MAX_REPLY_BYTES:
                    raise Permanent(oversized(size))
                chunks.append(chunk)
        headers = [(k, v) for k, v in resp.headers.items() if k.lower() not in DECODED_HEADERS]
        return httpx.Response(resp.status_code, headers=headers, content=b"".join(chunks), request=resp.request)

    async def _probe(self, method: str, url: str, body: dict | None = None, *, retry_status: bool = True) -> tuple[int, Any]:
        """A start-up call: (status, JSON or None); ConfigError (one line) when the server cannot be reached."""
        try:
            return await self._request(method, url, body, probe=True, retry_status=retry_status)
        except (Transient, Permanent) as e:
            raise ConfigError(f"backend_args.base_url: no usable answer from {self._clean(url)} after {self.max_retries + 1} "
                              f"tries ({self._clean(e)}); is the server running?") from None

    async def _throttle(self) -> None:
        """At most rpm requests a minute: each takes the next slot, 60/rpm seconds after the previous one."""
        if not self.rpm:
            return
        async with self._rl_lock:
            now = self._clock()
            wait = self._next_slot - now
            self._next_slot = max(now, self._next_slot) + 60.0 / self.rpm
        if wait > 0:
            await self._sleep(wait)

    async def _call(self, url: str, body: dict[str, Any], parse: Callable[[dict[str, Any]], Any] | None = None,
                    timing: list[float] | None = None) -> Any:
        """POST with the retry policy; parse(JSON object) or the object. Raises Permanent (4xx) or Transient (retries used up)."""
        return await self._request("POST", url, body, parse=parse, timing=timing)


def oversized(size: int) -> str:
    return f"reply of {size} bytes or more, over the limit of {MAX_REPLY_BYTES // 2 ** 20} MiB (a server ignoring max_tokens?)"


def retry_after_seconds(resp) -> float | None:
    value = resp.headers.get("retry-after")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return max(0.0, seconds) if math.isfinite(seconds) else None  # "inf" or "nan" would wait forever


def detail(resp) -> str:
    try:
        data = resp.json()
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return resp.text
    if isinstance(data, dict):
        err = data.get("error") or data.get("detail") or data.get("message")
        if isinstance(err, dict):
            err = err.get("message") or json.dumps(err)
        if err:
            return str(err)
    return json.dumps(data)
