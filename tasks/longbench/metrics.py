"""LongBench's metrics (THUDM/LongBench `LongBench/metrics.py`), re-implemented with the same packages.

Per-reference scores in [0, 1]; `best()` takes the max over references as the official scorer does.
Parity notes: rouge uses the `rouge` package (ROUGE-L "f", unique-word counts, 1e-8 in the
denominator), Chinese segmentation uses jieba, and code_sim uses rapidfuzz's Indel ratio rounded
to an int the way fuzzywuzzy's fuzz.ratio does (equal strings 100, an empty one 0) - identical to
fuzzywuzzy with python-Levenshtein (or thefuzz); fuzzywuzzy's pure-difflib fallback can differ
by a point on some long lines.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Sequence

from ctxbench.harness.core.registry import register

CN_PUNCTUATION = "！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏."
_EN_PUNCT = set(string.punctuation)
_ZH_PUNCT = set(string.punctuation + CN_PUNCTUATION)


def normalize_answer(s: str) -> str:
    """Lowercase, drop ASCII punctuation, replace the articles a/an/the by a space, collapse whitespace."""
    s = "".join(ch for ch in s.lower() if ch not in _EN_PUNCT)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def normalize_zh_answer(s: str) -> str:
    """Lowercase, drop ASCII and Chinese punctuation, remove all whitespace."""
    return "".join("".join(ch for ch in s.lower() if ch not in _ZH_PUNCT).split())


def f1_tokens(prediction: Sequence[str], reference: Sequence[str]) -> float:
    common = Counter(prediction) & Counter(reference)
    same = sum(common.values())
    if same == 0:
        return 0.0
    p, r = same / len(prediction), same / len(reference)
    return 2 * p * r / (p + r)


def _cut(text: str) -> list[str]:
    import jieba

    return list(jieba.cut(text, cut_all=False))


def qa_f1(prediction: str, reference: str) -> float:
    return f1_tokens(normalize_answer(prediction).split(), normalize_answer(reference).split())


def qa_f1_zh(prediction: str, reference: str) -> float:
    def toks(text: str) -> list[str]:
        return [t for t in (normalize_zh_answer(w) for w in _cut(text)) if t]

    return f1_tokens(toks(prediction), toks(reference))


def rouge_l(prediction: str, reference: str) -> float:
    from rouge import Rouge

    try:
        return float(Rouge().get_scores([prediction], [reference], avg=True)["rouge-l"]["f"])
    except Exception:  # noqa: BLE001 - the official scorer gives 0 on any failure (empty text, recursion depth)
        return 0.0


def rouge_l_zh(prediction: str, reference: str) -> float:
    return rouge_l(" ".join(_cut(prediction)), " ".join(_cut(reference)))


def classification(prediction: str, reference: str, all_classes: Sequence[str]) -> float:
    """1/len(matches) if the reference is among the class names found in the prediction.

    Found classes that are proper substrings of the reference are removed, the way the official
    loop does it: removing from the list it iterates, so the element after a removed one is skipped.
    """
    matches = [c for c in all_classes if c in prediction]
    i = 0
    while i < len(matches):
        term = matches[i]
        if term in reference and term != reference:
            matches.remove(term)
        i += 1
    return 1.0 / len(matches) if reference in matches else 0.0


def _digits_ratio(prediction: str, target: str) -> float:
    numbers = re.findall(r"\d+", prediction)
    return sum(n == target for n in numbers) / len(numbers) if numbers else 0.0


def retrieval(prediction: str, reference: str) -> float:
    """Share of the digit runs in the prediction that equal N, for the reference 'Paragraph N'."""
    return _digits_ratio(prediction, re.findall(r"Paragraph (\d+)", reference)[0])


def retrieval_zh(prediction: str, reference: str) -> float:
    return _digits_ratio(prediction, re.findall(r"段落(\d+)", reference)[0])


def count(prediction: str, reference: str) -> float:
    return _digits_ratio(prediction, str(reference))


def fuzz_ratio(a: str, b: str) -> int:
    """fuzzywuzzy's fuzz.ratio: equal strings 100, an empty one 0, else round(100 * Indel similarity)."""
    from rapidfuzz import fuzz

    if a == b:
        return 100
    if not a or not b:
        return 0
    return int(round(fuzz.ratio(a, b)))


def code_sim(prediction: str, reference: str) -> float:
    """fuzz.ratio of the first line without ` # or // (after leading newlines) against the reference."""
    line = next((x for x in prediction.lstrip("\n").split("\n") if "`" not in x and "#" not in x and "//" not in x), "")
    return fuzz_ratio(line, reference) / 100


METRICS: dict[str, Callable[..., float]] = {
    "qa_f1": qa_f1, "qa_f1_zh": qa_f1_zh, "rouge": rouge_l, "rouge_zh": rouge_l_zh, "classification": classification,
    "retrieval": retrieval, "retrieval_zh": retrieval_zh, "count": count, "code_sim": code_sim,
}


def best(metric: str, prediction: str, references: Sequence[str], all_classes: Sequence[str] = ()) -> float:
    """Max over references, starting from 0 as the official scorer does."""
    fn = METRICS[metric]
    score = 0.0
    for ref in references:
        score = max(score, fn(prediction, ref, all_classes) if metric == "classification" else fn(prediction, ref))
    return float(score)


def _register(metric: str) -> None:
    def plain(prediction: str, references: Sequence[str], *, all_classes: Sequence[str] = ()) -> float:
        if metric == "classification" and not all_classes:
            raise ValueError("longbench/classification needs all_classes (the task's score() passes them)")
        return best(metric, prediction, references, all_classes)

    plain.__name__ = f"longbench_{metric}"
    register("metric", f"longbench/{metric}")(plain)


for _m in METRICS:
    _register(_m)
