"""RULER v2 generators on the hand-made fixtures (data/ruler2/) with the SmolLM2 tokenizer: every task fills its
length with the prompt (the answer goes past it, as the official code ran), is deterministic, asks what it says, and scores its own answer 1;
bad data is one line; the quick suite runs end to end through the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.prompting import PromptRenderer
from ctxbench.tasks.ruler2.presets import PRESETS

DATA = Path(__file__).parent / "data"


@pytest.fixture()
def ctx(smol_tokenizer, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    return GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=DATA, verify="full")


def task(name: str, **args):
    return registry.get("task", f"ruler2/{name}")(**args)


def perfect_answer(sample) -> str:
    """What a model that does the task right writes."""
    if sample.metric == "ruler2/mcq":
        return "\\boxed{" + sample.answers[0] + "}"
    if sample.metric == "ruler2/2steps":
        return "\n\n".join(sample.answers)
    return " ".join(sample.answers)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_fits_fills_and_scores_its_answer(name, ctx):
    t = task(name, tokens_to_generate=256)
    s = t.generate(length=3000, index=1, seed=7, ctx=ctx)
    assert 3000 - 250 < s.prompt_tokens <= 3000  # filled to within about one unit (a question or document)
    assert s.prompt_tokens == ctx.count(ctx.renderer.render(s.user_text, ""))
    assert s.answer_prefix == "" and s.meta["haystack_units"] > 0
    assert t.score(perfect_answer(s), s) == 1.0 and t.score("", s) == 0.0
    again = task(name, tokens_to_generate=256).generate(length=3000, index=1, seed=7, ctx=ctx)
    assert again.prompt == s.prompt and again.answers == s.answers


def test_needle_tasks_hide_the_asked_values(ctx):
    s = task("mv_niah_basic").generate(length=2048, index=0, seed=1, ctx=ctx)
    key = re.search(r"for (\S+) mentioned in the provided text\? The special magic numbers", s.prompt).group(1)
    found = re.findall(rf"One of the special magic numbers for {re.escape(key)} is: (\d+)\.", s.prompt)
    assert sorted(found) == sorted(s.answers) and len(s.answers) == 4 and all(len(v) == 10 for v in s.answers)


def test_shared_indices_name_the_asked_question_by_ordinal(ctx):
    s = task("mv_niah_hard").generate(length=4096, index=0, seed=3, ctx=ctx)
    order, index = re.search(r"Please copy the (\d+)\w\w \(1 indexed\) Question (\d+) from the context\.$", s.user_text).groups()
    under = re.findall(rf"^Question {index}: (.*)$", s.user_text, re.M)
    assert len(under) >= int(order) and under[int(order) - 1] == s.answers[0]


def test_qa_basic_asks_for_the_quoted_documents_index(ctx):
    s = task("qa_basic").generate(length=2048, index=1, seed=0, ctx=ctx)
    quoted = s.prompt.split("Text: ")[-1].split("\nMost relevant document index:")[0]
    assert f"Document {s.answers[0]}:\n{quoted}\n" in s.prompt
    assert s.meta["question"] == 1  # sample i asks validation question i, in the official order


def test_too_short_a_length_is_one_line(ctx):
    with pytest.raises(ConfigError, match="length"):
        task("mk_niah_medium").generate(length=512, index=0, seed=0, ctx=ctx)
    with pytest.raises(ConfigError, match="length"):  # 1024 minus the answer budget of 1024 holds nothing
        task("mk_niah_medium", prompt_fills_length=False).generate(length=1024, index=0, seed=0, ctx=ctx)


def test_bad_mmlu_copy_is_one_line(ctx, tmp_path):
    bad, partial = tmp_path / "bad", tmp_path / "partial"
    bad.mkdir(), partial.mkdir()
    for f in ("test.jsonl", "auxiliary_train.jsonl"):
        (bad / f).write_text(json.dumps({"question": "q"}) + "\n")
    (partial / "test.jsonl").write_text((DATA / "ruler2" / "mmlu" / "test.jsonl").read_text())
    with pytest.raises(ConfigError, match="data_path: .* MMLU's format"):
        task("mk_niah_easy", data_path=str(bad)).prepare(ctx)
    with pytest.raises(ConfigError, match="data_path: .* has no auxiliary_train"):
        task("mk_niah_easy", data_path=str(partial)).prepare(ctx)
    with pytest.raises(ConfigError, match="data_path: .* is not a directory"):
        task("qa_basic", data_path=str(tmp_path / "missing")).prepare(ctx)


def test_algo_type_without_a_prompt_is_refused():
    with pytest.raises(ValueError, match="algo_type: niah has no 2steps prompt"):
        task("mv_niah_easy", algo_type="2steps")


def test_quick_suite_runs_end_to_end(ctxbench, tmp_path, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    code, out, err = ctxbench("score", "--backend", "echo", "--model", "smollm2-135m", "--suite", "ruler2-quick",
                              "--lengths", "2048", "--samples", "1", "--data-dir", str(DATA), "--store", str(tmp_path / "runs"))
    assert code == 0, err
    rows = [json.loads(line) for f in (tmp_path / "runs").rglob("samples.jsonl") for line in f.read_text().splitlines()]
    assert sorted(r["task"] for r in rows) == sorted(f"ruler2/{n}" for n in PRESETS)
    assert all(r["score"] is not None and r["prompt_tokens"] <= 2048 for r in rows)
    assert "ruler2/qa_medium" in out and "average" in out


def test_local_copies_key_the_sample_cache(ctx):
    names = {p.name for p in task("mk_niah_easy").data_files(ctx)} | {p.name for p in task("qa_hard").data_files(ctx)}
    assert names == {"test.jsonl", "auxiliary_train.jsonl", "train.json", "validation.json"}
    assert task("mk_niah_basic").data_files(ctx) == []


def test_the_prompt_fills_the_length_by_default_as_the_official_code_ran(ctx):
    official = task("qa_hard").generate(length=3000, index=0, seed=0, ctx=ctx)
    within = task("qa_hard", prompt_fills_length=False)
    ours = within.generate(length=3000, index=0, seed=0, ctx=ctx)
    assert 3000 - 250 < official.prompt_tokens <= 3000 < official.prompt_tokens + official.max_new_tokens
    assert 3000 - 250 - 256 < ours.prompt_tokens <= 3000 - 256  # the answer budget reserved inside the length
    assert task("qa_hard").args_json()["prompt_fills_length"] is True and within.args_json()["prompt_fills_length"] is False
    assert task("qa_hard").past_length == 256 and within.past_length == 0


def _cells(name: str, length: int, **args):
    from ctxbench.harness.run.planning import Cell

    return [Cell(task=task(name, **args), length=length, planned=1, indices=(0,))]


def test_the_context_must_hold_the_answer_generated_past_the_length():
    from types import SimpleNamespace

    from ctxbench.harness.core.errors import PromptTooLongError
    from ctxbench.harness.run.planning import check_lengths

    small, enough = SimpleNamespace(context_length=4096 + 1023), SimpleNamespace(context_length=4096 + 1024)
    with pytest.raises(PromptTooLongError) as refused:
        check_lengths(_cells("qa_medium", 4096), small, "refuse")
    message = str(refused.value)
    assert "\n" not in message and "lengths: 4096 plus up to 1024 answer tokens generated past them" in message
    assert "ruler2/qa_medium" in message and "prompt_fills_length: false" in message
    check_lengths(_cells("qa_medium", 4096), enough, "refuse")
    check_lengths(_cells("qa_medium", 4096, prompt_fills_length=False), SimpleNamespace(context_length=4096), "refuse")
    check_lengths(_cells("qa_medium", 4096), small, "middle")  # cut in the middle: the answer still fits the context


def test_the_fill_is_in_the_tasks_identity():
    """Runs scored when the answer fitted within the length (version 0) are never resumed by the fill's (version 1)."""
    from ctxbench.harness.core.task_versions import task_version

    assert all(task_version(f"ruler2/{name}") == 1 for name in PRESETS)


def test_intended_box_is_a_recorded_option(ctx):
    ran = task("mk_niah_hard").generate(length=2048, index=0, seed=0, ctx=ctx)
    meant = task("mk_niah_hard", intended_box=True)
    assert meant.args_json()["intended_box"] is True and "inside \\boxed\\{\\}." in ran.user_text
    assert "inside \\boxed{}." in meant.generate(length=2048, index=0, seed=0, ctx=ctx).user_text


@pytest.mark.parametrize("name", ["mk_niah_basic", "mv_niah_basic"])
def test_needle_lines_are_costed_exactly(name, ctx):
    """Each line's tokens come from its key's and value's, so the fit's first full count is the final one."""
    t = task(name)
    for index in range(3):
        before = ctx.full_tokenizations
        t.generate(length=4096, index=index, seed=11, ctx=ctx)
        assert ctx.full_tokenizations - before == 1


def test_sequential_scoring_accepts_independent_samples(ctxbench, tmp_path, monkeypatch):
    """No cluster ids (every sample draws its own haystack): --until holds its guarantee and runs."""
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    code, _, err = ctxbench("score", "--backend", "echo", "--model", "smollm2-135m", "--suite", "ruler2-quick",
                            "--tasks", "ruler2/mk_niah_basic,ruler2/qa_hard", "--lengths", "2048", "--until", "width=10",
                            "--data-dir", str(DATA), "--store", str(tmp_path / "runs"))
    assert code == 0, err
    adaptive = json.loads(next((tmp_path / "runs").rglob("adaptive.json")).read_text())
    assert adaptive["rule"]["until"] == "width" and adaptive["lengths"]["2048"]["tasks"] == ["ruler2/mk_niah_basic", "ruler2/qa_hard"]
