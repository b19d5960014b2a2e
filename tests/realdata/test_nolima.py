"""NoLiMa: the official "contains" scoring, the tests built as run_tests.py builds them, the character draws, and
the needle placed by ctxbench's depth machinery in a hand-written book (no network)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.prompting import PromptRenderer
from ctxbench.tasks.nolima.task import build_tests, character_at, nolima_contains

CONTAINS = [
    ("Yuki", ["Yuki"], 1.0),
    ("yuki", ["Yuki"], 0.0),  # case-sensitive
    ("The answer is Yukiko.", ["Yuki"], 1.0),  # a substring, even inside a longer name
    ("Stuart, Katie or Yuki", ["Yuki"], 1.0),  # listing every name still counts
    ("  Yuki\n", ["Yuki"], 1.0),
    ("Y uki", ["Yuki"], 0.0),
]


@pytest.mark.parametrize("response,golds,expected", CONTAINS)
def test_contains_metric(response, golds, expected):
    assert nolima_contains(response, golds) == expected


ENTRY = {"id": "0401_T", "system_prompt": "", "needle": "{CHAR} lives next to the {1} in {2}.",
         "questions": {"onehop": "Which character has been to {2}?", "twohop": "Who saw {1} in {2}?"},
         "character_set": ["Yuki", "Stuart", "Katie", "Caleb"],
         "tests": {"T01": {"input_args": ["Semper Opera House", "Dresden"]}}}


def test_tests_follow_run_tests_including_its_question_fill():
    tests = build_tests([ENTRY], None)
    assert [t["name"] for t in tests] == ["0401_T_T01_onehop", "0401_T_T01_twohop"]
    assert tests[0]["needle"] == "{CHAR} lives next to the Semper Opera House in Dresden." and tests[0]["seed"] == 401
    assert tests[0]["question"] == "Which character has been to Dresden?"
    assert tests[1]["question"] == "Who saw {1} in Dresden?"  # refilled from the original: only the last slot survives
    assert [t["name"] for t in build_tests([ENTRY], ["twohop"])] == ["0401_T_T01_twohop"]


def test_character_draws_match_numpys_global_sequence():
    np.random.seed(42 + 401 + 1)
    want = [str(np.random.choice(ENTRY["character_set"])) for _ in range(6)]
    assert [character_at(ENTRY["character_set"], 42 + 401 + 1, i) for i in range(6)] == want


@pytest.fixture()
def nolima_dir(tmp_path):
    root = tmp_path / "nolima"
    (root / "needlesets").mkdir(parents=True)
    (root / "needlesets" / "needle_set.json").write_text(json.dumps([ENTRY]))
    (root / "haystack" / "rand_shuffle").mkdir(parents=True)
    for n in (1, 2):
        sentences = " ".join(f"Book {n} sentence {i} tells of rivers and hills." for i in range(400))
        (root / "haystack" / "rand_shuffle" / f"rand_book_{n}.txt").write_text(sentences)
    return tmp_path


def test_samples_place_the_needle_at_each_depth_of_each_book(smol_tokenizer, nolima_dir, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer, "plain"), data_dir=nolima_dir)
    task = registry.get("task", "nolima/needles")(books=[1, 2], depths=3, question_types=["onehop"])
    assert task.samples_per_length(ctx) == 6 and task.max_new_tokens == 192
    assert sorted(p.name for p in task.data_files(ctx)) == ["needle_set.json", "rand_book_1.txt", "rand_book_2.txt"]
    samples = [task.generate(length=1024, index=i, seed=0, ctx=ctx) for i in range(6)]
    assert [(s.meta["book"], s.meta["depth"]) for s in samples] == [(1, 0.0), (1, 50.0), (1, 100.0), (2, 0.0), (2, 50.0), (2, 100.0)]
    assert len({s.meta["cluster"] for s in samples[:3]}) == 1 and samples[0].meta["cluster"] != samples[3].meta["cluster"]
    for s in samples:
        assert s.prompt_tokens + 192 <= 1024 and f"{s.answers[0]} lives next to the Semper Opera House" in s.prompt
        assert s.meta["character"] == s.answers[0] and "Question: Which character has been to Dresden?" in s.prompt
    assert samples[0].depths[0] < samples[1].depths[0] < samples[2].depths[0]
    assert samples[1].answers[0] == character_at(ENTRY["character_set"], 42 + 401, 1)  # book 1: seed + 0
    assert task.score(f"It is {samples[0].answers[0]}.", samples[0]) == 1.0
    with pytest.raises(ConfigError, match="out of range"):
        task.generate(length=1024, index=6, seed=0, ctx=ctx)


def test_distractor_sets_and_bad_books_are_refused(smol_tokenizer, nolima_dir):
    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer, "plain"), data_dir=nolima_dir)
    path = nolima_dir / "with_distractor.json"
    path.write_text(json.dumps([{**ENTRY, "distractors": {"onehop": "x"}}]))
    with pytest.raises(ConfigError, match="places distractors"):
        registry.get("task", "nolima/needles")(needle_set=str(path)).prepare(ctx)
    with pytest.raises(ValueError, match="rand_book_1 ... rand_book_5"):
        registry.get("task", "nolima/hard")(books=[6])


def test_shipped_suite_builds():
    from ctxbench.harness.core.config import build_task, load_suite

    suite = load_suite("nolima")
    assert [build_task(spec).name for spec in suite.tasks] == ["nolima/needles"] and suite.lengths[0] == 512
