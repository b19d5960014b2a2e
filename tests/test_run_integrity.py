"""A run holds one model, one tokenizer and one writer; nothing is written outside the store; caches are keyed by
content and survive being torn (issue 10 §1, §2, §5). Real processes where the behaviour is about processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SUITE = "name: integrity\nlengths: [512]\nsamples: {n}\ntasks: [ruler/niah_single_1]\n"


def cli_cmd(suite: Path, store: Path, data_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "ctxbench.harness.cli", "score", "--suite", str(suite), "--store", str(store),
            "--backend", "echo", "--data-dir", str(data_dir), *extra]


def interruptible() -> None:
    """In the child: SIGINT back to its default, so Python turns it into KeyboardInterrupt. A test run started in the
    background by a non-interactive shell (`cmd &`, as CI scripts do) inherits SIGINT ignored, and so would the run."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for(predicate, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout  # a guard against a hung test, not an assertion on speed
    while not predicate():
        assert time.monotonic() < deadline, "the run did not get that far"
        time.sleep(0.1)


def test_a_second_writer_gets_one_line_naming_the_holder(tmp_path, repo_root, data_dir, ctxbench):
    """The first writer is a child process; the second is this test's own process (the `ctxbench` fixture), which is
    just as much another process to the lock, without a second Python start-up."""
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE.format(n=200))
    store = tmp_path / "runs"
    # slow enough to still be running when the second writer has started, however loaded the machine
    slow = cli_cmd(suite, store, data_dir, "--backend-arg", "delay=1", "--batch-size", "1")
    first = subprocess.Popen(slow, cwd=repo_root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             preexec_fn=interruptible)
    try:
        wait_for(lambda: any(store.glob("*/samples.jsonl")))
        code, _, stderr = ctxbench(*slow[3:])  # the same command line, less `python -m ctxbench.harness.cli`
        lines = [x for x in stderr.splitlines() if x.strip()]
        assert code == 2 and len(lines) == 1, stderr
        assert f"another process is writing this run (pid {first.pid} " in lines[0] and "--shard" in lines[0]
    finally:
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=120)
    assert first.returncode == 130 and "rerun the same command to resume" in err
    (samples,) = store.glob("*/samples.jsonl")
    ids = [json.loads(x)["id"] for x in samples.read_text().splitlines()]
    assert len(ids) == len(set(ids))  # no sample scored twice


def test_ctrl_c_exits_130_and_the_board_marks_the_run_incomplete(tmp_path, repo_root, data_dir, ctxbench):
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE.format(n=30))
    store = tmp_path / "runs"
    proc = subprocess.Popen(cli_cmd(suite, store, data_dir, "--backend-arg", "delay=1", "--batch-size", "1"),
                            cwd=repo_root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=interruptible)
    wait_for(lambda: any(len(p.read_text().splitlines()) >= 3 for p in store.glob("*/samples.jsonl")))
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    last = [x for x in err.splitlines() if x.strip()][-1]
    done = int(last.split("interrupted at ")[1].split("/")[0])
    assert last == f"interrupted at {done}/30; rerun the same command to resume" and 3 <= done < 30
    code, _, _ = ctxbench("board", "build", "--store", str(store), "--out", str(tmp_path / "board"))
    assert code == 0
    md = (tmp_path / "board" / "leaderboard.md").read_text()
    (samples,) = store.glob("*/samples.jsonl")
    scored = len(samples.read_text().splitlines())
    assert f"n={scored}/30 \\*" in md and "incomplete: fewer samples scored than planned" in md


@pytest.fixture()
def small_model(tmp_path, smol_without_weights) -> Path:
    """The embedded model's config and tokenizer beside a small stand-in weights file (the echo backend reads no
    weights, but the run's fingerprint hashes them)."""
    dst = smol_without_weights(tmp_path / "model")
    (dst / "model.safetensors").write_bytes(os.urandom(3 << 20))
    return dst


def _score_small(model: Path, tmp_path: Path, data_dir: Path, ctxbench) -> tuple[int, str, str]:
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE.format(n=1))
    return ctxbench("score", "--suite", str(suite), "--store", str(tmp_path / "runs"), "--backend", "echo", "--model",
                    str(model), "--data-dir", str(data_dir))


@pytest.mark.parametrize("change", ["tokenizer", "weights"])
def test_resume_with_another_tokenizer_or_weights_is_refused(change, small_model, tmp_path, data_dir, ctxbench):
    code, _, err = _score_small(small_model, tmp_path, data_dir, ctxbench)
    assert code == 0, err
    (record,) = (tmp_path / "runs").glob("*/record.json")
    before = record.read_bytes()
    if change == "tokenizer":  # the same path, another chat template
        template = small_model / "chat_template.jinja"
        template.write_text(template.read_text().replace("<|im_start|>", "<|im_start|> "))
    else:  # the same path, retrained weights (one byte at the end)
        with open(small_model / "model.safetensors", "r+b") as f:
            f.seek(-1, os.SEEK_END)
            last = f.read(1)
            f.seek(-1, os.SEEK_END)
            f.write(bytes([last[0] ^ 0xFF]))
    code, _, err = _score_small(small_model, tmp_path, data_dir, ctxbench)
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1, err
    assert f"different {change if change == 'tokenizer' else 'model'} fingerprint" in lines[0] and "--fresh" in lines[0]
    assert record.read_bytes() == before  # the record still describes the rows it has


@pytest.mark.parametrize("name", ["x/../../../outside/pwned", "team/v2"])
def test_suite_names_cannot_write_outside_the_store(name, tmp_path, data_dir, ctxbench):
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    suite = deep / "s.yaml"
    suite.write_text(SUITE.format(n=1).replace("name: integrity", f"name: {json.dumps(name)}"))
    store = deep / "store"
    before = {p for p in tmp_path.rglob("*")}
    code, _, err = ctxbench("score", "--suite", str(suite), "--store", str(store), "--backend", "echo", "--data-dir", str(data_dir))
    assert code == 0, err
    new = {p for p in tmp_path.rglob("*")} - before
    assert new and all(p == store or store in p.parents for p in new), sorted(map(str, new))
    (run,) = [p for p in store.iterdir() if p.is_dir()]
    assert run.parent == store and run.name not in (".", "..")  # one component, right under the store
    code, _, err = ctxbench("board", "build", "--store", str(store), "--out", str(tmp_path / "board"))
    assert code == 0, err  # the board finds the run (a nested run directory would be invisible to it)
    assert name in (tmp_path / "board" / "leaderboard.md").read_text().replace("\\", "")
