"""Bad input: a one-line error naming the field, a non-zero exit, no traceback, nothing written."""

from pathlib import Path
from types import SimpleNamespace

import pytest

GOOD = """name: t
lengths: [1024]
samples: 1
tasks: [ruler/niah_single_1]
"""


@pytest.fixture()
def run_cli(ctxbench, monkeypatch):
    """run_cli(*args, cwd=...): the CLI through its main() in this process, in cwd (a refusal needs no process of its
    own); the result reads as a finished process's (returncode, stdout, stderr)."""
    def run(*args: str, cwd: Path) -> SimpleNamespace:
        monkeypatch.chdir(cwd)
        code, out, err = ctxbench(*args)
        return SimpleNamespace(returncode=code, stdout=out, stderr=err)

    return run


CASES = {
    "unknown_top_key": (GOOD + "sampels: 3\n", "sampels", "unknown key"),
    "bad_length": (GOOD.replace("[1024]", "[1024, -5]"), "lengths", "at least 64"),
    "zero_samples": (GOOD.replace("samples: 1", "samples: 0"), "samples", "greater than or equal to 1"),
    "unknown_task": (GOOD.replace("ruler/niah_single_1", "ruler/niah_singel_1"), "tasks.0.task", "did you mean 'ruler/niah_single_1'"),
    "unknown_task_arg": (GOOD.replace("tasks: [ruler/niah_single_1]", "tasks:\n  - task: ruler/niah_multikey_1\n    args: {num_keyz: 8}"),
                         "tasks.0.args", "num_keyz"),
    "bad_task_value": (GOOD.replace("tasks: [ruler/niah_single_1]", "tasks:\n  - task: ruler/niah_single_2\n    args: {haystack: sand}"),
                       "haystack", "'essay', 'noise' or 'needle'"),
    "bad_depths": (GOOD.replace("tasks: [ruler/niah_single_1]", "tasks:\n  - task: ruler/niah_multivalue\n    args: {depths: [10, 20]}"),
                   "depths", "1 or 4 values"),
    "invalid_yaml": ("name: t\nlengths: [1024\n", "suite.yaml", "invalid YAML"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_suite_is_one_clear_line(case, tmp_path, repo_root, run_cli):
    text, field, hint = CASES[case]
    suite = tmp_path / "suite.yaml"
    suite.write_text(text)
    out = tmp_path / "runs"
    r = run_cli("score", "--suite", str(suite), "--store", str(out), "--backend", "echo", cwd=repo_root)
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.strip().splitlines() if x.strip()]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert field in lines[0] and hint in lines[0], lines[0]
    assert not out.exists()  # nothing half-written


def test_bad_cli_values(tmp_path, repo_root, run_cli):
    r = run_cli("score", "--suite", "no-such-suite", "--backend", "echo", cwd=repo_root)
    assert r.returncode == 2 and "suite" in r.stderr and "ruler-quick" in r.stderr
    r = run_cli("score", "--lengths", "1k,abc", "--backend", "echo", cwd=repo_root)
    assert r.returncode == 2 and "--lengths" in r.stderr
    r = run_cli("generate", "--task", "ruler/nope", "--length", "1024", "--out", str(tmp_path / "x.jsonl"), cwd=repo_root)
    assert r.returncode == 2 and "did you mean" in r.stderr and not (tmp_path / "x.jsonl").exists()
