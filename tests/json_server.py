"""A local OpenAI-compatible stand-in for tests: an HTTP server on 127.0.0.1 that answers GET and POST with JSON from
two callables (no network). Tests script the "model" (or judge) in those callables. `raw_server` also sends replies
byte for byte (malformed, oversized or trickled: the untrusted server of tests/serving/test_malformed_replies.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def json_server(get: Callable[[], dict], post: Callable[[dict], dict]) -> tuple[ThreadingHTTPServer, str]:
    """(the running server, its base url ending in /v1): GET answers get(), POST answers post(the request body)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, obj: dict) -> None:
            data = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send(get())

        def do_POST(self) -> None:
            self._send(post(json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


@dataclass(frozen=True)
class RawReply:
    """A reply sent byte for byte, for a server that cannot be trusted: JSON no encoder would write (`Infinity`, a wrong
    shape), a body far larger than asked for, or one trickled `chunk` bytes at a time with `pause` seconds between
    writes (bounded: it ends when the body does, or when the client hangs up)."""

    body: bytes
    chunk: int = 0  # bytes per write (0: the whole body at once)
    pause: float = 0.0  # seconds between writes


def raw_server(get: Callable[[], dict], post: Callable[[dict], RawReply | dict]) -> tuple[ThreadingHTTPServer, str]:
    """Like json_server, but POST may answer a RawReply, sent as it is (on 127.0.0.1 only)."""

    def send_raw(handler: BaseHTTPRequestHandler, reply: RawReply) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(reply.body)))
        handler.end_headers()
        step = reply.chunk or len(reply.body) or 1
        try:
            for start in range(0, len(reply.body), step):
                handler.wfile.write(reply.body[start: start + step])
                handler.wfile.flush()
                if reply.pause and start + step < len(reply.body):
                    time.sleep(reply.pause)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (its deadline) first
            handler.close_connection = True

    def answer(body: dict) -> dict:
        reply = post(body)
        if isinstance(reply, RawReply):
            raise _Raw(reply)
        return reply

    server, url = json_server(get, answer)
    plain_post = server.RequestHandlerClass.do_POST

    def do_post(handler: BaseHTTPRequestHandler) -> None:
        try:
            plain_post(handler)
        except _Raw as raw:
            send_raw(handler, raw.reply)

    server.RequestHandlerClass.do_POST = do_post
    return server, url


class _Raw(Exception):
    def __init__(self, reply: RawReply):
        super().__init__("raw reply")
        self.reply = reply


class BatchStandIn:
    """A stand-in for the OpenAI Batch API on 127.0.0.1 (no network): POST /files (multipart, purpose=batch), POST and
    GET /batches, GET /batches/{id}, GET /files/{id}/content, and GET /models. `answer(body)` scripts each request:
    a completion body, or a string (that request's error line). While `hold` is set, batches stay in_progress; once
    it is cleared a batch completes at its next poll. `paid` counts, per custom_id, the requests of every batch
    created (what a provider bills); `created` is set when the first batch exists and `polled` at its first poll.
    `create_faults` scripts the next POST /batches calls: "lose" creates the batch but answers 500 (a reply lost on
    the way), "refuse" answers 503 and creates nothing."""

    def __init__(self, answer: Callable[[dict], dict | str], *, model: str = "stub", context: int = 8192,
                 batches: bool = True):
        import collections

        self.answer, self.hold, self.batches_served = answer, False, batches
        self.create_faults: list[str] = []
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.paid: collections.Counter = collections.Counter()
        self.direct = 0  # requests sent outside a batch
        self.created, self.polled = threading.Event(), threading.Event()
        self.lock = threading.Lock()
        self.models = {"data": [{"id": model, "max_model_len": context}]}
        self.server, self.url = self._serve()

    def _serve(self) -> tuple[ThreadingHTTPServer, str]:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, data: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                status, data = stand_in.get(self.path)
                self._send(status, data if isinstance(data, bytes) else json.dumps(data).encode())

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, data = stand_in.post(self.path, self.headers.get("Content-Type", ""), body)
                self._send(status, json.dumps(data).encode())

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return server, f"http://127.0.0.1:{server.server_address[1]}/v1"

    def get(self, path: str) -> tuple[int, Any]:
        path = path.split("?")[0].removeprefix("/v1")
        if path == "/models":
            return 200, self.models
        if not self.batches_served:
            return 404, {"error": {"message": "not found"}}
        with self.lock:
            if path == "/batches":
                return 200, {"object": "list", "data": list(self.batches.values())}
            if path.startswith("/batches/") and path[len("/batches/"):] in self.batches:
                return 200, self._poll(path[len("/batches/"):])
            if path.startswith("/files/") and path.endswith("/content"):
                name = path[len("/files/"): -len("/content")]
                if name in self.files:
                    return 200, self.files[name]
        return 404, {"error": {"message": f"no such object: {path}"}}

    def post(self, path: str, kind: str, body: bytes) -> tuple[int, Any]:
        path = path.split("?")[0].removeprefix("/v1")
        if path in ("/completions", "/chat/completions"):
            self.direct += 1
            reply = self.answer(json.loads(body))
            return (400, {"error": {"message": reply}}) if isinstance(reply, str) else (200, reply)
        if not self.batches_served:
            return 404, {"error": {"message": "not found"}}
        with self.lock:
            if path == "/files":
                name = f"file-{len(self.files)}"
                self.files[name] = _multipart_file(kind, body)
                return 200, {"id": name, "object": "file", "purpose": "batch"}
            if path == "/batches":
                return self._create(json.loads(body))
        return 404, {"error": {"message": f"no such endpoint: {path}"}}

    def _create(self, request: dict) -> tuple[int, Any]:
        lines = [json.loads(x) for x in self.files.get(request.get("input_file_id"), b"").splitlines() if x.strip()]
        if not lines:
            return 400, {"error": {"message": "input_file_id: no such file"}}
        fault = self.create_faults.pop(0) if self.create_faults else ""
        if fault == "refuse":
            return 503, {"error": {"message": "try again later"}}
        self.paid.update(x["custom_id"] for x in lines)
        name = f"batch-{len(self.batches)}"
        self.batches[name] = {"id": name, "object": "batch", "endpoint": request["endpoint"], "status": "in_progress",
                              "input_file_id": request["input_file_id"], "output_file_id": None, "error_file_id": None,
                              "request_counts": {"total": len(lines), "completed": 0, "failed": 0}}
        self.created.set()
        return (500, {"error": {"message": "reply lost"}}) if fault == "lose" else (200, self.batches[name])

    def _poll(self, name: str) -> dict:
        batch = self.batches[name]
        self.polled.set()
        if batch["status"] == "in_progress" and not self.hold:
            self._finish(batch)
        return batch

    def _finish(self, batch: dict) -> None:
        out, err = [], []
        for line in self.files[batch["input_file_id"]].splitlines():
            request = json.loads(line)
            reply = self.answer(request["body"])
            if isinstance(reply, str):
                err.append({"id": f"r-{len(err)}", "custom_id": request["custom_id"], "response": None,
                            "error": {"code": "scripted", "message": reply}})
            else:
                out.append({"id": f"r-{len(out)}", "custom_id": request["custom_id"], "error": None,
                            "response": {"status_code": 200, "request_id": "x", "body": reply}})
        for key, rows in (("output_file_id", out), ("error_file_id", err)):
            if rows:
                batch[key] = f"file-{len(self.files)}"
                self.files[batch[key]] = "\n".join(json.dumps(r) for r in rows).encode()
        batch.update(status="completed", request_counts={"total": len(out) + len(err), "completed": len(out),
                                                        "failed": len(err)})


def _multipart_file(kind: str, body: bytes) -> bytes:
    """The `file` part of a multipart/form-data body."""
    from email.parser import BytesParser

    message = BytesParser().parsebytes(f"Content-Type: {kind}\r\n\r\n".encode() + body)
    for part in message.get_payload():
        if part.get_param("name", header="content-disposition") == "file":
            return part.get_payload(decode=True)
    return b""
