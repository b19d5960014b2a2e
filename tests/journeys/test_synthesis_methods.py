"""Journey (issue 23): every data method is a synthesis method, and a plugin adds its own.

A user lists the methods (`ctxbench data methods`: the packings, hqa, logo and the installed plugin's, each with its
arguments), runs the plugin's method through `ctxbench data pack --method`, reruns it (reused as is), and is refused
in one line when the same out_dir is asked for different data.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def plugin_env(plugin_site: Path) -> dict[str, str]:
    """A user's environment with the plugin example installed (its directory on PYTHONPATH)."""
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(plugin_site), os.environ.get("PYTHONPATH", "")]))}


def test_data_methods_lists_every_method_with_its_arguments(user, plugin_env):
    r = user.run("ctxbench data methods", env={**plugin_env, "COLUMNS": "250"})
    assert r.code == 0, r.err
    names = {line.split("│")[1].strip() for line in r.out.splitlines() if line.startswith("│")} - {""}
    assert {"standard", "within_domain", "splice", "quest", "knn", "iclm", "hqa", "logo", "example_sentences"} <= names
    for argument in ("split_ratio", "documents_per_sample", "num_rejected", "sentences_per_sample"):
        assert f" {argument} " in r.out


def test_a_plugin_synthesis_method_runs_through_data_pack(user, plugin_env, data_dir):
    (user.cwd / "sentences.yaml").write_text(f"documents: {data_dir / 'pg_essays'}\nsamples: 6\nout_dir: data/sentences\n")
    first = user.run("ctxbench data pack --method example_sentences --config sentences.yaml", env=plugin_env)
    assert first.code == 0, first.err
    assert "example_sentences: 2 shards at data/sentences (complete: True; drops: sentences:too_short" in first.out
    out = user.cwd / "data" / "sentences"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["schema"] == "ctxbench-synthesis/1" and manifest["method"] == "example_sentences"
    assert sum(1 for s in manifest["shards"] for _ in (out / s).read_text().splitlines()) == 6
    written = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}

    again = user.run("ctxbench data pack --method example_sentences --config sentences.yaml", env=plugin_env)
    assert again.code == 0 and again.out == first.out  # finished and identical: reused, nothing rewritten
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == written

    (user.cwd / "sentences.yaml").write_text((user.cwd / "sentences.yaml").read_text() + "seed: 3\n")
    other = user.run("ctxbench data pack --method example_sentences --config sentences.yaml", env=plugin_env)
    assert other.code == 2 and other.err.strip() == ("error: out_dir: data/sentences holds a synthesis of another config; use "
                                                     "another out_dir or delete it")
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == written

    typo = user.run("ctxbench data pack --method example_sentence --config sentences.yaml --out data/x", env=plugin_env)
    assert typo.code == 2 and "--method: unknown synthesis method 'example_sentence'; did you mean 'example_sentences'" in typo.err
    assert not (user.cwd / "data" / "x").exists()
