"""The held-out split of a study corpus: documents no method trains on, for the shared perplexity measurement.

Documents are ranked by a hash of (seed, document id), so the split depends only on the ids, not on corpus order;
the first `documents` of them with at least `min_tokens` tokens are held out. They are written once to
heldout.jsonl ({id, text, tokens}) with their ids in ids.txt, and the training corpus gains exclude_ids: ids.txt,
so ingestion skips them (trainers/data/corpus.py). The directory is keyed by everything the choice depends on.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ctxbench.harness.core.config import one_line
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.identity import content_hash
from ctxbench.harness.core.io import atomic_dir

BATCH = 64  # candidates tokenized per round, in rank order


@dataclass(frozen=True)
class Heldout:
    path: Path  # heldout.jsonl
    ids: frozenset[str]
    min_tokens: int
    train_corpus: dict[str, Any]  # the corpus keys with exclude_ids set


def rank(seed: int, doc_id: str) -> str:
    return hashlib.sha256(f"{seed}:{doc_id}".encode()).hexdigest()


def split_heldout(corpus: dict[str, Any], *, documents: int, min_tokens: int, seed: int, tokenizer: str, root: Path) -> Heldout:
    """Choose (once) and write the held-out documents; return them and the training corpus that excludes them."""
    from ctxbench.harness.core.models import load_tokenizer, tokenizer_fingerprint
    from ctxbench.trainers.data.corpus import CorpusConfig, open_corpus

    try:
        cfg = CorpusConfig(**corpus)
    except ValidationError as e:
        raise ConfigError(one_line(e, "corpus")) from None
    if cfg.exclude_ids:
        raise ConfigError("corpus.exclude_ids: the study holds documents out itself; remove the key")
    tok = load_tokenizer(tokenizer)
    study_corpus = open_corpus(cfg)
    key = content_hash([study_corpus.identity, documents, min_tokens, seed, tokenizer_fingerprint(tok)], 12)
    out = root / "heldout" / key
    if not (out / "ids.txt").exists():
        chosen = _choose(study_corpus, tok, documents=documents, min_tokens=min_tokens, seed=seed)
        with atomic_dir(out) as tmp:
            with open(tmp / "heldout.jsonl", "w", encoding="utf-8") as f:
                f.writelines(json.dumps({"id": i, "text": t, "tokens": n}) + "\n" for i, t, n in chosen)
            (tmp / "ids.txt").write_text("".join(f"{i}\n" for i, _, _ in chosen), encoding="utf-8")
    ids = frozenset(x for x in (out / "ids.txt").read_text(encoding="utf-8").split("\n") if x)
    return Heldout(out / "heldout.jsonl", ids, min_tokens, {**corpus, "exclude_ids": str((out / "ids.txt").resolve())})


def _choose(corpus, tok, *, documents: int, min_tokens: int, seed: int) -> list[tuple[str, str, int]]:
    """The first `documents` of at least min_tokens, in the seeded rank order of their ids (texts read a batch at a time)."""
    order = sorted((rank(seed, doc.doc_id), doc.doc_id) for doc in corpus.documents())
    if len({d for _, d in order}) != len(order):
        raise ConfigError("corpus: document ids repeat; set corpus.id_field to a unique field")
    chosen: list[tuple[str, str, int]] = []
    for start in range(0, len(order), BATCH):
        wanted = {d for _, d in order[start: start + BATCH]}
        texts = {doc.doc_id: doc.text for doc in corpus.documents() if doc.doc_id in wanted}
        for _, d in order[start: start + BATCH]:
            n = len(tok(texts[d], add_special_tokens=False)["input_ids"])
            if n >= min_tokens:
                chosen.append((d, texts[d], n))
                if len(chosen) == documents:
                    return chosen
    raise ConfigError(f"perplexity.documents: the corpus has only {len(chosen)} documents of at least {min_tokens} tokens; "
                      "lower documents, lengths or min_tokens, or use a corpus with longer documents")
