"""Documents in, hierarchies out: medium sections of `medium_tokens` holding small chunks of `small_tokens` (§3.1).

Chunks are cut at exact token counts of the training tokenizer and sliced from the text by character
offsets, so the chunks of a document concatenate back to its (possibly shortened) text exactly. The documents
come from the one corpus reader (trainers/data/corpus.py); this module only splits them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxbench.trainers.data.corpus import Document


@dataclass(frozen=True)
class Hierarchy:
    """A document cut into medium sections of small chunks; `text` is the part that was kept."""

    doc_id: str
    mediums: tuple[tuple[str, ...], ...]
    tokens: int

    @property
    def shape(self) -> list[int]:
        return [len(m) for m in self.mediums]

    @property
    def smalls(self) -> list[str]:
        return [c for m in self.mediums for c in m]

    @property
    def text(self) -> str:
        return "".join(self.smalls)


def split(doc: Document, tokenizer, *, small_tokens: int, medium_tokens: int, max_tokens: int | None) -> Hierarchy | None:
    """Cut a document into small chunks (exact token counts, sliced by character offsets), grouped into
    mediums of medium_tokens / small_tokens chunks; keep at most max_tokens (whole small chunks).
    None when the document is shorter than one medium section (the caller counts it)."""
    enc = tokenizer(doc.text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    n = len(offsets)
    if n < medium_tokens:
        return None
    if max_tokens is not None:
        n = min(n, (max_tokens // small_tokens) * small_tokens)
    starts = [offsets[i][0] for i in range(0, n, small_tokens)]
    end = len(doc.text) if n == len(offsets) else offsets[n][0]
    smalls = [doc.text[a:b] for a, b in zip(starts, [*starts[1:], end])]
    smalls[0] = doc.text[:starts[1] if len(starts) > 1 else end]  # keep any leading whitespace
    per = medium_tokens // small_tokens
    mediums = tuple(tuple(smalls[i: i + per]) for i in range(0, len(smalls), per))
    return Hierarchy(doc.doc_id, mediums, n)
