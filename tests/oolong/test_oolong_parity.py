"""Oolong parity with the official code as it runs: abertsch72/oolong at commit
adbf1cb56a0b0c7885649ac12589f7d6e215c841 (src/eval/eval_helpers.py: synth_process_response, dnd_process_response;
src/eval/eval_script_batched.py: the messages of launch()).

The expected scores and parses below are literals printed by the official functions themselves, loaded from that
file in /tmp without its API imports (litellm, datasets) and run on these responses with python-dateutil 2.9.0;
none is computed here. Each case is one a plausible re-implementation gets wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbench.tasks.oolong.scoring import dnd_score, synth_parse, synth_score

FIXTURE = Path(__file__).parent / "data" / "oolong"
LABEL, NUMERIC, COMPARISON, DATE, USER = (f"ANSWER_TYPE.{t}" for t in ("LABEL", "NUMERIC", "COMPARISON", "DATE", "USER"))
DAY = "[datetime.date(2023, 1, 5)]"

# (gold answer column, answer_type, response, official score, official parse_confidence)
SYNTH = [
    ("['abbreviation']", LABEL, "Answer: abbreviation", 1.0, "vhigh"),
    ("['abbreviation']", LABEL, "Label: **abbreviation**", 1.0, "vhigh"),
    ("['abbreviation']", LABEL, "abbreviation", 1.0, "low"),  # no colon, short: taken whole
    ("['abbreviation']", LABEL, "abbreviation\n", 0.0, "low"),  # ... whole means unstripped
    ("['abbreviation']", LABEL, "The most common label is abbreviation", 1.0, "low"),  # no colon, long: the last word
    ("['abbreviation']", LABEL, "Answer: [abbreviation]", 1.0, "vhigh"),
    ("['abbreviation']", LABEL, "Answer: Abbreviation", 0.0, "vhigh"),  # case-sensitive
    ("['abbreviation']", LABEL, "**Answer:** abbreviation", 0.0, "vhigh"),  # stripped before the bold goes: " abbreviation"
    ("['abbreviation']", LABEL, "Answer: the label that occurs most is abbreviation", 0.0, "high"),
    ("[12]", NUMERIC, "Answer: 12", 1.0, "vhigh"),
    ("[12]", NUMERIC, "Answer: 10", 0.5625, "vhigh"),
    ("[12]", NUMERIC, "Answer: 15", 0.421875, "vhigh"),
    ("[12]", NUMERIC, "Answer: twelve", 0.0, "low"),
    ("[12]", NUMERIC, "Answer: 12.0", 0.0, "low"),  # int("12.0") fails
    ("[12]", NUMERIC, "There are 14 instances", 0.0, "low"),
    ("[12]", NUMERIC, "I count 11", 0.0, "low"),
    ("[12]", NUMERIC, "11", 0.75, "low"),
    ("[12]", NUMERIC, "**Answer:** 13", 0.75, "vhigh"),  # int(" 13") forgives the space a label does not
    ("[12]", NUMERIC, "Answer: -3", 0.013363461010158062, "vhigh"),
    ("[12]", NUMERIC, "Step 1: count. Step 2: Answer: 9", 0.421875, "vhigh"),  # after the LAST colon
    ("['more common than']", COMPARISON, "Answer: more common", 1.0, "vhigh"),
    ("['more common than']", COMPARISON, "Answer: abbreviation is more common than entity", 1.0, "high"),
    ("['more common than']", COMPARISON, "Answer: same frequency", 0.0, "vhigh"),
    ("['more common than']", COMPARISON, "Answer: less common than entity, clearly so", 0.0, "high"),
    (DAY, DATE, "Answer: Jan 5, 2023", 1.0, "vhigh"),
    (DAY, DATE, "Answer: 2023-01-06", 0.0, "vhigh"),
    (DAY, DATE, "Answer: not a date", 0.0, "low"),
    (DAY, DATE, "Answer: 01/05/2023", 1.0, "vhigh"),  # dateutil reads month first
    (DAY, DATE, "Answer: 5/1/2023", 0.0, "vhigh"),
    ("['44362']", USER, "User: 44362", 1.0, "vhigh"),
    ("['44362']", USER, "The user is 44362.", 0.0, "low"),
    ("[3]", NUMERIC, "", 0.0, "low"),
]

# (gold answer column, response, official score, official attempted_parse as ctxbench shows it)
DND = [
    ("5", "\\boxed{5}", 1.0, "5"),
    ("5", "\\boxed{7}", 0.5625, "7"),
    ("5", "\\boxed{\\text{5}}", 1.0, "5"),
    ("5", "5", 0.0, "5"),  # no box: the response stays a string, and a string never equals an int gold
    ("5", "\\boxed{{5}}", 1.0, "5"),
    ("5", "\\boxed{5} or maybe \\boxed{6}", 1.0, "5"),  # the first box
    ("5", "\\boxed{5.0}", 0.0, "5.0"),
    ("Fireball", "\\boxed{fireball}", 1.0, "fireball"),
    ("Fireball", "\\boxed{\\text{ Fireball }}", 1.0, " Fireball "),
    ("Fireball", "Fireball", 1.0, "Fireball"),  # unboxed strings still compare
    ("Fireball", "\\boxed{Fire, ball}", 0.0, "Fire, ball"),
    ("Vex, Percy, Grog", "\\boxed{Percy, Vex}", 0.6666666666666666, "Percy, Vex"),
    ("Vex, Percy, Grog", "\\boxed{Vex, Percy, Grog, Keyleth}", 1.0, "Vex, Percy, Grog, Keyleth"),  # extras cost nothing
    ("Vex, Percy, Grog", "\\boxed{vex, percy, grog}", 0.0, "vex, percy, grog"),  # lists are case-sensitive
    ("Vex, Percy, Grog", "\\boxed{Vex}", 0.0, "Vex"),
    ("Vex, Percy, Grog", "\\boxed{\\text{Vex, Percy}}", 0.6666666666666666, "Vex, Percy"),
    ("12", "The total is \\boxed{ 10 }", 0.5625, "10"),
]


@pytest.mark.parametrize("answer,answer_type,response,official,confidence", SYNTH)
def test_synth_scoring_matches_the_official_code(answer, answer_type, response, official, confidence):
    graded = synth_score(response, answer, answer_type)
    assert graded.score == official
    assert graded.parse_confidence == confidence


@pytest.mark.parametrize("answer,response,official,parsed", DND)
def test_real_scoring_matches_the_official_code(answer, response, official, parsed):
    graded = dnd_score(response, answer)
    assert graded.score == official and graded.attempted_parse == parsed


def test_strip_markup_is_the_stated_intent_and_off_by_default():
    assert synth_parse("**Answer:** abbreviation") == (" abbreviation", "vhigh")  # as the official code runs
    assert synth_parse("**Answer:** abbreviation", strip_markup=True) == ("abbreviation", "vhigh")
    assert synth_score("**Answer:** abbreviation", "['abbreviation']", LABEL, strip_markup=True).score == 1.0


def test_whitespace_only_long_response_is_a_zero_not_a_crash():
    # the official parser raises IndexError here (split() of blanks); ctxbench scores it 0 instead
    assert synth_score(" " * 30, "[3]", NUMERIC).score == 0.0


def official_messages(row: dict, labels: bool = False) -> list[dict]:
    """The messages launch() sends for one row (eval_script_batched.py, batch_size 1), spelled out literally."""
    text = row["context_window_text_with_labels" if labels else "context_window_text"]
    return [{"role": "system", "content": [{"type": "text", "text": "You are a helpful assistant."},
                                          {"type": "text", "text": f"{text}", "cache_control": {"type": "ephemeral"}}]},
            {"role": "user", "content": f"{row['question']}"}]


@pytest.mark.parametrize("split", ["synth", "real"])
def test_prompt_is_the_official_messages(split, smol_tokenizer, tmp_path):
    from ctxbench.harness.core import registry
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.prompting import PromptRenderer

    row = json.loads((FIXTURE / split / "test.jsonl").read_text().splitlines()[0])
    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=FIXTURE.parent)
    sample = registry.get("task", f"oolong/{split}")().generate(length=1024, index=0, seed=0, ctx=ctx)
    system, user = official_messages(row)
    parts = [p["text"] for p in system["content"]]
    assert sample.turns == (("system", "\n".join(parts)),)  # the two text parts, one newline between (ctxbench turns are text)
    assert sample.meta.get("user_text", row["question"]) == user["content"]
    assert sample.prompt.endswith(f"{user['content']}<|im_end|>\n<|im_start|>assistant\n")
    assert sample.answers == (str(row["answer"]),)
