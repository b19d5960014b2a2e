"""Journey: the same command started twice at once, as schedulers and impatient users do (issue 21 item 26).

Every command that writes an output has one writer: the second is refused at once with one line naming the first
(pid, host, since) and exit 2, and the first finishes intact. Before, two `data pack` runs into one out_dir left a
manifest listing shards that the second run's cleanup had deleted.

The first command is a process (it holds the lock); the second, refused at once, runs in process (`InProcessUser`):
the lock is taken by another process either way, and a refusal needs no Python start-up of its own.
"""

from __future__ import annotations

import json

import pytest

from .conftest import InProcessUser, User, wait_for

PACK = """\
corpus: {path: "stdlib:json,email", format: repo}
method: standard
seq_len: 256
budget_tokens: 400000
shard_size: 8
tokenizer: smollm2-135m
out_dir: packed/a
"""


def _refused_naming(r, pid: int) -> None:
    assert r.code == 2, r.err[-2000:]
    assert r.last_err_line.startswith("error: ") and "another process is writing" in r.last_err_line
    assert f"pid {pid} on " in r.last_err_line and " since " in r.last_err_line
    assert "Traceback" not in r.err


def test_two_data_packs_into_one_out_dir(user: User, ctxbench, monkeypatch):
    (user.cwd / "pack.yaml").write_text(PACK)
    first = user.start("ctxbench data pack --config pack.yaml")
    wait_for(lambda: (user.cwd / "packed" / "a" / "shard-00000.npy").exists(), timeout=600)
    second = InProcessUser(user.cwd, ctxbench, monkeypatch).run("ctxbench data pack --config pack.yaml")
    _refused_naming(second, first.pid)
    out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-2000:]
    manifest = json.loads((user.cwd / "packed" / "a" / "manifest.json").read_text())
    assert manifest["complete"] and all((user.cwd / "packed" / "a" / s).is_file() for s in manifest["shards"])


@pytest.mark.slow  # ~50 s; the same lock utility is exercised in the default tier by data pack and study
def test_two_identical_trainings(user: User):
    first = user.start("ctxbench train cpt --config configs/trainers/cpt-tiny.yaml")
    wait_for(lambda: any((user.cwd / "runs").glob("train-*/losses.jsonl")), timeout=900)
    second = user.run("ctxbench train cpt --config configs/trainers/cpt-tiny.yaml")
    _refused_naming(second, first.pid)
    first.kill()
    first.communicate(timeout=120)


def test_two_identical_studies(user: User, ctxbench, monkeypatch):
    from .test_study_journeys import STUDY

    (user.cwd / "study.yaml").write_text(STUDY)
    first = user.start("ctxbench study study.yaml")
    wait_for(lambda: (user.cwd / "runs" / "studies" / "tiny" / "corpus").exists(), timeout=600)
    second = InProcessUser(user.cwd, ctxbench, monkeypatch).run("ctxbench study study.yaml")
    _refused_naming(second, first.pid)
    first.kill()
    first.communicate(timeout=120)
