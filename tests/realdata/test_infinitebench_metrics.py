"""InfiniteBench get_score_one rules, checked on hand-made predictions (src/compute_scores.py semantics)."""

from __future__ import annotations

import pytest

from ctxbench.harness.core import registry
from ctxbench.tasks.infinitebench.metrics import get_score_one


def s(pred, label, task):
    return get_score_one(pred, label, task)


def test_passkey_and_number_string_take_the_first_digit_run():
    assert s("The pass key is 71432. Remember it.", ["71432"], "passkey") == 1.0
    assert s("12, then 71432", ["71432"], "passkey") == 0.0  # only the first run counts
    assert s("key 0071432", ["71432"], "passkey") == 0.0
    assert s("3000077442", "3000077442", "number_string") == 1.0


def test_kv_retrieval_splits_on_its_punctuation_only():
    assert s('The value is: "c14cb8ba-002b-43be".', "c14cb8ba-002b-43be", "kv_retrieval") == 1.0  # : " . split, - kept
    assert s('{"key": "v1"}', ["v1"], "kv_retrieval") == 1.0
    assert s("value:v1x", "v1", "kv_retrieval") == 0.0  # a substring is not a word


def test_code_run_reads_the_last_word_as_an_int():
    assert s("The value of func_1(3) is -14.", [-14], "code_run") == 1.0
    assert s("It returns `12`", [12], "code_run") == 1.0
    assert s("I cannot compute that", [12], "code_run") == 0.0


def test_code_debug_prefixes():
    label = ["Configer._set_option", "B"]
    assert s("B. Configer._set_option", label, "code_debug") == 1.0
    assert s("B: because", label, "code_debug") == 1.0
    assert s("The answer is: B", label, "code_debug") == 1.0
    # "option" is blanked before the prefixes are tried, so "is:" catches it; the rest starts with the name
    assert s("The correct option is: Configer.run", ["Configer.run", "B"], "code_debug") == 1.0
    # ... and blanked inside the answer too, so a function named *option* never matches by name
    assert s("The correct option is: Configer._set_option", label, "code_debug") == 0.0
    assert s("answer: C", label, "code_debug") == 0.0
    assert s("I think B", label, "code_debug") == 0.0  # no prefix, not at the start
    assert s("**B**", label, "code_debug") == 0.0  # "**" at the start, then no prefix


def test_longbook_choice_letter_or_text():
    label = ["Walking Georgie", "A"]
    assert s("A. Walking Georgie", label, "longbook_choice_eng") == 1.0  # a leading letter decides
    assert s("Walking Georgie", label, "longbook_choice_eng") == 1.0  # the option text itself
    assert s("The answer is Walking Georgie.", label, "longbook_choice_eng") == 1.0  # after "answer is"
    assert s("I think it's A", label, "longbook_choice_eng") == 1.0  # first word that is a letter
    assert s("I choose option B", label, "longbook_choice_eng") == 0.0
    assert s("Dunno", label, "longbook_choice_eng") == 0.0  # "D" is read as the letter D
    assert s("A lovely walk", label, "longbook_choice_eng") == 1.0  # ... and "A" as the letter A
    assert s("", label, "longbook_choice_eng") == 0.0


def test_longdialogue_upper_cases_words():
    assert s("It's Ace.", ["ACE", "ACE ROTHSTEIN"], "longdialogue_qa_eng") == 1.0
    assert s("Nicky Santoro", ["ACE", "ACE ROTHSTEIN"], "longdialogue_qa_eng") == 0.0


def test_book_qa_f1_english_words_and_chinese_characters():
    # [cael, bronwyn, is, killed] vs [killed]: P 1/4, R 1 -> 0.4
    assert s("Cael Bronwyn is killed.", ["killed"], "longbook_qa_eng") == pytest.approx(0.4)
    # characters 两 个 人 vs 两 个: common 2, P 2/3, R 1 -> 0.8 ("2" and "二" give 0)
    assert s("两个人", ["2", "两个", "二"], "longbook_qa_chn") == pytest.approx(0.8)


def test_longbook_sum_is_rouge_lsum():
    # rouge_score tokens [the, cat, sat] vs [the, cat, sat, on, the, mat]: LCS 3, P 1, R 1/2 -> 2/3
    assert s("The cat sat.", ["unrelated words", "the cat sat on the mat"], "longbook_sum_eng") == pytest.approx(2 / 3)
    # Lsum splits on newlines: the union LCS of [the cat sat on] with "sat on" and "the cat" is all 4 -> 1
    assert s("sat on\nthe cat", "the cat sat on", "longbook_sum_eng") == pytest.approx(1.0)


def test_math_find_int_versus_float():
    assert s("88", [88], "math_find") == 1.0
    assert s("88.5", [88], "math_find") == 0.0  # int("88.5") would raise in the official code
    assert s("The answer is 3.50", [3.5], "math_find") == 1.0  # float label: float("3.50") == 3.5
    assert s("3.0", [3], "math_find") == 0.0
    assert s("3.5", ["3.5"], "math_find") == 1.0  # labels read as text keep their type by the decimal point
    assert s("no number", [3], "math_find") == 0.0


def test_math_calc_loses_signs_and_counts_the_leading_run():
    assert s("[1, 4, 8, 9]", [1, 4, 8], "math_calc") == 1.0
    assert s("[1, 5, 8]", [1, 4, 8], "math_calc") == pytest.approx(1 / 3)  # stops at the first mismatch
    assert s("-5, 2", [5, 2], "math_calc") == 1.0  # "-5" is read as 5
    assert s("[5, -3, 2]", [5, -3, 2], "math_calc") == pytest.approx(1 / 3)  # a negative label never matches
    assert s("[1, 4]", [[1, 4, 8]], "math_calc") == pytest.approx(2 / 3)  # a nested label is unwrapped


def test_registered_metrics_read_string_answers():
    assert registry.get("metric", "infinitebench/code_run")("is -14", ["-14"]) == 1.0
    assert registry.get("metric", "infinitebench/math_calc")("1, 4", ["1", "4", "8"]) == pytest.approx(2 / 3)
