"""RAKE keyword extraction (Rose et al. 2010) with a bundled stop list, so nothing is downloaded.

rake-nltk (what Quest used) needs nltk's stopwords corpus from the network; this is the same algorithm:
candidate phrases are maximal runs of words between stop words, punctuation and line breaks; a word
scores degree/frequency (degree = summed length of the phrases it occurs in); a phrase scores the sum
of its words. Line breaks also split phrases here, which matters for code and titles. The stop list
is a compact English function-word list plus common programming keywords (this project packs code);
STOP_KEYWORDS are Quest's non-informative keywords (Appendix B.2, Table 7).
"""

from __future__ import annotations

import re
from collections import defaultdict

STOPWORDS = frozenset("""
a about above after again against all almost also am among an and any are aren't as at be because been before
being below between both but by can cannot could couldn't did didn't do does doesn't doing don't down during each
either else enough etc even ever every few for from further get gets got had hadn't has hasn't have haven't having
he he'd he'll he's her here here's hers herself him himself his how how's however i i'd i'll i'm i've if in into
is isn't it it's its itself just least less let's like may me might more most much must mustn't my myself neither
no nor not now of off often on once one only or other otherwise ought our ours ourselves out over own per perhaps
quite rather really same shall shan't she she'd she'll she's should shouldn't since so some still such than that
that's the their theirs them themselves then there there's therefore these they they'd they'll they're they've
this those though through thus to too toward towards under until up upon us use used using very via was wasn't we
we'd we'll we're we've well were weren't what what's whatever when when's where where's whether which while who
who's whoever whom whose why why's will with within without won't would wouldn't yet you you'd you'll you're
you've your yours yourself yourselves
def class self cls return import from as pass raise try except finally elif while for lambda yield async await
none true false null nil void int float bool str char const var let function new delete public private protected
static final struct typedef include define ifdef ifndef endif println printf print args kwargs
""".split())

STOP_KEYWORDS = frozenset("""
best way|get rid|bad idea|good way|main differences|valid way|following sentence|two sentences|better way|mean|
passage mean|following data|good idea|best ways|correct way|sentence mean|next word|following passage|part 1|
current state|following equation
""".replace("\n", "").split("|"))

_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9_']*|\d+|\n|[^\sA-Za-z0-9_']")


def phrases(text: str, max_words: int | None = None) -> list[tuple[str, ...]]:
    """Candidate phrases: maximal runs of non-stop words (lowercased), split at punctuation and newlines."""
    out: list[tuple[str, ...]] = []
    cur: list[str] = []
    for tok in _TOKEN.findall(text.lower()):
        word = tok[0].isalnum()
        if word and tok not in STOPWORDS and (max_words is None or len(cur) < max_words):
            cur.append(tok)
            continue
        if cur:
            out.append(tuple(cur))
            cur = []
        if word and tok not in STOPWORDS:
            cur.append(tok)  # phrase hit max_words: start the next one with this word
    if cur:
        out.append(tuple(cur))
    return out


def rake(text: str, max_words: int | None = None) -> list[tuple[str, float]]:
    """Unique phrases with their RAKE scores (degree/frequency), best first; ties by first appearance."""
    cands = phrases(text, max_words)
    freq: dict[str, int] = defaultdict(int)
    degree: dict[str, int] = defaultdict(int)
    for ph in cands:
        for w in ph:
            freq[w] += 1
            degree[w] += len(ph)
    seen: dict[tuple[str, ...], float] = {}
    for ph in cands:
        if ph not in seen:
            seen[ph] = sum(degree[w] / freq[w] for w in ph)
    ranked = sorted(seen.items(), key=lambda kv: -kv[1])  # stable: ties keep first-appearance order
    return [(" ".join(ph), score) for ph, score in ranked]


def keywords(query: str, min_score: float = 3.0, min_chars: int = 4,
             stop_keywords: frozenset[str] = STOP_KEYWORDS) -> list[str]:
    """Quest's keyword filter over RAKE phrases of a query: score >= min_score, at least min_chars characters
    (punctuation removed), not a stop keyword."""
    out = []
    for ph, score in rake(query):
        clean = re.sub(r"[^\w\s]", "", ph).strip()
        if score >= min_score and len(clean) >= min_chars and clean not in stop_keywords:
            out.append(clean)
    return out


def fallback_query(segment: str, phrases_n: int = 3, title_words: int = 12) -> str:
    """An offline stand-in for doc2query: the segment's first line (title-like) plus its top RAKE phrases of
    at most 4 words, joined with commas so RAKE on the query sees them as separate phrases."""
    title = ""
    for line in segment.split("\n"):
        line = re.sub(r"^[\s#*/\"'=\-<>!;]+", "", line).strip()
        if len(line) >= 4:
            title = " ".join(line.split()[:title_words])
            break
    top = [p for p, _ in rake(segment, max_words=4)[:phrases_n]]
    return ", ".join([title] + top if title else top)
