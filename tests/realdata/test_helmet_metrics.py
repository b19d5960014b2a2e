"""HELMET's judge-free metrics on hand-made cases where a naive implementation is wrong (expected values worked out
from the official definitions: SQuAD normalization + substring, parse_output, parse_rankings + trec_eval ndcg_cut)."""

from __future__ import annotations

import math

import pytest

from ctxbench.tasks.helmet.icl import balance_labels
from ctxbench.tasks.helmet.metrics import label_em, ndcg_at, parse_rankings, rerank_ndcg, substring_em
from ctxbench.tasks.helmet.task import draw_items, first_per_key, hf_shuffled

L3 = math.log2(3)

SUBSTRING_EM = [
    ("beatles", ["The Beatles"], 1.0),  # articles dropped from the answer
    ("It was the US.", ["U.S."], 1.0),  # punctuation dropped on both sides
    ("a party", ["art"], 1.0),  # a substring of characters, not of words
    ("I am not sure\nParis", ["Paris"], 1.0),  # no newline cut: HELMET's configs ask for one its code never applies
    ("anything at all", ["The"], 1.0),  # an answer that normalizes to "" is in every prediction
    ("jay z", ["Jay-Z"], 0.0),  # "jayz" is not in "jay z"
    ("Answer: Lisboa", ["Lisbon", "Lisboa"], 1.0),  # the best answer counts
    ("Côte d'Ivoire", ["Côte d’Ivoire"], 0.0),  # only ASCII punctuation is removed
]


@pytest.mark.parametrize("prediction,answers,expected", SUBSTRING_EM)
def test_substring_exact_match(prediction, answers, expected):
    assert substring_em(prediction, answers) == expected


LABEL_EM = [
    ("label: 12", "12", 1.0),
    ("12 label: 7", "12", 0.0),  # the value after "label:" wins over the first word
    (" 12", "12", 1.0),  # no "label:": the first line
    ("Label: 12", "12", 1.0),  # the prefix is case-insensitive
    ("label: label: 12", "12", 1.0),  # a repeated prefix is dropped
    ("12\nlabel: 7", "12", 0.0),  # no newline cut: the "label:" of a later line wins
    ("label: 12.", "12", 1.0),  # normalized
    ("label: 12 13", "12", 0.0),  # exact, not substring
]


@pytest.mark.parametrize("prediction,answer,expected", LABEL_EM)
def test_icl_label_exact_match(prediction, answer, expected):
    assert label_em(prediction, [answer]) == expected


RERANK = [
    ("2 > 1 > 3", {"1": 3, "2": 1, "3": 0}, (1 + 3 / L3) / (3 + 1 / L3)),  # linear gain, not 2^rel - 1
    ("3 > 3 > 1", {"1": 1, "3": 0}, 1 / L3),  # a repeated id keeps its first place: 1 is second, not third
    ("7 > 1", {"1": 1, "2": 0}, 1 / L3),  # an unjudged id still takes a rank
    ("[ID: 2] > [ID: 1]", {"1": 1, "2": 0}, 1 / L3),  # brackets, colons and "ID" removed
    ("I think 5 fits. 3 > 1 > 2", {"3": 1, "5": 1}, 1 / (1 + 1 / L3)),  # the longest chain
    ("2 > 1\n1 > 2 > 3", {"1": 1, "2": 0, "3": 0}, 1.0),  # no newline cut: the longest chain, on any line
    ("I cannot rank these", {"1": 1}, 0.0),
    ("1 > 2", {"1": 0, "2": 0}, 0.0),  # no relevant document
]


@pytest.mark.parametrize("prediction,qrels,expected", RERANK)
def test_rerank_ndcg_at_10(prediction, qrels, expected):
    assert rerank_ndcg(prediction, qrels) == pytest.approx(expected, abs=5e-6)  # HELMET rounds to 5 decimals


def test_ndcg_ties_are_broken_by_document_id_descending_as_trec_eval():
    assert ndcg_at({"a": 1.0, "b": 1.0}, {"a": 1}) == pytest.approx(1 / L3)  # b before a
    assert ndcg_at({"10": 1.0, "9": 1.0}, {"10": 1}) == pytest.approx(1 / L3)  # string order: "9" > "10"
    assert ndcg_at({"a": 2.0, "b": 1.0}, {"a": 1}) == 1.0
    assert ndcg_at({str(i): float(-i) for i in range(12)}, {"11": 1}) == 0.0  # past the cut at 10


def test_parse_rankings_scores_first_places():
    assert parse_rankings("Ranking: ID3 > ID1 > ID3 > ID2") == {"3": 4, "1": 3, "2": 1}


def test_draws_follow_helmet():
    import random

    rows = [{"id": k} for k in ("c", "a", "b", "a", "d")]
    drawn = draw_items(rows, "id", 2, 42)
    state = random.Random()
    state.seed(42)
    want = set(state.sample(["a", "b", "c", "d"], 2))
    assert [r["id"] for r in drawn] == [r["id"] for r in rows if r["id"] in want]  # file order, duplicates kept
    assert [r["q"] for r in first_per_key([{"q": 1}, {"q": 1}, {"q": 2}, {"q": 3}], [1, 0, 3, 2], "q", 2)] == [1, 3]


def test_shuffle_and_split_equal_the_datasets_library():
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"i": list(range(37))})
    assert ds.shuffle(seed=123)["i"] == hf_shuffled(37, 123)
    split = ds.train_test_split(test_size=0.1, seed=42)
    order = hf_shuffled(37, 42)
    assert split["test"]["i"] == order[:4] and split["train"]["i"] == order[4:]


def test_balance_labels_takes_rounds_of_every_label():
    rows = [{"y": y, "n": n} for y in "abc" for n in range(5)]
    got = balance_labels(rows, "y", 7, seed=3)
    assert len(got) == 7 and sorted(r["y"] for r in got[:6]) == list("aabbcc")
    assert {r["y"] for r in got[:3]} == set("abc")  # each round holds every label once
    many = balance_labels(rows, "y", 30, seed=3)  # more rounds than examples: drawn again
    assert [sum(r["y"] == y for r in many) for y in "abc"] == [10, 10, 10]
