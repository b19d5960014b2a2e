"""LongBench Pro's metrics, as the official evaluator computes them (modules/utils.py and Evaluator.calculate_metric
of caskcsg/longcontext, LongBench-Pro/).

The answer is a list of strings. A prediction is read from after its last "[Answer]" (else the last "[答案]"; else
whole), lower-cased and cut into lines, each line's whitespace runs folded to one space; the references are
lower-cased and folded the same way. Then per metric:

- Accuracy: the first line equals the first reference;
- F1_Score: set F1 of the lines against the references;
- SubEM: the share of references found among the lines;
- NDCG: nDCG@k (k = the number of references) of the lines as a ranking, the i-th reference graded k - i (a
  later duplicate's grade wins), trec_eval's ndcg_cut (gain = grade, discount log2(rank + 1)), as pytrec_eval runs it;
- Pairwise_Accuracy: pairs of references whose order the lines keep, over all pairs of LINES (extra lines cost);
- Summary: 0.5 x the highest cosine similarity of the prediction to a reference under an embedding model
  (Qwen3-Embedding-8B) + 0.5 x the highest ROUGE-L F (the `rouge` package; jieba words for Chinese), the
  prediction read whole (no "[Answer]" cut), lower-cased and folded.

An empty prediction scores 0, and so does a value outside [0, 1] (the official range assertion fails inside its
try block: an embedding's float noise past 1.0 turns a perfect summary into 0); `range_check: clip` offers the
intent instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations
from typing import Any, Literal

RangeCheck = Literal["zero", "clip"]


def answer_area(text: str) -> str:
    """The text after the last "[Answer]" when there is one, else after the last "[答案]", else all of it; stripped."""
    if "[Answer]" in text:
        text = text[text.rfind("[Answer]") + len("[Answer]"):]
    elif "[答案]" in text:
        text = text[text.rfind("[答案]") + len("[答案]"):]
    return text.strip()


def fold(text: str) -> str:
    return " ".join(text.split())


def reference_lines(answers: Sequence[str]) -> list[str]:
    return [fold(a.lower().strip()) for a in answers]


def prediction_lines(prediction: str) -> list[str]:
    return [fold(line.strip()) for line in answer_area(prediction).lower().split("\n")]


def accuracy(answers: Sequence[str], prediction: str) -> float:
    refs, lines = reference_lines(answers), prediction_lines(prediction)
    return float(bool(refs) and bool(lines) and refs[0] == lines[0])


def f1_score(answers: Sequence[str], prediction: str) -> float:
    refs, lines = set(reference_lines(answers)), set(prediction_lines(prediction))
    common = refs & lines
    if not common:
        return 0.0
    precision, recall = len(common) / len(lines), len(common) / len(refs)
    return 2 * precision * recall / (precision + recall)


def sub_em(answers: Sequence[str], prediction: str) -> float:
    refs, lines = reference_lines(answers), prediction_lines(prediction)
    if not refs or not lines:
        return 0.0
    return sum(1.0 for a in refs if a in lines) / len(refs)


def ndcg(answers: Sequence[str], prediction: str) -> float:
    """nDCG@k as trec_eval's ndcg_cut computes it on the official qrels and run (distinct run scores: no ties)."""
    refs, lines = reference_lines(answers), prediction_lines(prediction)
    if not refs or not lines:
        return 0.0
    k = len(refs)
    grades = {a: k - i for i, a in enumerate(refs)}
    scores = {p: len(lines) - i for i, p in enumerate(lines)}
    ranked = sorted(scores, key=lambda doc: -scores[doc])[:k]
    dcg = sum(grades.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranked))
    ideal = sum(g / math.log2(rank + 2) for rank, g in enumerate(sorted(grades.values(), reverse=True)[:k]))
    return dcg / ideal


def pairwise_accuracy(answers: Sequence[str], prediction: str) -> float:
    refs, lines = reference_lines(answers), prediction_lines(prediction)
    if len(refs) < 2 or len(lines) < 2:
        return 0.0
    position = {p: i for i, p in enumerate(lines)}
    kept = sum(1 for a, b in combinations(refs, 2) if a in position and b in position and position[a] < position[b])
    return kept / (len(lines) * (len(lines) - 1) // 2)


def rouge_l(answers: Sequence[str], prediction: str, chinese: bool) -> float:
    """The highest ROUGE-L F of the prediction against a reference; 0 when the rouge package refuses any pair."""
    from rouge import Rouge

    if chinese:
        import jieba

        answers = [" ".join(jieba.cut(a, cut_all=False)) for a in answers]
        prediction = " ".join(jieba.cut(prediction, cut_all=False))
    try:
        scores = Rouge().get_scores([prediction] * len(answers), list(answers), avg=False)
    except Exception:  # noqa: BLE001 - the official code reads any refusal (an empty hypothesis, say) as 0
        return 0.0
    return max(s["rouge-l"]["f"] for s in scores)


def semantic_similarity(embedder: Any, answers: Sequence[str], prediction: str) -> float:
    """The highest similarity (the model's own, cosine for Qwen3-Embedding) of the prediction to a reference."""
    best = embedder.similarity(embedder.encode(list(answers)), embedder.encode([prediction])).max()
    return float(best.cpu().numpy() if hasattr(best, "cpu") else best)


def summary(embedder: Any, answers: Sequence[str], prediction: str, chinese: bool) -> float:
    refs, text = reference_lines(answers), fold(prediction.lower().strip())
    if not refs or not text:
        return 0.0
    return 0.5 * semantic_similarity(embedder, refs, text) + 0.5 * rouge_l(refs, text, chinese)


LIST_METRICS = {"NDCG": ndcg, "Pairwise_Accuracy": pairwise_accuracy, "Accuracy": accuracy, "F1_Score": f1_score,
                "SubEM": sub_em}


def metric_value(metric: str, answers: Sequence[str], prediction: str, *, chinese: bool = False, embedder: Any = None,
                 range_check: RangeCheck = "zero") -> float:
    """One item's score as Evaluator.calculate_metric gives it (the prediction stripped first, as the official
    inference stores it): 0 for an empty prediction; outside [0, 1] 0 (or clipped)."""
    prediction = prediction.strip()
    if prediction == "":
        return 0.0
    value = (summary(embedder, answers, prediction, chinese) if metric == "Summary"
             else LIST_METRICS[metric](answers, prediction))
    if 0.0 <= value <= 1.0:
        return value
    return min(max(value, 0.0), 1.0) if range_check == "clip" else 0.0
