"""The viewer's prompts, regenerated from a run's record and checked against the stored hash (issue 36)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from ctxbench.harness.core.store import RunStore
from ctxbench.leaderboard.viewer import sample_details
from ctxbench.leaderboard.viewer_prompts import FOLD_CHARS, HEAD, KEEP_FULL, TAIL, WINDOW, excerpt, prompt_view, spans

SCORE = ("score", "--backend", "echo", "--suite", "ruler-quick", "--tasks", "ruler/niah_single_2", "--lengths", "512",
         "--samples", "2", "--label", "m")


@pytest.fixture(scope="module")
def scored_once(tmp_path_factory, data_dir) -> Path:
    """A real echo run of two niah samples on the essays, scored once in-process (a couple of seconds): its store."""
    from ctxbench.harness import cli

    root = tmp_path_factory.mktemp("prompts") / "runs"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CTXBENCH_DATA_DIR", str(data_dir))
        mp.setattr(sys, "argv", ["ctxbench", *SCORE, "--store", str(root)])
        try:
            cli.main()
        except SystemExit as e:
            assert not e.code, e
    return root


@pytest.fixture
def scored(scored_once, tmp_path, data_dir, monkeypatch) -> RunStore:
    """A copy of that store, for a test to tamper with."""
    monkeypatch.setenv("CTXBENCH_DATA_DIR", str(data_dir))
    shutil.copytree(scored_once, tmp_path / "runs")
    (run,) = (tmp_path / "runs").iterdir()
    return RunStore(tmp_path / "runs", run.name)


def _rewrite(store: RunStore, edit) -> None:
    rows = [json.loads(x) for x in store.samples_path.read_text().splitlines()]
    store.samples_path.write_text("".join(json.dumps(edit(r)) + "\n" for r in rows))


def _views(store: RunStore) -> dict[int, dict]:
    return {key[3]: d.get("prompt_view") for key, d in sample_details([store]).items()}


def test_a_runs_prompts_are_regenerated_with_the_stored_hash_and_the_needle_in_them(scored):
    views = _views(scored)
    assert sorted(views) == [0, 1]
    rows = {r["index"]: r for r in map(json.loads, scored.samples_path.read_text().splitlines())}
    for i, view in views.items():
        assert view["source"] == "regenerated" and "note" not in view
        assert view["chars"] == len(view["text"]) and rows[i]["answers"][0] in view["text"]  # the needle's value


def test_a_hash_that_does_not_match_shows_the_note_with_both_hashes(scored):
    _rewrite(scored, lambda r: {**r, "prompt_hash": "0123456789abcdef"} if r["index"] == 1 else r)
    views = _views(scored)
    assert "note" not in views[0]
    note = views[1]["note"]
    assert note.startswith("prompt not reproducible here: ") and "not the stored 0123456789abcdef" in note
    assert "text" not in views[1]  # a prompt that is not the run's is never shown as if it were


def test_other_task_data_here_is_a_mismatch_not_a_wrong_prompt(scored, tmp_path, monkeypatch):
    essays = tmp_path / "other" / "pg_essays"
    essays.mkdir(parents=True)
    (essays / "one.txt").write_text("A different essay. " * 400)
    monkeypatch.setenv("CTXBENCH_DATA_DIR", str(tmp_path / "other"))
    notes = {i: v.get("note", "") for i, v in _views(scored).items()}
    assert all(n.startswith("prompt not reproducible here:") for n in notes.values()), notes


def test_a_record_without_suite_or_tokenizer_gets_the_note_and_the_board_still_builds(scored):
    record = json.loads(scored.record_path.read_text())
    scored.record_path.write_text(json.dumps({**record, "suite_config": {}}))
    views = _views(scored)
    assert {v["note"] for v in views.values()} == {
        "prompt not reproducible here: the run's record names no suite or tokenizer (an imported or older run)"}


def test_no_prompts_skips_the_regeneration(scored):
    assert all(v and "text" in v for v in _views(scored).values())
    assert {d.get("prompt_view") for d in sample_details([scored], prompts=False).values()} == {None}


def test_a_short_prompt_is_kept_whole_and_a_long_one_as_head_tail_and_windows():
    assert prompt_view("short", ["x"], source="stored") == {"chars": 5, "source": "stored", "text": "short"}
    filler = "The grass is green. " * 5_000
    text = filler[:40_000] + "The magic number is 7123456." + filler[:40_000]
    view = prompt_view(text, ["7123456", "absent"], source="regenerated")
    assert "text" not in view and view["chars"] == len(text) > KEEP_FULL
    starts = [a for a, _ in view["parts"]]
    assert starts[0] == 0 and len(view["parts"][0][1]) == HEAD
    assert view["parts"][-1][0] + len(view["parts"][-1][1]) == len(text) and len(view["parts"][-1][1]) == TAIL
    (middle,) = view["parts"][1:-1]
    assert "The magic number is 7123456." in middle[1] and len(middle[1]) == len("7123456") + 2 * WINDOW
    assert sum(len(p) for _, p in view["parts"]) < 3_000  # bounded, whatever the prompt's length


def test_a_mid_sized_prompt_keeps_text_and_excerpts_and_overlapping_windows_merge():
    text = "a" * (FOLD_CHARS + 100) + " gold " + "b" * 100
    view = prompt_view(text, ["gold"], source="stored")
    assert view["text"] == text and view["parts"][-1][0] + len(view["parts"][-1][1]) == len(text)
    assert len(excerpt(text, ["gold"])) == 2  # the gold's window runs into the tail: one part, not two


def test_marks_are_whole_words_and_a_short_gold_is_not_looked_for():
    text = "Item 17000 is a decoy; the magic number is 7000. Answer A."
    assert spans(text, ["7000"]) == [(text.index(" 7000.") + 1, text.index(" 7000.") + 5)]  # not inside 17000
    assert spans(text, ["A", "is"]) == []  # a label gold would mark every letter; two characters: too short
    assert spans(text, ["MAGIC number"]) == [(text.index("magic"), text.index("magic") + len("magic number"))]


def test_a_hub_tokenizer_missing_from_the_cache_is_a_note_and_nothing_is_downloaded(scored, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub-cache"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty-hub-cache"))
    record = json.loads(scored.record_path.read_text())
    scored.record_path.write_text(json.dumps({**record, "tokenizer": "some-org/some-model"}))
    notes = {v["note"] for v in _views(scored).values()}
    assert notes == {"prompt not reproducible here: the tokenizer some-org/some-model is not in this machine's Hugging "
                     "Face cache (a board build downloads nothing)"}
