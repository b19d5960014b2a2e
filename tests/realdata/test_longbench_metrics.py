"""LongBench metrics against values worked out by hand from the official definitions (LongBench/metrics.py)."""

from __future__ import annotations

import pytest

from ctxbench.harness.core import registry
from ctxbench.tasks.longbench.metrics import (
    best,
    classification,
    code_sim,
    count,
    qa_f1,
    qa_f1_zh,
    retrieval,
    retrieval_zh,
    rouge_l,
    rouge_l_zh,
)


def test_qa_f1_normalizes_and_takes_the_max_over_references():
    # "The Eiffel Tower, in Paris!" -> lower, drop punctuation, articles -> [eiffel, tower, in, paris]
    # vs [eiffel, tower]: common 2, P = 2/4, R = 2/2, F1 = 2*.5*1/1.5 = 2/3
    assert qa_f1("The Eiffel Tower, in Paris!", "Eiffel Tower") == pytest.approx(2 / 3)
    # vs [paris]: common 1, P = 1/4, R = 1, F1 = 2*.25/1.25 = 0.4; the max over both references is 2/3
    assert qa_f1("The Eiffel Tower, in Paris!", "Paris") == pytest.approx(0.4)
    assert best("qa_f1", "The Eiffel Tower, in Paris!", ["Paris", "Eiffel Tower"]) == pytest.approx(2 / 3)
    assert qa_f1("London", "Paris") == 0.0
    assert qa_f1("the", "a") == 0.0  # both normalize to nothing: no common token


def test_qa_f1_zh_uses_jieba_words_without_punctuation():
    # jieba: 我爱北京！ -> 我 / 爱 / 北京 / ！ ; "！" normalizes to "" and is dropped -> 3 tokens vs [北京]
    # common 1, P = 1/3, R = 1, F1 = 2*(1/3)/(4/3) = 0.5
    assert qa_f1_zh("我爱北京！", "北京") == pytest.approx(0.5)
    assert qa_f1_zh("北京", "北京") == pytest.approx(1.0)


def test_rouge_l_counts_unique_reference_words():
    # rouge package, ROUGE-L F: reference words are counted as a set {the, cat, sat, on, mat} (5),
    # LCS = 3, R = 3/5, P = 3/3, F = 2*0.6*1/(1.6 + 1e-8) = 0.75
    assert rouge_l("the cat sat", "the cat sat on the mat") == pytest.approx(0.75, abs=1e-6)
    assert rouge_l("", "the cat") == 0.0  # the package raises on an empty hypothesis: scored 0


def test_rouge_zh_scores_jieba_segmented_text():
    # 我爱北京 -> 我 爱 北京 ; 我爱北京天安门 -> 我 爱 北京 天安门 : LCS 3, R = 3/4, P = 1, F = 1.5/1.75
    assert rouge_l_zh("我爱北京", "我爱北京天安门") == pytest.approx(6 / 7, abs=1e-6)


def test_classification_and_the_substring_removal_rule():
    classes = ["Human", "Location", "Entity"]
    # found: Human, Location; the reference is one of 2 matches -> 1/2
    assert classification("The type is Location or Human", "Location", classes) == 0.5
    assert classification("The type is Entity", "Location", classes) == 0.0
    # "Human" is a proper substring of the reference "Human being": removed, leaving one match -> 1
    assert classification("Human being", "Human being", ["Human", "Location", "Human being"]) == 1.0
    # the official loop removes while iterating: a (removed), ab (skipped), abc (removed), abcd
    # -> matches [ab, abcd] -> 1/2
    assert classification("abcd", "abcd", ["a", "ab", "abc", "abcd"]) == 0.5


def test_retrieval_count_and_chinese_retrieval():
    # digit runs [3, 12, 3]; 2 of 3 equal the paragraph number 3
    assert retrieval("Paragraph 3, not paragraph 12 or 3", "Paragraph 3") == pytest.approx(2 / 3)
    assert retrieval("none of them", "Paragraph 3") == 0.0
    assert retrieval_zh("答案是段落5和段落15", "段落5") == 0.5  # [5, 15]
    assert count("There are 12 unique paragraphs, 12.", "12") == 1.0
    assert count("12 or 13", 12) == 0.5


def test_code_sim_skips_comment_lines_and_rounds_like_fuzzywuzzy():
    # first line without ` # // is "x = foo(1)"; vs "x = foo(2)": Indel distance 2 over 20 chars -> 90
    assert code_sim("```python\n# comment\nx = foo(1)\n", "x = foo(2)") == 0.9
    # "return a+b;" (11) vs "return a + b;" (13): LCS 11, distance 2, 100*(1 - 2/24) = 91.67 -> int 92
    assert code_sim("// c\nreturn a+b;", "return a + b;") == 0.92
    # LCS 5 of 8 + 8 chars: 62.5 -> round() to even -> 62 (fuzzywuzzy's int(round(x)))
    assert code_sim("abcdefgh", "abcdeXYZ") == 0.62
    assert code_sim("# only comments", "x = 1") == 0.0  # no usable line: "" vs reference -> 0
    assert code_sim("\n\nx = 1", "x = 1") == 1.0


def test_registered_metrics_take_the_max_over_references():
    f = registry.get("metric", "longbench/qa_f1")
    assert f("Paris", ["London", "Paris"]) == 1.0
    with pytest.raises(ValueError):
        registry.get("metric", "longbench/classification")("Human", ["Human"])
    assert registry.get("metric", "longbench/classification")("Human", ["Human"], all_classes=["Human", "Entity"]) == 1.0
