"""RULER v2 parity with the official code as it runs: NeMo-Skills branch chsieh/ruler2, commit
991a7432a1e3e6374b402a96cdd8614026714a1d (nemo_skills/dataset/ruler2/prepare*.py, evaluation/evaluator/ruler.py
eval_ruler2, evaluator/mcq.py eval_mcq, utils.remove_thinking), which the RULER repo's rulerv2-ns branch
(4809570a) points to.

Scores: each number is what the official pipeline returned (remove_thinking, then eval_ruler2 with the match type, or
eval_mcq) on that output, run outside this repo on the functions extracted from that commit. Prompts:
data/official_prompts.json holds, per task, the text and expected_answer the official generate_input_output printed
for one item of the hand-made fixtures (data/ruler2/), and the layout it drew, parsed from that text; the layout
rendered here must give the same text and the same expected answers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbench.harness.core.context import GenContext
from ctxbench.tasks.ruler2 import metrics
from ctxbench.tasks.ruler2.data import load_hotpot, load_mmlu
from ctxbench.tasks.ruler2.documents import expected as qa_expected
from ctxbench.tasks.ruler2.prompts import Listed, mmlu_text, niah_text, ordinal, qa_text
from ctxbench.tasks.ruler2.questions import expected as mmlu_expected

DATA = Path(__file__).parent / "data"
OFFICIAL = json.loads((DATA / "official_prompts.json").read_text(encoding="utf-8"))
Q = "Which of the following is true? A. one B. two C. three D. four"
DOC = "Alpha Centauri\nAlpha Centauri is the closest star system to the Sun."
FOUR = ["1111111111", "2222222222", "3333333333", "4444444444"]

# (match type, generation, references, the official score)
MATCH = [
    ("all", "The special magic number is 1234567890.", ["1234567890"], 1.0),
    ("all", "<think>it is 1234567890</think>It is 9876543210.", ["1234567890"], 0.0),  # only after the last </think>
    ("all", "<think>it is 1234567890 and I keep thinking", ["1234567890"], 0.0),  # an unclosed block leaves nothing
    ("all", "1234567890 is my guess. Answer: 5555555555", ["1234567890"], 0.0),  # only after the last Answer:
    ("all", "The numbers are 1111111111, 2222222222 and 9999999999.", FOUR, 0.5),  # the mean over references
    ("all", "Which of the following is false? A. one B. two C. three D. four", [Q], 0.9285714285714286),  # 1 - WER
    ("all", "which of THE following is true? a. one b. two c. three d. four", [Q], 1.0),  # case-insensitive
    ("all", "Question 1234567: Which of the following is true? A. one B. two", [Q], 0.5714285714285714),
    ("all", "", ["1234567890"], 0.0),
    ("all", "12345 67890", ["1234567890"], 0.0),  # WER 2: floored at 0 by the miss
    ("all", "Answer:", ["x y"], 0.0),
    ("all", "x z", ["x y"], 0.5),
    ("2steps", Q + "\n\n" + Q.replace("true", "false"), [Q], 0.9285714285714286),  # the last paragraph only
    ("2steps", Q.replace("true", "false") + "\n\n" + Q, [Q], 1.0),
    ("2steps", "First:\n\n" + Q + "\n\nThat is all.", [Q], 0.0714285714285714),
    ("part", "7654321", ["7654321"], 1.0),
    ("part", "Document 7654321:\nsome text\n\nThe index is 1234567.", ["7654321"], 0.0),  # copied documents removed
    ("part", "Document 7654321:\nsome text\n\nThe index is 1234567.", ["7654321", "1234567"], 1.0),  # any reference
    ("part", "The answer is Paris", ["paris", "London"], 1.0),
    ("part", "Answer: no", ["yes"], 0.0),
    ("part", "the city of paris france", ["Paris France"], 1.0),
    ("part", "Document 12: " + DOC + "\n\nAnswer: Paris", ["Paris"], 1.0),
    ("part", "<think>Paris</think>", ["Paris"], 0.0),
]
# (generation, reference letter, the official symbolic_correct)
MCQ = [
    ("The answer is \\boxed{B}.", "B", 1.0),
    ("\\boxed{A} at first, then \\boxed{C}", "C", 1.0),  # the last box
    ("\\boxed{\\text{D}}", "D", 1.0),  # longer than one character: its last standalone letter
    ("\\boxed{B. two}", "B", 1.0),
    ("\\boxed{two}", "B", 0.0),
    ("Answer: C", "C", 1.0),
    ("answer: c", "C", 0.0),  # (?i) finds the lower-case letter, which is not the reference
    ("**Answer:** D", "D", 1.0),
    ("The answer is B", "B", 0.0),
    ("<think>\\boxed{A}</think>\\boxed{B}", "B", 1.0),
    ("<think>\\boxed{B}", "B", 0.0),
    ("\\boxed{AB}", "A", 0.0),
    ("\\boxed{A or B}", "B", 1.0),
    ("\\boxed{B", "B", 0.0),  # an unbalanced box extracts nothing, and no Answer: follows
    ("Answer: B\n\\boxed{C}", "B", 0.0),  # a box wins over Answer:
]
MATCHERS = {"all": metrics.match_all, "2steps": metrics.match_2steps, "part": metrics.match_part}


@pytest.mark.parametrize("match,generation,references,official", MATCH)
def test_match_scores_equal_official(match, generation, references, official):
    assert MATCHERS[match](generation, references) == pytest.approx(official, abs=1e-12)


@pytest.mark.parametrize("generation,letter,official", MCQ)
def test_multichoice_equals_official(generation, letter, official):
    assert metrics.multichoice(generation, [letter]) == official


def test_word_edit_distance_is_levenshtein_over_words():
    assert metrics.word_edit_distance("a b c d".split(), "a x c".split()) == 2
    assert metrics.word_edit_distance([], "a b".split()) == 2


def test_ordinal_matches_inflect():
    # inflect 7.6.0's engine().ordinal(n) for these n
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111, 112)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th", "112th"]


@pytest.mark.parametrize("task", ["mk_niah_basic", "mv_niah_basic"])
def test_niah_prompt_equals_official(task):
    item = OFFICIAL[task]
    layout = item["layout"]
    assert niah_text(layout["lines"], layout["query"], single=task.startswith("mk")) == item["text"]


MMLU = {"mk_niah_easy": ("retrieve", "single"), "mk_niah_medium": ("solve", "2steps"), "mk_niah_hard": ("solve", "single"),
        "mv_niah_easy": ("niah", "single"), "mv_niah_medium": ("retrieve", "2steps"), "mv_niah_hard": ("retrieve", "single")}


@pytest.fixture()
def fixture_ctx():
    return GenContext(tokenizer=None, renderer=None, data_dir=DATA)  # the loaders need neither


@pytest.mark.parametrize("task", sorted(MMLU))
def test_mmlu_prompt_and_answers_equal_official(task, fixture_ctx):
    item, (task_type, algo_type) = OFFICIAL[task], MMLU[task]
    listed = [Listed(*q) for q in item["layout"]["listed"]]
    target = listed[item["layout"]["target"]]
    shots = [listed[k] for k in item["layout"]["examples"]]
    asked = load_mmlu(fixture_ctx, None, "unused", task).test[2]  # the official item asks test question 2
    assert target.text == asked.text  # the loader builds the question text as prepare_mmlu.py does
    assert mmlu_text(task_type, algo_type, listed, target, shots) == item["text"]
    official = item["expected_answer"]
    assert mmlu_expected(task_type, listed, target, asked.answer) == (official if isinstance(official, list) else [official])


@pytest.mark.parametrize("task,query", [("qa_basic", "doc"), ("qa_easy", "question"), ("qa_medium", "2steps"), ("qa_hard", "single")])
def test_qa_prompt_and_answers_equal_official(task, query, fixture_ctx):
    item = OFFICIAL[task]
    q = load_hotpot(fixture_ctx, None).questions[2]  # the official item asks validation question 2
    docs = [tuple(d) for d in item["layout"]["documents"]]
    assert qa_text(query, docs, question=q.question, gold_text=q.gold[0]) == item["text"]
    gold = [next(i for i, t in docs if t == g) for g in q.gold]
    assert qa_expected(query, gold, q) == item["expected_answer"]


def test_the_length_bounds_the_prompt_alone_as_the_official_fit_does(smol_tokenizer, monkeypatch):
    """The official fit (generate_samples in prepare_niah.py, prepare_mmlu.py and prepare_qa.py) keeps the largest
    haystack whose input text has at most max_seq_length tokens and asserts `length <= max_seq_length` per sample: no
    answer budget is reserved, though the help text says the length includes the generated tokens. The default builds
    what ran; prompt_fills_length: false (a recorded argument) reserves the budget as the help text says."""
    from ctxbench.harness.core import registry
    from ctxbench.harness.core.prompting import PromptRenderer

    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=DATA, verify="full")
    make = registry.get("task", "ruler2/mk_niah_basic")
    ran, meant = make(), make(prompt_fills_length=False)
    budget = ran.max_new_tokens  # 128, one needle line is about 30 tokens
    assert 2048 - budget < ran.generate(length=2048, index=0, seed=0, ctx=ctx).prompt_tokens <= 2048
    assert meant.generate(length=2048, index=0, seed=0, ctx=ctx).prompt_tokens <= 2048 - budget
    assert ran.args_json() != meant.args_json()
