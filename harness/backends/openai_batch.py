"""Batch mode of the OpenAI-compatible backend (`--backend-arg batch_api=true`): the OpenAI Batch API, which many
providers bill at half the price of direct requests.

Each generate() call becomes one batch: the prepared request bodies are uploaded as a JSONL file (POST /files,
purpose=batch), a batch is created over it (POST /batches, endpoint /v1/completions or /v1/chat/completions), polled
every `batch_poll_interval` seconds (GET /batches/{id}) until it ends, and its output and error files are read back
(GET /files/{id}/content) and mapped custom_id -> sample. A request the batch answered with an error, or did not
answer (failed, expired or cancelled batch), is that sample's error row, which a rerun retries.

A killed run pays for nothing twice. Every step is written to a journal before the next one can cost anything: the
uploaded file and its custom ids before the batch is created, the batch id as soon as it exists, and the custom ids
whose answers were handed to the runner. The journal lives in the cache ($CTXBENCH_CACHE/openai_batches), one file
per server and model: the backend does not know its run directory, and a custom id is a hash of the sample id, the
endpoint and the whole request body, so a rerun asks for exactly the ids it asked for before. On a rerun a request
whose batch is pending or done (and not yet collected) is polled and read, never sent again; an uploaded file whose
batch was never recorded is found again among the server's batches (GET /batches) or, if none was created, turned
into one. The one window left is between handing answers to the runner and the runner storing them (milliseconds).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ctxbench.harness.backends.http_transport import (
    DECODED_HEADERS,
    MAX_REPLY_BYTES,
    Permanent,
    Transient,
    detail,
    retry_after_seconds,
)
from ctxbench.harness.backends.openai_prompts import PreparedRequest
from ctxbench.harness.backends.openai_replies import MalformedReply, parse_completion, token_account, within_budget
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.redact import redact
from ctxbench.harness.core.types import Prediction

ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
MAX_FILE_BYTES = 16 * MAX_REPLY_BYTES  # an output file holds a whole batch's answers
POLL_DEADLINE_S = 25 * 3600  # a batch's window is 24 h; past that a server that still says "in_progress" is not believed


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _Counts(_Lenient):
    total: int = 0
    completed: int = 0
    failed: int = 0


class Batch(_Lenient):
    """The fields of a batch object that are read (an untrusted server: anything else is a malformed reply)."""

    id: str
    status: str
    input_file_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    request_counts: _Counts | None = None
    errors: Any = None


def custom_id(p: PreparedRequest, endpoint: str) -> str:
    """The request's id in a batch: the same sample with the same body is the same id in every run (resume finds it)."""
    text = json.dumps([p.request.sample_id, endpoint, p.body], sort_keys=True)
    return "ctxbench-" + hashlib.sha256(text.encode()).hexdigest()[:32]


def journal_path(base_url: str, served_model: str) -> Path:
    from ctxbench.harness.core.models import cache_dir

    key = hashlib.sha256(json.dumps([redact(base_url), served_model]).encode()).hexdigest()[:16]
    return cache_dir("openai_batches") / f"{key}.jsonl"


class Journal:
    """Append-only JSONL of what was paid for: {uploaded: file, ids}, {submitted: file, batch}, {collected: ids}."""

    def __init__(self, path: Path):
        self.path = path

    def write(self, event: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(event) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def live(self) -> tuple[dict[str, str], dict[str, str]]:
        """(custom id -> its uploaded file, for ids not yet collected; file -> its batch, where one was recorded)."""
        file_of: dict[str, str] = {}
        batch_of: dict[str, str] = {}
        lines = self.path.read_text(encoding="utf-8").splitlines() if self.path.exists() else []
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:  # a line torn by a kill mid-write: the step after it never happened
                continue
            if "uploaded" in event:
                file_of.update(dict.fromkeys(event["ids"], event["uploaded"]))
            elif "submitted" in event:
                batch_of[event["submitted"]] = event["batch"]
            elif "collected" in event:
                for i in event["collected"]:
                    file_of.pop(i, None)
        return file_of, batch_of


class BatchMode:
    """The batch path of OpenAIBackend (a mixin: it uses the backend's client, retry policy and settings)."""

    async def _probe_batches(self) -> None:
        """A server without the Batch API is refused at start-up, in one line."""
        status, data = await self._probe("GET", f"{self.base_url}/batches?limit=1", retry_status=False)
        if status >= 400 or not isinstance(data, dict) or not isinstance(data.get("data"), list):
            raise ConfigError(f"backend_args.batch_api: {redact(self.base_url, self._secrets)} has no OpenAI Batch API "
                              f"(GET /batches answered HTTP {status}); drop batch_api=true to send requests directly")

    async def _batched(self, prepared: list[PreparedRequest | Prediction]) -> list[Prediction]:
        """Predictions in order: journaled requests from their batches, the rest submitted as one new batch. A batch
        that cannot be submitted or read makes error rows (kept in the journal where a rerun can still resume it)."""
        journal = Journal(journal_path(self.base_url, self.served_model))
        ids = {i: custom_id(p, ENDPOINTS[self.api]) for i, p in enumerate(prepared) if isinstance(p, PreparedRequest)}
        start = time.perf_counter()
        try:
            results = await self._submit_and_read(prepared, ids, journal)
        except (Permanent, Transient) as e:
            if isinstance(e, Permanent):  # refused by the server: a rerun starts these requests over
                journal.write({"collected": sorted(ids.values())})
            why = self._clean(e) if isinstance(e, Permanent) else f"gave up after {self.max_retries + 1} attempts: {self._clean(e)}"
            results = dict.fromkeys(ids.values(), why)
            return [p if isinstance(p, Prediction) else self._batch_prediction(p, results[ids[i]], 0.0)
                    for i, p in enumerate(prepared)]
        share = (time.perf_counter() - start) / max(len(ids), 1)
        out = [p if isinstance(p, Prediction) else self._batch_prediction(p, results.get(ids[i]), share)
               for i, p in enumerate(prepared)]
        journal.write({"collected": sorted(ids.values())})  # handed to the runner, which stores them next
        return out

    async def _submit_and_read(self, prepared, ids: dict[int, str], journal: Journal) -> dict[str, Any]:
        """custom id -> completion body or error text. Never uploads an id whose batch the journal holds."""
        file_of, batch_of = journal.live()
        fresh = [i for i, cid in ids.items() if cid not in file_of]
        uploaded = await self._upload(prepared, fresh, ids, journal) if fresh else ""
        file_of.update(dict.fromkeys((ids[i] for i in fresh), uploaded))
        members: dict[str, set[str]] = {}
        for cid in ids.values():
            members.setdefault(file_of[cid], set()).add(cid)
        batches = {f: batch_of.get(f) or await self._create(f, ENDPOINTS[self.api], journal, adopt=f != uploaded)
                   for f in sorted(members)}
        ended = await self._await_batches(sorted(batches.values()))
        results: dict[str, Any] = {}
        for f, batch_id in batches.items():
            results.update(await self._read_results(ended[batch_id], members[f]))
        return results

    async def _upload(self, prepared, fresh: list[int], ids: dict[int, str], journal: Journal) -> str:
        lines = [json.dumps({"custom_id": ids[i], "method": "POST", "url": ENDPOINTS[self.api], "body": prepared[i].body})
                 for i in fresh]
        boundary = uuid.uuid4().hex
        content = (f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--{boundary}\r\n'
                   f'Content-Disposition: form-data; name="file"; filename="ctxbench-batch.jsonl"\r\n'
                   f"Content-Type: application/jsonl\r\n\r\n").encode() + "\n".join(lines).encode() + \
            f"\r\n--{boundary}--\r\n".encode()
        reply = await self._http("POST", f"{self.base_url}/files", content=content,
                                 headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
        file_id = reply.get("id")
        if not isinstance(file_id, str) or not file_id:
            raise Permanent("malformed file upload response: id: missing")
        journal.write({"uploaded": file_id, "ids": [ids[i] for i in fresh]})
        return file_id

    async def _create(self, file_id: str, endpoint: str, journal: Journal, *, adopt: bool) -> str:
        """The batch over an uploaded file: one the server already has for it (`adopt`: a file of a run killed before
        it recorded its batch), or a new one. Recorded at once."""
        batch_id = await self._existing(file_id) if adopt else None
        body = {"input_file_id": file_id, "endpoint": endpoint, "completion_window": "24h", "metadata": {"source": "ctxbench"}}
        attempt = 0
        while batch_id is None:
            try:  # creating is the one call that is paid for: never retried blindly (the reply may be lost, not the batch)
                batch_id = _batch(await self._http_once("POST", f"{self.base_url}/batches", body, None, None, False)).id
            except Transient as e:
                batch_id = await self._existing(file_id)
                if batch_id is None and attempt >= self.max_retries:
                    raise
                if batch_id is None:
                    await self._sleep(self._delay(attempt, e.delay))
                attempt += 1
        journal.write({"submitted": file_id, "batch": batch_id})
        return batch_id

    async def _existing(self, file_id: str) -> str | None:
        """The id of a batch the server already runs over this file (GET /batches), else None."""
        listing = await self._http("GET", f"{self.base_url}/batches?limit=100")
        found = [b.get("id") for b in listing.get("data") or [] if isinstance(b, dict) and b.get("input_file_id") == file_id]
        return found[0] if found and isinstance(found[0], str) else None

    async def _await_batches(self, batch_ids: list[str]) -> dict[str, Batch]:
        """Poll every `batch_poll_interval` seconds until each batch has ended (a line whenever one changes)."""
        pending, ended, shown = set(batch_ids), {}, {}
        deadline = self._clock() + POLL_DEADLINE_S
        while pending:
            for batch_id in sorted(pending):
                batch = await self._http("GET", f"{self.base_url}/batches/{batch_id}", parse=_batch)
                self._show(batch, shown)
                if batch.status in TERMINAL:
                    ended[batch_id] = batch
                    pending.discard(batch_id)
            if pending and self._clock() > deadline:
                raise Transient(f"batches {', '.join(sorted(pending))} still pending after {POLL_DEADLINE_S // 3600} h; "
                                "rerun to poll them again")
            if pending:
                await self._sleep(self.batch_poll_interval)
        return ended

    def _show(self, batch: Batch, shown: dict[str, str]) -> None:
        counts = batch.request_counts or _Counts()
        line = f"batch {batch.id}: {batch.status}, {counts.completed + counts.failed}/{counts.total} requests done"
        if shown.get(batch.id) != line:
            shown[batch.id] = line
            from rich.console import Console

            Console(stderr=True).print(self._clean(line), highlight=False, style="dim")

    async def _read_results(self, batch: Batch, wanted: set[str]) -> dict[str, Any]:
        """custom id -> the completion body (a dict) or the error text, from the batch's output and error files."""
        reason = f"batch {batch.id} {batch.status}" + (f": {self._clean(batch.errors)}" if batch.errors else "")
        results: dict[str, Any] = {}
        for file_id in (batch.error_file_id, batch.output_file_id):  # an answer overrides an error line
            if file_id:
                for line in await self._lines(file_id):
                    cid = line.get("custom_id")
                    if cid in wanted:
                        results[cid] = _line_result(line, self._clean)
        return {cid: results.get(cid, f"{reason}: no result for this request") for cid in wanted}

    async def _lines(self, file_id: str) -> list[dict[str, Any]]:
        raw = await self._http("GET", f"{self.base_url}/files/{file_id}/content", raw=True)
        lines = []
        for text in raw.decode("utf-8", errors="replace").splitlines():
            try:
                line = json.loads(text)
            except ValueError:
                continue  # an unreadable line: its request has no result and is retried on rerun
            if isinstance(line, dict):
                lines.append(line)
        return lines

    def _batch_prediction(self, p: PreparedRequest, result: Any, seconds: float) -> Prediction:
        r = p.request
        fail = Prediction(r.sample_id, "", p.prompt_tokens, 0, seconds, p.truncated, timing="batch-share")
        if not isinstance(result, dict):
            return _with(fail, error=str(result or "no result"))
        try:
            answer = parse_completion(result, self.api)
        except MalformedReply as e:
            return _with(fail, error=self._clean(e))
        cached = _cached_tokens(result)
        self.last_cached_tokens = getattr(self, "last_cached_tokens", 0) + (cached or 0)
        a = within_budget(answer, r.generation_limit, self.tokenizer)
        return Prediction(r.sample_id, a.text, a.prompt_tokens or p.prompt_tokens, a.completion_tokens or 0, seconds,
                          p.truncated, timing="batch-share", reasoning=a.reasoning, over_budget=a.over_budget,
                          **token_account(answer, a))  # cached, reasoning tokens; the server's or counted

    # ---------------------------------------------------------------- http (multipart upload, raw file content)

    async def _http(self, method: str, url: str, *, json_body: dict | None = None, content: bytes | None = None,
                    headers: dict[str, str] | None = None, raw: bool = False, parse=None) -> Any:
        """One call of the batch path under the backend's retry policy: a JSON object (or parse(it)), or the bytes (raw)."""
        async for attempt in self._retrying():
            with attempt:
                data = await self._http_once(method, url, json_body, content, headers, raw)
                return parse(data) if parse is not None else data
        raise Transient("no attempt made")  # unreachable: reraise=True ends the loop with the last error

    async def _http_once(self, method, url, json_body, content, headers, raw) -> Any:
        import httpx

        try:
            resp = await asyncio.wait_for(self._capped(method, url, json_body, content, headers), self.timeout)
        except (asyncio.TimeoutError, httpx.TimeoutException):
            raise Transient(f"timed out after {self.timeout:g}s") from None
        except httpx.TransportError as e:
            raise Transient(f"connection error ({type(e).__name__}: {self._clean(e)})") from None
        if resp.status_code == 429 or resp.status_code >= 500:
            raise Transient(f"HTTP {resp.status_code}: {self._clean(resp.text)}", retry_after_seconds(resp))
        if resp.status_code >= 400:
            raise Permanent(f"HTTP {resp.status_code}: {self._clean(detail(resp))}")
        if raw:
            return resp.content
        try:
            data = resp.json()
        except (ValueError, RecursionError):
            raise Transient(f"unreadable JSON from {self._clean(url)}") from None
        if not isinstance(data, dict):
            raise Transient(f"unexpected JSON from {self._clean(url)}")
        return data

    async def _capped(self, method, url, json_body, content, headers) -> Any:
        import httpx

        async with self._client.stream(method, url, json=json_body, content=content, headers=headers) as resp:
            chunks, size = [], 0
            async for chunk in resp.aiter_bytes():
                size += len(chunk)
                if size > MAX_FILE_BYTES:
                    raise Permanent(f"reply over {MAX_FILE_BYTES // 2 ** 20} MiB from {self._clean(url)}")
                chunks.append(chunk)
        kept = [(k, v) for k, v in resp.headers.items() if k.lower() not in DECODED_HEADERS]
        return httpx.Response(resp.status_code, headers=kept, content=b"".join(chunks), request=resp.request)


def _batch(data: dict[str, Any]) -> Batch:
    try:
        return Batch.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        raise Transient(f"malformed batch object: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def _line_result(line: dict[str, Any], clean) -> Any:
    """An output or error file line: the completion body (a dict) when it answered 200, else the error text."""
    response = line.get("response") if isinstance(line.get("response"), dict) else {}
    status, body = response.get("status_code"), response.get("body")
    if status == 200 and isinstance(body, dict):
        return body
    error = line.get("error") if isinstance(line.get("error"), dict) else {}
    if not error and isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
    message = error.get("message") or error.get("code") or "no answer"
    return f"batch request failed{f' (HTTP {status})' if status else ''}: {clean(message)}"


def _cached_tokens(body: dict[str, Any]) -> int | None:
    """usage.prompt_tokens_details.cached_tokens, where the server reports it (a non-negative integer, else None)."""
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
    value = details.get("cached_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _with(p: Prediction, **fields: Any) -> Prediction:
    """The prediction with those fields set, where Prediction has them (cached_tokens: where the row keys allow)."""
    import dataclasses

    known = {f.name for f in dataclasses.fields(p)}
    return dataclasses.replace(p, **{k: v for k, v in fields.items() if k in known})
