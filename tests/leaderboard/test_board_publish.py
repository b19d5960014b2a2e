"""Issue 32, full disks and torn writes for `board build`: the board is built in a temporary folder and moved into place
whole, so a build that fails half-way leaves the previous board as it was (never index.html from one build and
results.json from another); a full disk is one line naming the folder. And a run of an unknown kind is skipped with a
note, never reported as "no scored runs"."""

from __future__ import annotations

import dataclasses
import errno
import json
from pathlib import Path

import pytest

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.store import RunStore
from ctxbench.harness.core.types import RunRecord
from ctxbench.leaderboard import report
from ctxbench.leaderboard.store_frame import import_reported, load_store, reported_frame

FILES = ("leaderboard.md", "index.html", "results.csv", "results.json")


def _board(tmp_path: Path, title: str) -> Path:
    paper = tmp_path / "paper.csv"
    paper.write_text("model,task,length,score\nP,avg,4K,90\nP,avg,8K,80\nQ,avg,4K,70\nQ,avg,8K,60\n")
    import_reported(tmp_path / "runs", paper)
    out = tmp_path / "board"
    report.build_report(reported_frame(tmp_path / "runs"), out_dir=out, title=title)
    return out


def test_a_full_disk_half_way_leaves_the_previous_board_whole_and_says_where(tmp_path, monkeypatch):
    out = _board(tmp_path, "first build")
    (out / "mine.txt").write_text("a file the user keeps beside the board")
    before = {name: (out / name).read_bytes() for name in FILES}
    real, calls = report.atomic_write, []

    def disk_fills(path, data, **kw):
        calls.append(path)
        if len(calls) == 3:  # two files written, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, data, **kw)

    monkeypatch.setattr(report, "atomic_write", disk_fills)
    with pytest.raises(ConfigError) as e:
        report.build_report(reported_frame(tmp_path / "runs"), out_dir=out, title="second build")
    message = str(e.value)
    assert "\n" not in message and str(out) in message and "No space left on device" in message
    assert {name: (out / name).read_bytes() for name in FILES} == before  # not one file of the second build
    assert (out / "mine.txt").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no staging folder left behind


def test_a_rebuild_replaces_every_file_and_keeps_the_users_own(tmp_path):
    out = _board(tmp_path, "first build")
    (out / "mine.txt").write_text("kept")
    report.build_report(reported_frame(tmp_path / "runs"), out_dir=out, title="second build")
    assert all("second build" in (out / name).read_text() for name in ("leaderboard.md", "index.html"))
    assert (out / "mine.txt").read_text() == "kept" and (out / "summary").is_dir()


def _record(root: Path, run_id: str, kind: str, rows=()) -> None:
    store = RunStore(root, run_id)
    store.dir.mkdir(parents=True)
    rec = RunRecord(run_id=run_id, created="2026-01-01T00:00:00", suite="s", suite_config={}, model="m", backend="hf",
                    backend_args={}, tokenizer="", tokenizer_fingerprint="", template="", seed=42, truncation="refuse",
                    versions={}, command=[], label=run_id, model_fingerprint=f"dir:{run_id}", kind=kind,
                    plan={"t": {"512": len(rows)}} if rows else {})
    store.record_path.write_text(json.dumps(dataclasses.asdict(rec)))
    if rows:
        store.append([{"id": f"t@512#{i}", "task": "t", "length": 512, "index": i, "score": s, "prompt_hash": f"p{i}"}
                      for i, s in enumerate(rows)])


def test_a_run_of_an_unknown_kind_is_skipped_with_a_note(tmp_path):
    _record(tmp_path, "scored", "score", rows=(1.0, 0.0))
    _record(tmp_path, "future", "benchmark-v9")
    frames = load_store(tmp_path)
    assert set(frames.scores["model"]) == {"scored"}
    assert any("future" in n and "benchmark-v9" in n and "skipped" in n for n in frames.notes), frames.notes


def test_a_store_of_only_unknown_kinds_says_so(tmp_path):
    from ctxbench.harness.commands.board import board_build

    _record(tmp_path / "runs", "future", "benchmark-v9")
    with pytest.raises(ConfigError) as e:
        board_build(runs_dir=tmp_path / "runs", runs=None, out_dir=tmp_path / "board", threshold="85.6", compare=[],
                    title="t", relative_effective=None, auc=None, auc_scale="tokens", fmt="board")
    assert "future" in str(e.value) and "benchmark-v9" in str(e.value)
    assert not (tmp_path / "board").exists()
