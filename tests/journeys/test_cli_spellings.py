"""Journeys 11 and 12: what lm-eval and RULER users type. `--tasks` without `--suite` builds an ad-hoc suite, and
lm-eval 0.4.13's spellings (`--batch_size`, `--output_path`, `--model_args`, `--num_fewshot`, `--gen_kwargs`,
`--log_samples`) mean what lm-eval means by them, or are refused with one line that says why. The commands run in
process (`user_in_process`): none needs a process of its own."""

from __future__ import annotations

import json
from pathlib import Path


def record(run_root: Path) -> dict:
    (path,) = run_root.glob("*/record.json")
    return json.loads(path.read_text())


def test_tasks_without_a_suite_build_an_adhoc_suite(user_in_process):
    r = user_in_process.run("ctxbench score --tasks kv/retrieval --lengths 1024 --samples 2 --backend echo")
    assert r.code == 0, r.err[-2000:]
    rec = record(user_in_process.cwd / "runs")
    assert rec["suite"] == "adhoc"
    assert rec["suite_config"]["lengths"] == [1024] and rec["suite_config"]["samples"] == 2
    assert [t["task"] for t in rec["suite_config"]["tasks"]] == ["kv/retrieval"]
    assert "adhoc" in r.out  # the table's title names the suite


def test_adhoc_tasks_that_match_nothing_are_one_line(user_in_process):
    r = user_in_process.run("ctxbench score --tasks nosuch/task --backend echo")
    assert r.code == 2
    assert r.err.strip().count("\n") == 0 and "--tasks" in r.err and "ctxbench tasks" in r.err
    assert not (user_in_process.cwd / "runs").exists()


def test_suite_with_tasks_still_filters(user_in_process):
    r = user_in_process.run("ctxbench score --suite ruler-quick --tasks kv/retrieval --backend echo")
    assert r.code == 2 and "matches no task of suite ruler-quick" in r.err


def test_lmeval_batch_size_and_output_path(user_in_process):
    r = user_in_process.run("ctxbench score --tasks kv/retrieval --lengths 1024 --samples 2 --backend echo "
                 "--batch_size 2 --output_path out --log_samples")
    assert r.code == 0, r.err[-2000:]
    assert not (user_in_process.cwd / "runs").exists()
    rec = record(user_in_process.cwd / "out")
    assert rec["backend_args"]["batch_size"] == 2
    assert "--log_samples" in r.err and "samples.jsonl" in r.err  # a note, never a suggestion of --samples


def test_model_args_map_to_model_and_backend_args(user_in_process):
    r = user_in_process.run("ctxbench score --tasks kv/retrieval --lengths 1024 --samples 1 --backend echo "
                 "--model_args pretrained=smollm2-135m,delay=0.01")
    assert r.code == 0, r.err[-2000:]
    rec = record(user_in_process.cwd / "runs")
    assert rec["model"] == "smollm2-135m" and rec["backend_args"]["delay"] == 0.01
    bad = user_in_process.run("ctxbench score --tasks kv/retrieval --backend echo --model_args dtipe=float32")
    assert bad.code == 2 and "dtipe" in bad.err and "valid keys" in bad.err


def test_lmeval_spellings_that_do_not_apply_are_one_line(user_in_process):
    fewshot = user_in_process.run("ctxbench score --tasks kv/retrieval --backend echo --num_fewshot 5")
    assert fewshot.code == 2 and fewshot.err.startswith("error: --num_fewshot") and "ruler/cwe" in fewshot.err
    lmeval_only = user_in_process.run("ctxbench score --tasks kv/retrieval --backend echo --gen_kwargs max_gen_toks=64")
    assert lmeval_only.code == 2 and "tokens_to_generate" in lmeval_only.err and lmeval_only.err.strip().count("\n") == 0
    assert not (user_in_process.cwd / "runs").exists()
    applies = user_in_process.run("ctxbench score --tasks ruler/cwe --lengths 1024 --samples 1 --backend echo "
                       "--gen_kwargs temperature=0,do_sample=false --num_fewshot 0")
    assert applies.code == 0, applies.err[-2000:]
    assert record(user_in_process.cwd / "runs")["suite_config"]["tasks"][0]["args"] == {"num_fewshot": 0}


def test_lmeval_command_takes_lmeval_spellings(user_in_process):
    r = user_in_process.run("ctxbench lmeval --help", env={"COLUMNS": "200"})
    assert r.code == 0
    for spelling in ("--batch_size", "--num_fewshot", "--model_args", "--output_path", "--log_samples",
                     "--apply_chat_template", "--include_path", "--bootstrap_iters"):
        assert spelling in r.out, spelling
