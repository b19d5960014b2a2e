"""HELMET's judge-free scoring as its code runs it (princeton-nlp/HELMET eval.py, data.py, utils.py; MIT),
reimplemented: substring exact match (RAG), exact match after the "label:" parse (ICL), NDCG@10 as trec_eval computes
it (re-rank; HELMET calls pytrec_eval and rounds to 5 decimals).

Before a metric sees an output, eval.py puts the prompt's answer cue ("Answer:", "label:", "Ranking:": the
dataset's `system_template`) in front of it whenever no chat template was used, so the text scored is what follows
the cue in the prompt (`helmet_output`). The output is NOT cut at a newline: HELMET's configs say
`stop_new_line: true`, but its argument parser reads `--stop_newline`, so the published numbers were generated
without the stop. `stop_newline=True` gives the stated intent (the first line only). In thinking mode
(`thinking_split`) the text after the last `</think>` is scored, and an unclosed block is scored as it is.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterable, Mapping

from ctxbench.harness.core.reasoning import CHANNEL, CLOSE, OPEN, Split, split_reasoning

_PUNCTUATION = frozenset(string.punctuation)
_UP_TO_LAST_CLOSE = re.compile(rf"(.*{re.escape(CLOSE)})(.*)", flags=re.DOTALL)  # greedy: the last </think>


def normalize_answer(text: str) -> str:
    """SQuAD-style: lower-case, drop ASCII punctuation, drop the words a/an/the, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def until_newline(prediction: str) -> str:
    """The first line: what a generation stopped at a newline returns (the `stop_newline: true` option)."""
    return prediction.split("\n", 1)[0]


def helmet_output(prediction: str, cue: str, *, prepend: bool, stop_newline: bool = False) -> str:
    """The text HELMET's metrics see: the generation (its first line with stop_newline), after the prompt's answer
    cue when the prompt had no chat template (eval.py: `prepend_text + output`)."""
    text = until_newline(prediction) if stop_newline else prediction
    return cue + text if prepend else text


def thinking_split(text: str, *, cue: str = "", api_reasoning: str | None = None) -> Split:
    """HELMET's --thinking: the cue is put first, then, where a `</think>` occurs, what follows the LAST one
    (stripped) is scored and the rest is the reasoning; without one the whole text is scored, so a block that never
    closes is plain text, never unfinished. No newline cut. gpt-oss channels, which HELMET does not parse, are
    split as ctxbench splits them (harness/core/reasoning.py)."""
    if CHANNEL in text and not api_reasoning:
        return split_reasoning(text)
    match = _UP_TO_LAST_CLOSE.search(cue + text)
    if match is None:
        return Split(cue + text, api_reasoning or "", True, "api" if api_reasoning else "none")
    thoughts = match[1][len(cue):]
    form = "api" if api_reasoning else "think" if OPEN in thoughts else "opened"
    return Split(match[2].strip(), api_reasoning or thoughts, True, form)


def parse_output(output: str, prefix: str = "Answer:") -> str:
    """The text after the first `prefix` (case-insensitive) up to the line end, else the first line; a repeated
    prefix at its start is dropped too, as chat models sometimes repeat it."""
    for pattern in (rf"(?:{re.escape(prefix)})(.*)(?:\n|$)", r"(?:^)(.*)(?:\n|$)"):
        match = re.search(pattern, output, flags=re.IGNORECASE)
        if match is not None:
            return re.sub(f"^{re.escape(prefix)}", "", match[1].strip(), flags=re.IGNORECASE).strip()
    return ""  # the second pattern always matches; kept for type checkers


def substring_em(output: str, answers: Iterable[str]) -> float:
    """HELMET's RAG metric: 1 if some normalized answer is a substring of the normalized output (characters, not
    words), taking the better of the whole output and its parsed "Answer:" line."""
    candidates = (normalize_answer(output), normalize_answer(parse_output(output)))
    golds = [normalize_answer(a) for a in answers]
    return float(any(g in c for g in golds for c in candidates))


def label_em(output: str, answers: Iterable[str], prefix: str = "label:") -> float:
    """HELMET's ICL metric: the parsed "label:" value, normalized, equals a normalized answer."""
    parsed = normalize_answer(parse_output(output, prefix))
    return float(any(parsed == normalize_answer(a) for a in answers))


def parse_rankings(output: str) -> dict[str, int]:
    """Document id -> score from a "3 > 1 > 2" ranking: the longest such chain in the text (brackets, colons and
    "id" removed first); earlier is higher, a repeated id keeps its first place. No chain: the whole text as one id."""
    text = re.sub(r"[\[\]:]", "", output).lower().replace("id", "")
    longest = ""
    for match in re.finditer(r"(\d+)(?:\s*>\s*(\d+))*", text):
        if len(match.group(0)) > len(longest):
            longest = match.group(0)
    ranks = [r.strip() for r in longest.split(">") if r.strip().isdigit()] if longest else [text]
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


def rerank_ndcg(output: str, qrels: Mapping[str, int], k: int = 10) -> float:
    """HELMET's re-rank score of one query: NDCG@k of the parsed ranking, rounded to 5 decimals as HELMET's
    calculate_retrieval_metrics rounds it."""
    return round(ndcg_at(parse_rankings(output), qrels, k), 5)
