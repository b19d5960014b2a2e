"""A local OpenAI-compatible stand-in for tests: an HTTP server on 127.0.0.1 that answers GET and POST with JSON from
two callables (no network). Tests script the "model" (or judge) in those callables."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
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
