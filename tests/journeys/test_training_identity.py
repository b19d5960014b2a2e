"""Journey: the same training config run from two directories, and `data pack` on a trainer's corpus (issue 21
item 21).

A training's identity is its config and its data's content: the same config on byte-identical packed shards is the
same run id wherever it is run (an absolute path entered the packing hash before, so a finished training was redone
elsewhere). `ctxbench data pack` takes the `stdlib:` corpus syntax that trainer configs take. The default tier's
packs run in process (`user_in_process`); the slow tier's trainings as a process.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .conftest import User

PACK = """\
corpus: {path: "stdlib:json", format: repo}
method: standard
seq_len: 128
budget_tokens: 4000
tokenizer: smollm2-135m
out_dir: packed/json
"""


def _checkpoint(out: str) -> str:
    return next(x for x in out.splitlines() if x.startswith("checkpoint: ")).removeprefix("checkpoint: ").strip()


@pytest.mark.slow
def test_the_same_training_in_two_directories_is_one_run(user: User, tmp_path: Path):
    command = "ctxbench train cpt --config configs/trainers/cpt-tiny.yaml --max-steps 1"
    first = user.run(command, timeout=900)
    assert first.code == 0, first.err[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    second = user.run(command, cwd=elsewhere, timeout=900)
    assert second.code == 0, second.err[-3000:]
    shards = sorted(p.name for p in (user.cwd / "packed" / "tiny-standard").glob("shard-*.npy"))
    assert shards and all((user.cwd / "packed" / "tiny-standard" / s).read_bytes()
                          == (elsewhere / "packed" / "tiny-standard" / s).read_bytes() for s in shards)
    assert _checkpoint(first.out) == _checkpoint(second.out)  # runs/train-cpt-tiny-standard-<same id>/model


def test_data_pack_takes_the_stdlib_corpus_syntax_and_its_data_is_its_content(user_in_process: User, tmp_path: Path):
    """`data pack` reads a `stdlib:` corpus; the same packing in another directory is the same data (the data hash a
    training's run id is made of), and a packed directory copied elsewhere is still finished there."""
    from ctxbench.trainers.data.shards import read_manifest

    (user_in_process.cwd / "pack.yaml").write_text(PACK)
    r = user_in_process.run("ctxbench data pack --config pack.yaml")
    assert r.code == 0, r.err[-3000:]
    manifest = json.loads((user_in_process.cwd / "packed" / "json" / "manifest.json").read_text())
    assert manifest["complete"] and manifest["shards"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(user_in_process.cwd / "pack.yaml", elsewhere)
    assert user_in_process.run("ctxbench data pack --config pack.yaml", cwd=elsewhere).code == 0
    assert read_manifest(elsewhere / "packed" / "json").data_hash == read_manifest(user_in_process.cwd / "packed" / "json").data_hash
    moved = tmp_path / "moved"
    shutil.copytree(user_in_process.cwd, moved)
    again = user_in_process.run("ctxbench data pack --config pack.yaml", cwd=moved)
    assert again.code == 0, again.err[-3000:]


def test_a_stdlib_package_that_does_not_exist_is_refused_with_nothing_written(user_in_process: User):
    (user_in_process.cwd / "pack.yaml").write_text(PACK.replace("stdlib:json", "stdlib:json,nosuchpkg"))
    r = user_in_process.run("ctxbench data pack --config pack.yaml")
    assert r.code == 2 and r.err.strip().count("\n") == 0, r.err
    assert "nosuchpkg" in r.err
    assert user_in_process.files() == {"pack.yaml"}  # no packed/, no corpus copy, no lock file
