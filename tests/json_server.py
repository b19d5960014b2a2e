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
