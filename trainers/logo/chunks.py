"""QA samples cut into token chunks, and the importance scorers that split chunks at δ (§3.2.2).

A chunk is a run of `chunk_tokens` ids of the tokenized context (the last one may be shorter); training
sequences reuse these ids, so a chunk's length is exact. A chunk's score is the number of keys it shares
with the question (and, as in the authors' code, the gold answer when there is one), not counting keys
found in more than `max_df` of the sample's chunks (the document's own stop words: HotpotQA's distractor
paragraphs were retrieved for sharing the question's words; max_df 1.0 is the paper's plain count):
- keywords (default, no dependency): lower-cased content words, stop words dropped, crude singular forms;
- spacy_ner (the paper): the named entities spaCy finds;
- lexical (the authors' code): spaCy verb and noun lemmas plus named entities.
The spaCy scorers need the optional `spacy` package and its model; without them they refuse with one line.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ctxbench.harness.core.errors import ConfigError

SCORERS = ("keywords", "lexical", "spacy_ner")


@dataclass(frozen=True)
class QASample:
    """A question over a long context; `evidence` are the character spans of the supporting facts, when known."""

    id: str
    question: str
    answer: str | None
    context: str
    evidence: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Chunk:
    index: int
    ids: tuple[int, ...]
    text: str
    supporting: bool  # overlaps a supporting-fact sentence (HotpotQA)


def load_samples(fmt: str, path: Path, *, limit: int | None = None) -> list[QASample]:
    """HotpotQA (official or HF-datasets JSON; paragraphs "title\\nsentences" as in ruler/qa_2, supporting-fact
    sentences as evidence) or JSON lines {question, context, answer?, id?} (e.g. long-llm-data converted)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"data_file: {path} does not exist")
    if fmt == "hotpotqa":
        rows = json.loads(path.read_text(encoding="utf-8"))
        return [_hotpot_sample(d, i) for i, d in enumerate(rows[:limit] if limit else rows)]
    out = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if limit and len(out) >= limit:
                break
            if not line.strip():
                continue
            d = json.loads(line)
            if "question" not in d or "context" not in d:
                raise ConfigError(f"data_file: {path}:{i + 1} lacks 'question' or 'context'")
            out.append(QASample(str(d.get("id", i)), d["question"], d.get("answer"), d["context"]))
    return out


def _hotpot_sample(d: dict[str, Any], i: int) -> QASample:
    from ctxbench.tasks.ruler.qa import title_sentence_pairs

    facts = d.get("supporting_facts") or []
    facts = set(zip(facts["title"], facts["sent_id"])) if isinstance(facts, dict) else {tuple(f) for f in facts}
    text, evidence = "", []
    for p, (title, sentences) in enumerate(title_sentence_pairs(d["context"])):
        text += ("\n\n" if p else "") + title + "\n"
        for s, sentence in enumerate(sentences):
            if (title, s) in facts:
                evidence.append((len(text), len(text) + len(sentence)))
            text += sentence
    return QASample(str(d.get("_id", d.get("id", i))), d["question"], d.get("answer"), text, tuple(evidence))


def chunk_sample(tokenizer: Any, sample: QASample, chunk_tokens: int) -> list[Chunk]:
    """Token chunks of the sample's context in document order, each marked if it overlaps a supporting fact."""
    text = sample.context
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    gold = sample.evidence
    chunks = []
    for c, i in enumerate(range(0, len(ids), chunk_tokens)):
        j = min(i + chunk_tokens, len(ids)) - 1
        lo, hi = offsets[i][0], offsets[j][1]
        chunks.append(Chunk(c, tuple(ids[i:j + 1]), text[lo:hi], any(lo < e and s < hi for s, e in gold)))
    return chunks


# --- scorers --------------------------------------------------------------------------------------------

_WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?")


def keyword_keys(text: str) -> set[str]:
    """Content words: lower-cased, stop words and one-letter words dropped, possessives and plural -s cut."""
    from ctxbench.trainers.data.rake import STOPWORDS

    keys = set()
    for w in _WORD.findall(text.lower()):
        w = re.sub(r"['’]s$", "", w)
        if len(w) < 2 or w in STOPWORDS:
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
            w = w[:-1]
        keys.add(w)
    return keys


def spacy_keys(nlp: Any, *, lexical: bool) -> Callable[[str], set[str]]:
    """Keys from a spaCy pipeline: entities (spacy_ner), or verb and noun lemmas plus entities (lexical)."""

    def keys(text: str) -> set[str]:
        doc = nlp(text)
        out = {e.text.lower() for e in doc.ents}
        if lexical:
            out |= {t.lemma_.lower() for t in doc if t.pos_ in ("VERB", "NOUN")}
        return out

    return keys


def load_spacy(model: str, *, scorer: str) -> Any:
    from ctxbench.harness.core.extras import require_extra

    require_extra("logo", for_=f"scorer {scorer}", note=f" && python -m spacy download {model}; or use scorer: keywords")
    import spacy

    try:
        return spacy.load(model)
    except OSError:
        raise ConfigError(f"scorer: spaCy model {model!r} is not installed; python -m spacy download {model}, "
                          "or use scorer: keywords") from None


def make_scorer(name: str, *, spacy_model: str = "en_core_web_sm", nlp: Any = None) -> Callable[[str], set[str]]:
    """The key extractor of a scorer (nlp: an already loaded spaCy pipeline, e.g. a stub in tests)."""
    if name == "keywords":
        return keyword_keys
    if name in ("spacy_ner", "lexical"):
        return spacy_keys(nlp if nlp is not None else load_spacy(spacy_model, scorer=name), lexical=name == "lexical")
    raise ConfigError(f"scorer: unknown {name!r}; use one of {', '.join(SCORERS)}")


def score_chunks(keys: Callable[[str], set[str]], question: str, answer: str | None, chunks: Sequence[Chunk], *,
                 with_answer: bool = True, max_df: float = 1.0) -> np.ndarray:
    """Per chunk: how many keys of the question (and answer) it shares, keys in more than max_df of the chunks aside."""
    wanted = keys(question) | (keys(answer) if with_answer and answer else set())
    found = [keys(c.text) & wanted for c in chunks]
    df = Counter(k for f in found for k in f)
    common = {k for k, n in df.items() if n > max_df * len(chunks)}
    return np.array([len(f - common) for f in found], dtype=np.float64)
