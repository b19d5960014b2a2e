"""HELMET's judge-free metrics, reimplemented from their definitions (princeton-nlp/HELMET utils.py, MIT):
substring exact match (RAG), exact match after the "label:" parse (ICL), and NDCG@10 as trec_eval computes it
(re-rank; HELMET calls pytrec_eval).

Every prediction is first cut at its first newline: HELMET stops generation there (its vLLM path at any "\n", its
HF path at newline-only tokens), so a model that goes on is scored on its first line only.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterable, Mapping

_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD-style: lower-case, drop ASCII punctuation, drop the words a/an/the, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def until_newline(prediction: str) -> str:
    """What HELMET's generation returns: it stops at the first newline."""
    return prediction.split("\n", 1)[0]


def parse_output(output: str, prefix: str = "Answer:") -> str:
    """The text after the first `prefix` (case-insensitive) up to the line end, else the first line; a repeated
    prefix at its start is dropped too, as chat models sometimes repeat it."""
    for pattern in (rf"(?:{re.escape(prefix)})(.*)(?:\n|$)", r"(?:^)(.*)(?:\n|$)"):
        match = re.search(pattern, output, flags=re.IGNORECASE)
        if match is not None:
            return re.sub(f"^{re.escape(prefix)}", "", match[1].strip(), flags=re.IGNORECASE).strip()
    return ""  # the second pattern always matches; kept for type checkers


def substring_em(prediction: str, answers: Iterable[str]) -> float:
    """HELMET's RAG metric: 1 if some normalized answer is a substring of the normalized prediction (characters,
    not words), taking the better of the raw prediction and its parsed "Answer:" line."""
    prediction = until_newline(prediction)
    candidates = (normalize_answer(prediction), normalize_answer(parse_output(prediction)))
    golds = [normalize_answer(a) for a in answers]
    return float(any(g in c for g in golds for c in candidates))


def label_em(prediction: str, answers: Iterable[str], prefix: str = "label:") -> float:
    """HELMET's ICL metric: the parsed "label:" value, normalized, equals a normalized answer."""
    parsed = normalize_answer(parse_output(until_newline(prediction), prefix))
    return float(any(parsed == normalize_answer(a) for a in answers))


def parse_rankings(output: str) -> dict[str, int]:
    """Document id -> score from a "3 > 1 > 2" ranking: the longest such chain in the text (brackets, colons and
    "id" removed first); earlier is higher, a repeated id keeps its first place. No chain: the whole text as one id."""
    text = re.sub(r"[\[\]:]", "", output).lower().replace("id", "")
    longest = ""
    for match in re.finditer(r"(\d+)(?:\s*>\s*(\d+))*", text):
        if len(match.group(0)) > len(longest):
            longest = match.group(0)
    ranks = [r.strip() for r in longest.split(">") if r.strip().isdigit()] if longest else [output]
    scores: dict[str, int] = {}
    for i, doc in enumerate(ranks):
        scores.setdefault(doc, len(ranks) - i)
    return scores


def ndcg_at(results: Mapping[str, float], qrels: Mapping[str, int], k: int = 10) -> float:
    """trec_eval's ndcg_cut.k: documents sorted by score, ties broken by document id in DEcreasing string order;
    gain = the relevance label itself (not 2^label - 1), discount log2(rank + 1); ideal = the labels, best first.
    Retrieved documents without a judgement count as non-relevant; no relevant document at all gives 0."""
    ranked = sorted(results, key=lambda doc: doc, reverse=True)  # secondary key first: id descending
    ranked.sort(key=lambda doc: results[doc], reverse=True)  # stable: equal scores keep the id order
    dcg = sum(max(qrels.get(doc, 0), 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def rerank_ndcg(prediction: str, qrels: Mapping[str, int], k: int = 10) -> float:
    """HELMET's re-rank score of one query: NDCG@k of the parsed ranking."""
    return ndcg_at(parse_rankings(until_newline(prediction)), qrels, k)
