"""Issue 36, `ctxbench board push REPO_ID`: the board, results.csv and the run records go to a Hugging Face dataset
repository through huggingface_hub, here a local stand-in of the Hub API on 127.0.0.1 (create, preupload, commit),
and nothing secret goes with them: no token, no $HOME, no absolute path. Without a token: one line, exit 2, no
request."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("huggingface_hub")

from tests.leaderboard.test_reported_side_table import _my_model  # noqa: E402

TOKEN = "hf_secretTOKEN0123456789abcdef"
REPO = "me/ctxbench-board"


class StandInHub(ThreadingHTTPServer):
    """The three calls HfApi.create_repo + create_commit make for small (regular, non-LFS) files."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.calls: list[tuple[str, str, str]] = []  # (method, path, Authorization)
        self.files: dict[str, bytes] = {}
        self.bodies: list[bytes] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: StandInHub

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.calls.append(("POST", self.path, self.headers.get("Authorization", "")))
        self.server.bodies.append(body)
        path = self.path.split("?", 1)[0]
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self.send_error(401)
        if path == "/api/repos/create":
            return self._json({"url": f"{self.server.url}/datasets/{REPO}"})
        if path == f"/api/datasets/{REPO}/preupload/main":
            files = json.loads(body)["files"]
            return self._json({"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                         for f in files]})
        if path == f"/api/datasets/{REPO}/commit/main":
            for line in body.splitlines():
                item = json.loads(line)
                if item["key"] == "file":
                    self.server.files[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
            return self._json({"commitUrl": f"{self.server.url}/datasets/{REPO}/commit/abc123", "commitOid": "abc123",
                               "pullRequestUrl": None})
        self.send_error(404)

    def do_GET(self) -> None:  # noqa: N802
        self.server.calls.append(("GET", self.path, self.headers.get("Authorization", "")))
        self.send_error(404)

    def _json(self, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def hub():
    server = StandInHub()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


@pytest.fixture()
def no_saved_token(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))  # no token file from a real login
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


def _store_and_board(tmp_path, ctxbench) -> tuple[Path, Path]:
    runs = tmp_path / "runs"
    _my_model(runs, "mine")
    record = runs / "mine" / "record.json"
    rec = json.loads(record.read_text())  # what a real run can carry: a local model path, a key in its command line
    rec.update(model=str(Path.home() / "models" / "mine"), model_path=str(tmp_path / "weights" / "mine"),
               command=["ctxbench", "score", "--model", str(tmp_path / "weights" / "mine"), "--backend-arg",
                        f"api_key={TOKEN}", "--note", TOKEN, "--backend-arg", "base_url=http://user:pw123456@10.0.0.1:8000/v1"],
               backend_args={"api_key": TOKEN, "cache": f"{Path.home()}/.cache/x"})
    record.write_text(json.dumps(rec))
    board = tmp_path / "board"
    code, _, err = ctxbench("board", "build", "--store", str(runs), "--out", str(board))
    assert code == 0, err
    return runs, board


def test_push_uploads_board_csv_and_records_and_nothing_secret(tmp_path, ctxbench, hub, no_saved_token, monkeypatch):
    runs, board = _store_and_board(tmp_path, ctxbench)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    code, out, err = ctxbench("board", "push", REPO, "--board", str(board), "--store", str(runs), "--endpoint", hub.url)
    assert code == 0, err
    assert [c[:2] for c in hub.calls] == [("POST", "/api/repos/create"), ("POST", f"/api/datasets/{REPO}/preupload/main"),
                                           ("POST", f"/api/datasets/{REPO}/commit/main")]
    assert all(c[2] == f"Bearer {TOKEN}" for c in hub.calls)  # the token is a header, never content
    assert {"board/index.html", "board/results.csv", "board/leaderboard.md", "board/results.json",
            "records/mine.json"} <= set(hub.files)
    assert hub.files["board/results.csv"].decode().startswith("model,task,length,score")
    assert f"pushed {len(hub.files)} files" in out and "abc123" in out
    uploaded = b"\n".join(hub.bodies).decode("utf-8", "replace") + "\n".join(
        v.decode("utf-8", "replace") for v in hub.files.values())
    for secret in (TOKEN, str(Path.home()), str(tmp_path), "/tmp/", "pw123456"):
        assert secret not in uploaded, secret
    record = json.loads(hub.files["records/mine.json"])
    assert record["model_path"] == "<local>/mine" and record["model"] == "<local>/mine"
    assert record["backend_args"]["api_key"] == "***"


def test_push_without_a_token_is_refused_and_sends_nothing(tmp_path, ctxbench, hub, no_saved_token):
    runs, board = _store_and_board(tmp_path, ctxbench)
    code, out, err = ctxbench("board", "push", REPO, "--board", str(board), "--store", str(runs), "--endpoint", hub.url)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "no Hugging Face token; set HF_TOKEN or run `huggingface-cli login`" in err
    assert hub.calls == []


def test_push_refuses_a_folder_that_is_not_a_built_board(tmp_path, ctxbench, hub, no_saved_token, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    (tmp_path / "empty").mkdir()
    code, _, err = ctxbench("board", "push", REPO, "--board", str(tmp_path / "empty"), "--endpoint", hub.url)
    assert code == 2 and "has no index.html; run `ctxbench board build" in err and hub.calls == []
    code, _, err = ctxbench("board", "push", "a/b/c", "--board", str(tmp_path / "empty"), "--endpoint", hub.url)
    assert code == 2 and "REPO_ID 'a/b/c' is not a repository id" in err and hub.calls == []


def test_push_with_a_token_the_hub_refuses_is_one_line(tmp_path, ctxbench, hub, no_saved_token, monkeypatch):
    runs, board = _store_and_board(tmp_path, ctxbench)
    monkeypatch.setenv("HF_TOKEN", "hf_notTheRightOne")
    code, _, err = ctxbench("board", "push", REPO, "--board", str(board), "--store", str(runs), "--endpoint", hub.url)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "the Hub refused the token for me/ctxbench-board (HTTP 401)" in err
    assert not hub.files
