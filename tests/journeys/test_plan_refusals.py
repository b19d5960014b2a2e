"""Issue 21 items 5, 8, 14, 17 and 18: every check of a plan runs before the first byte is written.

Lengths per task, capabilities, the context length (from the model's config, before its weights load), an upper
bound on lengths with a memory and time estimate, duplicate tasks and the identity of a resumed run: a refusal is
one line, exit 2, and leaves the disk as it was. A finished rerun prints its table without loading the weights.
The commands run in process (`user_in_process`); the tiny checkpoint is trained once per test run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TWO_TASKS = """name: j
lengths: [512]
samples: 2
tasks:
  - ruler/niah_single_1
  - kv/retrieval
"""


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every path under root with its bytes and mtime: what a refusal must leave untouched."""
    out = {str(root): (b"", root.stat().st_mtime_ns)}
    for p in sorted(root.rglob("*")):
        out[str(p)] = (p.read_bytes() if p.is_file() else b"", p.stat().st_mtime_ns)
    return out


def test_a_length_one_task_cannot_fit_is_refused_before_anything_is_written(user_in_process):
    (user_in_process.cwd / "s.yaml").write_text(TWO_TASKS)
    r = user_in_process.run("ctxbench score --backend echo --suite s.yaml --lengths 256")  # niah fits 256 tokens, kv does not
    assert r.code == 2, r.err
    assert "kv/retrieval" in r.last_err_line and r.last_err_line.startswith("error:")
    assert user_in_process.files() == {"s.yaml"}, "a refused plan wrote to the store"


@pytest.fixture()
def tokenizer_dir(tmp_path: Path, smol_without_weights) -> Path:
    """A local model directory the echo backend reads its tokenizer from (SmolLM2's, without its weights)."""
    return smol_without_weights(tmp_path / "tok")


def test_a_refused_resume_leaves_the_run_directory_untouched(user_in_process, tokenizer_dir):
    (user_in_process.cwd / "s.yaml").write_text(TWO_TASKS)
    command = f"ctxbench score --backend echo --suite s.yaml --model {tokenizer_dir} --label m"
    assert user_in_process.run(command).code == 0
    (run_dir,) = (user_in_process.cwd / "runs").iterdir()
    config = tokenizer_dir / "config.json"
    config.write_text(config.read_text().replace("{", '{"retrained": true, ', 1))  # other weights, same path
    before = _snapshot(run_dir)

    r = user_in_process.run(command)
    assert r.code == 2, r.err
    assert "different model fingerprint" in r.last_err_line
    assert _snapshot(run_dir) == before, "a refused resume touched the run directory"


def test_a_length_over_the_checkpoint_context_is_refused_before_the_weights_load(user_in_process, tiny_copy):
    weights = tiny_copy / "model.safetensors"
    weights.write_bytes(b"not weights")  # loading them would fail: the refusal must come first, from config.json
    (user_in_process.cwd / "s.yaml").write_text(TWO_TASKS)
    r = user_in_process.run(f"ctxbench score --model {tiny_copy} --suite s.yaml --tasks ruler/niah_single_1 --lengths 1024")
    assert r.code == 2, r.err
    assert "context of 512" in r.last_err_line
    assert user_in_process.files() == {"s.yaml"}


def test_a_finished_rerun_prints_the_table_without_loading_weights(user_in_process, tiny_copy, monkeypatch, ctxbench):
    (user_in_process.cwd / "s.yaml").write_text(TWO_TASKS)
    command = f"score --model {tiny_copy} --suite s.yaml --tasks ruler/niah_single_1 --lengths 256 --samples 1"
    assert user_in_process.run("ctxbench " + command).code == 0

    import transformers

    def no_weights(*args, **kwargs):
        raise AssertionError("a finished rerun loaded the model's weights")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_weights)
    monkeypatch.chdir(user_in_process.cwd)
    code, out, err = ctxbench(*command.split())
    assert code == 0, err
    assert "ruler/niah_single_1" in out and "results: runs" in out


@pytest.mark.parametrize("truncation", ["refuse", "middle"])
def test_a_typoed_length_is_refused_at_once_with_the_estimate(user_in_process, truncation):
    (user_in_process.cwd / "s.yaml").write_text(TWO_TASKS.replace("[512]", "[1000000000]"))  # meant 1000k
    r = user_in_process.run(f"ctxbench score --backend echo --suite s.yaml --truncation {truncation}", timeout=120)
    assert r.code == 2, r.err
    line = r.last_err_line
    assert "1000000000" in line and "CTXBENCH_MAX_LENGTH" in line and "GB" in line, line
    assert user_in_process.files() == {"s.yaml"}


def test_a_plan_larger_than_memory_is_refused_even_under_a_raised_bound(user_in_process):
    (user_in_process.cwd / "s.yaml").write_text(TWO_TASKS.replace("[512]", "[1000000000]"))
    r = user_in_process.run("ctxbench score --backend echo --suite s.yaml", env={"CTXBENCH_MAX_LENGTH": "1e12"}, timeout=120)
    assert r.code == 2, r.err
    assert "memory" in r.last_err_line and "GB" in r.last_err_line, r.last_err_line
    assert user_in_process.files() == {"s.yaml"}


@pytest.mark.parametrize("second_args", ["{depths: 5}", "{depths: 3}"])
def test_a_task_listed_twice_is_refused_at_load(user_in_process, second_args):
    (user_in_process.cwd / "s.yaml").write_text(f"""name: twice
lengths: [512]
samples: 1
tasks:
  - {{task: niah/single, args: {{depths: 3}}}}
  - {{task: niah/single, args: {second_args}}}
""")
    r = user_in_process.run("ctxbench score --backend echo --suite s.yaml")
    assert r.code == 2, r.err
    assert "tasks.1: niah/single listed twice; give it a distinct `name`" in r.last_err_line
    assert user_in_process.files() == {"s.yaml"}
