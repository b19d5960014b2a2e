"""Fixtures for the serving backends: a real `transformers serve` of the embedded model, and a fault-injecting proxy.

The server is started once per test session on a free loopback port, with one torch thread (much faster
than two on a shared 2-core machine), and killed at the end. Tests that need it skip with the reason if it
cannot start (fail, where CTXBENCH_REQUIRE_SERVE=1: CI).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import missing

READY_TIMEOUT = 90  # seconds to wait for the server to answer /health


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def smol_dir() -> str:
    """The embedded SmolLM2-135M-Instruct as a plain HF directory (converted once from its GGUF)."""
    from ctxbench.harness.core.models import materialize, resolve

    return materialize(resolve("smollm2-135m"))


@pytest.fixture(scope="session")
def hf_server(smol_dir, tmp_path_factory):
    """`transformers serve` of the embedded model on 127.0.0.1; yields its base URL (…/v1)."""
    try:
        from transformers.utils.import_utils import is_serve_available
    except ImportError:
        missing("transformers is not installed", "CTXBENCH_REQUIRE_SERVE")
    if not is_serve_available():
        missing("transformers serve needs the extra: pip install 'transformers[serving]'", "CTXBENCH_REQUIRE_SERVE")
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", "transformers.cli.transformers", "serve", smol_dir, "--host", "127.0.0.1",
           "--port", str(port), "--device", "cpu", "--dtype", "float32"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if proc.poll() is not None:
                missing(f"transformers serve exited with {proc.returncode}: {log.read_text()[-500:]}", "CTXBENCH_REQUIRE_SERVE")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                missing(f"transformers serve did not answer /health within {READY_TIMEOUT}s: {log.read_text()[-500:]}",
                        "CTXBENCH_REQUIRE_SERVE")
            time.sleep(0.5)
        yield f"{url}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


class FaultProxy:
    """A loopback HTTP proxy in front of a server that injects faults.

    The faults in `plan` are handed out once each, in order, to POST attempts ("429"/"500"/...: that
    status; "timeout": no answer for `hang` seconds; "truncated": the upstream answer cut in half;
    "reset": the connection closed without an answer), at most `per_body` to one request body, so a
    client with more retries than that always gets through. Bodies matching a doom rule get its status
    on every attempt. `require_key`: answer 401 to requests without that bearer token (the token is
    never forwarded upstream).
    """

    def __init__(self, upstream: str, plan: list[str], *, hang: float = 5.0, require_key: str | None = None,
                 per_body: int = 2):
        self.upstream = upstream.rstrip("/")
        host_port = self.upstream.split("//", 1)[1].split("/", 1)[0]
        self.up_host, up_port = host_port.split(":")
        self.up_port = int(up_port)
        self.plan = plan
        self.hang = hang
        self.require_key = require_key
        self.doom_rules: list[tuple[str, int]] = []
        self.attempts: dict[str, int] = {}
        self.per_body = per_body
        self.pending = list(plan)
        self.log: list[tuple[str, str, str]] = []  # (path, body hash, outcome)
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                proxy.handle(self, b"")

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
                proxy.handle(self, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False  # do not wait for handlers still hanging on an injected timeout
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def doom_where(self, predicate, status: int) -> None:
        """Every attempt of a request whose parsed JSON body satisfies predicate gets HTTP status."""
        self.doom_rules.append((predicate, status))

    def clear_doom(self) -> None:
        self.doom_rules.clear()

    def _send(self, h, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            h.send_response(status)
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout) first
            h.close_connection = True

    def _forward(self, h, body: bytes) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(self.up_host, self.up_port, timeout=120)
        headers = {"Content-Type": "application/json"}  # the bearer token is not forwarded
        conn.request(h.command, h.path, body=body or None, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, data

    def handle(self, h, body: bytes) -> None:
        if self.require_key is not None and h.headers.get("Authorization") != f"Bearer {self.require_key}":
            self._send(h, 401, b'{"error": "bad key"}')
            return
        key = hashlib.sha256(h.path.encode() + body).hexdigest()
        parsed = json.loads(body) if body else {}
        doomed = next((status for pred, status in self.doom_rules if pred(parsed)), None)
        with self.lock:
            n = self.attempts[key] = self.attempts.get(key, 0) + 1
            if h.command == "GET":
                fault = "ok"
            elif doomed is not None:
                fault = str(doomed)
            elif n <= self.per_body and self.pending:
                fault = self.pending.pop(0)
            else:
                fault = "ok"
        with self.lock:
            self.log.append((h.path, key[:8], fault))
        if fault == "ok":
            status, data = self._forward(h, body)
            self._send(h, status, data)
        elif fault.isdigit():
            extra = {"Retry-After": "0"} if fault == "429" else {}
            self._send(h, int(fault), json.dumps({"error": {"message": f"injected {fault}"}}).encode(), extra)
        elif fault == "timeout":
            time.sleep(self.hang)  # longer than the client's timeout; then give up on the connection
            h.close_connection = True
        elif fault == "truncated":
            status, data = self._forward(h, body)
            self._send(h, status, data[: len(data) // 2])
        elif fault == "reset":
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
        else:
            raise AssertionError(fault)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def fault_proxy():
    proxies = []

    def make(upstream: str, plan: list[str], **kw) -> FaultProxy:
        p = FaultProxy(upstream, plan, **kw).__enter__()
        proxies.append(p)
        return p

    yield make
    for p in proxies:
        p.__exit__(None, None, None)


class StubOpenAI:
    """A scripted OpenAI-style loopback server for request-building unit tests (not a model).

    Records every request body; answers POSTs with the next scripted status (default 200) and a fixed
    completion; /v1/models states `context`; /tokenize counts with the given tokenizer; `accept_continue`:
    whether chat requests with continue_final_message are accepted (vLLM) or rejected with 422.
    """

    def __init__(self, tokenizer, *, model: str = "stub", context: int = 0, accept_continue: bool = True,
                 tokenize: bool = True, reply: str = " 42", echo_logprobs: bool = True):
        self.echo_logprobs = echo_logprobs  # completions with echo + logprobs return the prompt's (vLLM does)
        self.tokenizer, self.model, self.context = tokenizer, model, context
        self.accept_continue, self.tokenize, self.reply = accept_continue, tokenize, reply
        self.script: list[int] = []
        self.bodies: list[tuple[str, dict]] = []
        self.times: list[float] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status, obj, headers=None):
                data = json.dumps(obj).encode()
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                stub.headers = dict(self.headers)
                entry = {"id": stub.model, "object": "model"}
                if stub.context:
                    entry["max_model_len"] = stub.context
                self._send(200, {"object": "list", "data": [entry]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                stub.headers = dict(self.headers)
                stub.bodies.append((self.path, body))
                stub.times.append(time.monotonic())
                if self.path == "/tokenize":
                    if not stub.tokenize:
                        return self._send(404, {"detail": "Not Found"})
                    if "messages" in body:
                        text = stub.tokenizer.apply_chat_template(
                            body["messages"], tokenize=False, add_generation_prompt=body.get("add_generation_prompt", True),
                            continue_final_message=body.get("continue_final_message", False))
                        ids = stub.tokenizer(text, add_special_tokens=False)["input_ids"]
                    else:
                        ids = stub.tokenizer(body["prompt"], add_special_tokens=body.get("add_special_tokens", True))["input_ids"]
                    return self._send(200, {"count": len(ids), "tokens": ids, "max_model_len": stub.context})
                if "continue_final_message" in body and not stub.accept_continue:
                    return self._send(422, {"detail": "Unexpected fields in the request: {'continue_final_message'}"})
                status = stub.script.pop(0) if stub.script else 200
                if status != 200:
                    headers = {"Retry-After": "0"} if status == 429 else {}
                    return self._send(status, {"error": {"message": f"scripted {status}"}}, headers)
                if self.path.endswith("/chat/completions"):
                    choice = {"index": 0, "message": {"role": "assistant", "content": stub.reply}, "finish_reason": "stop"}
                else:
                    choice = {"index": 0, "text": stub.reply, "finish_reason": "stop"}
                    if body.get("echo") and body.get("logprobs") is not None and stub.echo_logprobs:
                        ids = body["prompt"]  # token ids: the legacy format's token_logprobs, null first, then the reply's
                        choice["logprobs"] = {"token_logprobs": [None] + [stub.logprob(p, t) for p, t in zip(ids, ids[1:])] + [-1.0]}
                self._send(200, {"choices": [choice], "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False  # do not wait for handlers still hanging on an injected timeout
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @staticmethod
    def logprob(previous: int, token: int) -> float:
        """The stub's log-probability of a prompt token after another (a fixed function of the pair)."""
        return -((previous * 5 + token) % 13) / 4 - 0.05

    def posts(self, suffix: str) -> list[dict]:
        return [b for path, b in self.bodies if path.endswith(suffix)]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def stub_server(smol_tokenizer):
    servers = []

    def make(**kw) -> StubOpenAI:
        s = StubOpenAI(smol_tokenizer, **kw)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


@pytest.fixture(scope="session")
def serving_repo_root() -> Path:
    return Path(__file__).resolve().parents[2]
