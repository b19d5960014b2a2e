"""A full disk mid-run is one line naming the file it could not write, and a rerun resumes (issue 32)."""

from __future__ import annotations

import errno
import json
import os

from ctxbench.harness.core import io as store_io
from ctxbench.harness.core.errors import os_error_line

ARGS = ("score", "--backend", "echo", "--model", "smollm2-135m", "--tasks", "ruler/niah_single_1", "--lengths", "512",
        "--samples", "3")


def test_an_unnamed_full_disk_error_is_named_after_the_file_being_written(tmp_path):
    target = tmp_path / "rows.jsonl"

    def no_space(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # what os.write raises: no file name

    real = store_io.os.write
    store_io.os.write = no_space
    try:
        store_io.append_jsonl(target, [{"a": 1}])
    except OSError as e:
        assert e.filename == str(target) and e.errno == errno.ENOSPC
        assert os_error_line(e).startswith(f"{target}: No space left on device; free space")
    else:
        raise AssertionError("the write did not fail")
    finally:
        store_io.os.write = real


def test_a_full_disk_during_score_is_one_line_and_the_rerun_resumes(tmp_path, ctxbench, monkeypatch):
    store = tmp_path / "runs"
    real = os.write

    def full_for_rows(fd, data):
        if b'"task"' in bytes(data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(store_io.os, "write", full_for_rows)
    code, out, err = ctxbench(*ARGS, "--store", str(store))
    monkeypatch.setattr(store_io.os, "write", real)
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2, err
    assert "Traceback" not in err and len([x for x in lines if x.startswith("error:")]) == 1, err
    assert "samples.jsonl: No space left on device" in err and "rerun" in err

    code, out, err = ctxbench(*ARGS, "--store", str(store))
    assert code == 0, err
    (rows,) = store.glob("*/samples.jsonl")
    ids = [json.loads(x)["id"] for x in rows.read_text().splitlines()]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 3
