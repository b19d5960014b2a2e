"""RULER metrics, including the edge cases the reference evaluator defines."""

import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.metrics import is_empty, postprocess, string_match_all, string_match_part


def test_all_is_fraction_of_references_found():
    assert string_match_all("1234 and 5678", ["1234", "5678", "9999", "0000"]) == 0.5
    assert string_match_all("nothing", ["1234"]) == 0.0
    assert string_match_all("  The answer: ABC-def ", ["abc-DEF"]) == 1.0  # case-insensitive, stripped


def test_part_is_any_of_not_fraction():
    refs = ["Paris", "the city of Paris", "France"]
    assert string_match_part("It is Paris.", refs) == 1.0  # lm-eval would give 1/3 here
    assert string_match_part("London", refs) == 0.0


def test_substring_semantics_and_control_chars():
    assert string_match_all("12345678", ["2345"]) == 1.0  # substring, not token match
    assert postprocess("\x00 abc\x07def \n") == "abc\ndef"
    assert string_match_all("ab\x01cd", ["ab\ncd"]) == 1.0


def test_empty_predictions():
    assert is_empty("   \n\t") and is_empty("\x00")
    assert not is_empty(" x ")
    assert string_match_all("", ["a"]) == 0.0


def test_no_references_is_an_error():
    with pytest.raises(ValueError):
        string_match_all("x", [])
    with pytest.raises(ValueError):
        string_match_part("x", [])


def test_metrics_are_registered():
    assert registry.get("metric", "string_match_all") is string_match_all
    assert registry.get("metric", "string_match_part") is string_match_part
