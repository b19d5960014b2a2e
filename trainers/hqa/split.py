"""Documents in, hierarchies out: medium sections of `medium_tokens` holding small chunks of `small_tokens` (§3.1).

Chunks are cut at exact token counts of the training tokenizer and sliced from the text by character
offsets, so the chunks of a document concatenate back to its (possibly shortened) text exactly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ctxbench.harness.core.errors import ConfigError


class DocumentSource(BaseModel):
    """Where the long documents come from."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str = Field(description="squad JSON (e.g. squad/dev-v2.0.json), a .jsonl(.gz)/.parquet file or directory, or a "
                      "directory of .txt files; a relative path is looked up in the data dir (env CTXBENCH_DATA_DIR) first")
    format: Literal["squad", "jsonl", "parquet", "text_dir", "auto", "corpus"] = Field(
        "auto", description="squad: one document per article, its paragraphs joined by blank lines; corpus: read through "
        "`corpus` (a study's training split: its exclude_ids stay out); others as corpus files")
    text_field: str = Field("text", description="jsonl/parquet: the field holding the document text")
    max_documents: int | None = Field(None, ge=1, description="read at most this many documents (in file order)")
    corpus: dict[str, Any] | None = Field(None, description="format corpus: CorpusConfig keys (trainers/data/corpus.py), "
                                          "document ids as the corpus gives them")

    @model_validator(mode="after")
    def _corpus(self):
        if (self.format == "corpus") != (self.corpus is not None):
            raise ValueError("documents.corpus goes with format: corpus (and format: corpus needs documents.corpus)")
        return self


@dataclass(frozen=True)
class Document:
    doc_id: str
    text: str


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


def resolve_path(path: str, data_dir: Path | None) -> Path:
    p = Path(path).expanduser()
    if not p.is_absolute() and data_dir is not None and (data_dir / p).exists():
        return data_dir / p
    if not p.exists():
        raise ConfigError(f"documents.path: {path} does not exist (looked in the data dir {data_dir} and the working "
                          "directory); set CTXBENCH_DATA_DIR or give an absolute path")
    return p


def source_identity(src: DocumentSource, data_dir: Path | None) -> list[Any]:
    """The content of every input file (trainers/data/synthesis.files_identity): edited documents are different data
    under the same config; a study corpus by its corpus identity, which includes the ids it leaves out."""
    from ctxbench.trainers.data.synthesis import files_identity

    if src.format == "corpus":
        from ctxbench.trainers.data.corpus import CorpusConfig, corpus_identity

        return [corpus_identity(CorpusConfig(**src.corpus))]
    path = resolve_path(src.path, data_dir)
    files = sorted(f for f in path.rglob("*") if f.is_file()) if path.is_dir() else [path]
    return files_identity(files, path)


def read_documents(src: DocumentSource, data_dir: Path | None) -> list[Document]:
    """Documents with stable ids (title for SQuAD, file position otherwise), in file order."""
    if src.format == "corpus":
        from ctxbench.trainers.data.corpus import CorpusConfig, identified_documents

        docs = [Document(doc_id, text) for text, _, _, doc_id in identified_documents(CorpusConfig(**src.corpus))]
        return docs[: src.max_documents] if src.max_documents else docs
    path = resolve_path(src.path, data_dir)
    docs = list(_squad(path) if src.format == "squad" or (src.format == "auto" and _is_squad(path)) else _corpus(src, path))
    return docs[: src.max_documents] if src.max_documents else docs


def _is_squad(path: Path) -> bool:
    return path.suffix == ".json" and path.is_file() and '"paragraphs"' in path.read_text(errors="replace")[:200_000]


def _squad(path: Path) -> Iterator[Document]:
    from ctxbench.trainers.data.corpus import squad_articles

    try:
        for text, _, _, title in squad_articles(path):
            yield Document(title, text)
    except ConfigError as e:
        raise ConfigError(str(e).replace("corpus.path", "documents.path", 1)) from None


def _corpus(src: DocumentSource, path: Path) -> Iterator[Document]:
    from ctxbench.trainers.data.corpus import CorpusConfig, iter_documents

    fmt = "auto" if src.format == "auto" else src.format
    for i, (text, _domain, where) in enumerate(iter_documents(CorpusConfig(path=str(path), format=fmt, text_field=src.text_field))):
        yield Document(where or f"doc{i:06d}-{hashlib.sha256(text[:4096].encode()).hexdigest()[:8]}", text)


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
