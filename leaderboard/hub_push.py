"""`ctxbench board push REPO_ID`: a built board, its results.csv and the store's run records, uploaded to a Hugging
Face dataset repository in one commit (huggingface_hub create_repo + create_commit).

Nothing secret leaves the machine: every uploaded text passes through harness/core/redact.py (the token, URL
passwords, authorization values), and every absolute local path the records name, the store and board folders, the
working and temporary directories become `<local>/<its last part>` ($HOME becomes `~`).
The files are built in memory, so what is uploaded is exactly what `upload_plan` returns (the tests read it).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.redact import redact, redact_all
from ctxbench.harness.core.store import list_runs

BOARD_FILES = ("index.html", "results.csv")  # a built board has these; push refuses a folder without them
LOCAL = "<local>"
# an absolute path not inside a URL or base64 text: starts after a space, quote, '=', '(' or the start of the text
_ABSOLUTE = re.compile(r"(?<![\w.\-/:+%@<])(?:~/|[A-Za-z]:\\|/(?![/\s]))[^\s\"'<>,;)\]}|`]+")
HOME = os.path.expanduser("~")
_REPO_ID = re.compile(r"^(?:[A-Za-z0-9][\w.\-]*/)?[A-Za-z0-9][\w.\-]*$")


@dataclass(frozen=True)
class Upload:
    """One file of the commit: its path in the repository and its (redacted) bytes."""

    path: str
    content: bytes


def hub_token() -> str:
    """HF_TOKEN, or the token `huggingface-cli login` saved; one line when there is none (nothing is read or sent)."""
    from huggingface_hub import get_token

    token = get_token()
    if not token:
        raise ConfigError("board push: no Hugging Face token; set HF_TOKEN or run `huggingface-cli login` (a token "
                          "with write access), then rerun; nothing was uploaded")
    return token


def check_repo_id(repo_id: str) -> str:
    if not _REPO_ID.match(repo_id) or ".." in repo_id:
        raise ConfigError(f"board push: REPO_ID {repo_id!r} is not a repository id; give NAME or OWNER/NAME, e.g. "
                          "me/ctxbench-board")
    return repo_id


def scrub(text: str, secrets: list[str], paths: list[str]) -> str:
    """`text` without secrets and without the given local paths (longest first; $HOME becomes ~)."""
    out = redact(text, secrets)
    for path in sorted(set(paths), key=len, reverse=True):
        out = out.replace(path, "~" if path == HOME else LOCAL + "/" if path.endswith("/") else f"{LOCAL}/{_last_part(path)}")
    return out


def _last_part(path: str) -> str:
    parts = [p for p in re.split(r"[/\\]", path) if p and p != "~"]
    return parts[-1] if parts else ""


def local_paths(texts: list[str], *roots: Path) -> list[str]:
    """The absolute paths a record names (a model directory, a cache), the roots the board was built from, the
    working directory, the temporary directory and $HOME: each is replaced wherever it appears, so a board page's
    own markup and scripts, which a generic pattern could hit, are left alone."""
    found = {m.group() for text in texts for m in _ABSOLUTE.finditer(text)}
    found |= {str(Path(r).absolute()) for r in roots} | {os.getcwd(), tempfile.gettempdir().rstrip("/") + "/", HOME}
    return [p for p in found if len(p) > 1 and p not in ("/", "~", f"{LOCAL}")]


def upload_plan(board: Path, store: Path, token: str) -> list[Upload]:
    """Every file to upload: the board folder (results.csv, index.html, ...) under board/, each scored run's record
    under records/<run_id>.json, all scrubbed. Refuses a folder that is not a built board."""
    board = Path(board)
    missing = [name for name in BOARD_FILES if not (board / name).is_file()]
    if missing:
        raise ConfigError(f"board push: --board {board} has no {missing[0]}; run `ctxbench board build --out {board}` "
                          "first")
    secrets = [token]
    records = {run.dir.name: json.dumps(redact_all(run.read_record(), secrets), indent=2, sort_keys=True, default=str)
               for run in (list_runs(store) if Path(store).is_dir() else [])}
    paths = local_paths(list(records.values()), board, store)
    files = [Upload(f"board/{p.relative_to(board).as_posix()}", _scrubbed_file(p, secrets, paths))
             for p in sorted(board.rglob("*")) if p.is_file() and not p.name.startswith(".")]
    files += [Upload(f"records/{name}.json", scrub(text, secrets, paths).encode("utf-8") + b"\n")
              for name, text in records.items()]
    return files


def _scrubbed_file(path: Path, secrets: list[str], paths: list[str]) -> bytes:
    """A text file scrubbed; a binary one (a PNG) as it is: it holds no text a path or a key could hide in."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw
    return scrub(text, secrets, paths).encode("utf-8")


def push(repo_id: str, files: list[Upload], *, token: str, endpoint: str | None = None, private: bool = False) -> str:
    """Create the dataset repository (kept if it exists) and commit `files` to it; returns the commit's URL."""
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi(endpoint=endpoint, token=token)
    operations = [CommitOperationAdd(path_in_repo=f.path, path_or_fileobj=f.content) for f in files]
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        info = api.create_commit(repo_id, operations, repo_type="dataset",
                                 commit_message=f"ctxbench board: {len(files)} files")
    except HfHubHTTPError as e:
        if e.response is not None and e.response.status_code in (401, 403):  # the user's token: theirs to fix
            raise ConfigError(f"board push: the Hub refused the token for {repo_id} (HTTP {e.response.status_code}); "
                              "use a token with write access to it (HF_TOKEN or `huggingface-cli login`)") from None
        raise
    return str(info.commit_url)
