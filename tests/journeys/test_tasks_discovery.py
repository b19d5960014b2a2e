"""Journey 13: a task's arguments can be discovered. `ctxbench tasks NAME` shows each argument (type, default, what it
does); an unknown argument in `--arg` or a suite's `args:` names the valid ones; a pattern that matches nothing is one
line and exit 2. The commands run in process (`user_in_process`)."""

from __future__ import annotations


def test_one_task_shows_its_arguments(user_in_process):
    r = user_in_process.run("ctxbench tasks ruler/niah_single_2", env={"COLUMNS": "200"})
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    num_keys = next(x for x in lines if x.split()[:1] == ["num_keys"])
    assert "int" in num_keys and "1" in num_keys.split()  # type and default
    haystack = next(x for x in lines if x.split()[:1] == ["haystack"])
    assert "essay" in haystack  # the preset's value, not the family's default


def test_a_pattern_that_matches_nothing_is_one_line(user_in_process):
    r = user_in_process.run(["ctxbench", "tasks", "nosuch*"])
    assert r.code == 2
    assert r.out == "" and r.err.strip().count("\n") == 0 and "nosuch*" in r.err


def test_an_unknown_task_argument_lists_the_valid_ones(user_in_process):
    r = user_in_process.run("ctxbench generate --task ruler/niah_single_2 --length 1k --samples 1 --out x.jsonl --arg num_keyz=3")
    assert r.code == 2 and r.err.strip().count("\n") == 0
    assert "num_keyz" in r.err and "num_keys" in r.err and "valid keys" in r.err
    assert not (user_in_process.cwd / "x.jsonl").exists()
    (user_in_process.cwd / "s.yaml").write_text("name: s\nlengths: [1024]\nsamples: 1\n"
                                      "tasks: [{task: ruler/niah_single_2, args: {num_keyz: 3}}]\n")
    s = user_in_process.run("ctxbench score --suite s.yaml --backend echo")
    assert s.code == 2 and "num_keyz" in s.err and "num_keys" in s.err and "valid keys" in s.err
    assert not (user_in_process.cwd / "runs").exists()
