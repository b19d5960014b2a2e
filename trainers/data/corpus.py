"""The one corpus reader: every data method (the packings, hierarchical-QA, plugins) reads its documents through it.

A synthesis method's text output (a directory whose manifest.json lists JSON-lines shards of {"text": str} rows) is
a corpus too (format `synthesis`): that is how cpt packs and trains on a text-producing method's data.

`open_corpus(config)` resolves the corpus once (a relative path is looked up in the data dir first; the format is
detected) and returns a `Corpus`: its `identity` (reader settings plus name, size and mtime of every input file),
its input `files()` and its `documents()` (streamed, one line / batch / file at a time), each a `Document` with its
id, text, domain and path. Every document has an id (its relative path in a directory corpus, `file:line` or
`id_field` in records, the title of a SQuAD article), so data can be traced back to documents and a held-out split
(`exclude_ids`) stays out of training, checkably. The token cache over it is trainers/data/token_cache.py.
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ctxbench.harness.core.errors import ConfigError

SOURCE_EXTS = ("py", "pyi", "c", "h", "cc", "cpp", "hpp", "cu", "java", "js", "ts", "go", "rs", "rb", "cs", "hs",
               "scala", "kt", "swift", "sh", "md", "rst", "txt", "toml", "yaml", "yml", "json", "html", "css", "sql")
SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", ".tox", ".mypy_cache"}
RECORD_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".ndjson")


class CorpusConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str = Field(description="a .jsonl(.gz) or .parquet file (or a directory of them), a directory of .txt files, "
                                  "or a code repository tree")
    format: Literal["auto", "jsonl", "parquet", "text_dir", "repo", "squad", "synthesis"] = Field(
        "auto", description="auto: by suffix (a .json file holding 'paragraphs' is squad); a directory is synthesis "
                            "when its manifest.json is a synthesis manifest, text_dir when it holds only .txt files, "
                            "else repo; squad: a SQuAD JSON file, one document per article (its paragraphs joined by "
                            "blank lines, id = title); synthesis: a finished text-producing synthesis method's output "
                            "(the JSON-lines shards its manifest lists, one document per row, id = shard:line)")
    text_field: str = Field("text", description="jsonl/parquet: the field holding the document text")
    domain_field: str | None = Field(None, description="jsonl/parquet: field naming the document's domain (e.g. source)")
    path_field: str | None = Field(None, description="jsonl/parquet: field holding a file path (enables the repo retriever)")
    repo_field: str | None = Field(None, description="jsonl/parquet: field naming the repository; prefixed to the path "
                                   "(e.g. StarCoder's max_stars_repo_name), so the repo retriever stays within a repo")
    domain_from: Literal["auto", "field", "top_dir", "extension", "none"] = Field(
        "auto", description="domain of a document: auto = domain_field if set, else the top-level directory of its "
                            "path (the extension for files at the root), else none")
    include: list[str] = Field(default_factory=list, description="directory formats: file globs to read "
                               "(default: *.txt for text_dir, common source/text extensions for repo)")
    max_docs: int | None = Field(None, ge=1, description="stop after this many documents")
    max_file_bytes: int = Field(2_000_000, ge=1, description="directory formats: skip larger files (generated/vendored)")
    max_doc_tokens: int | None = Field(None, ge=16, description="split longer documents into pieces of this many "
                                       "tokens (a view over the cache; path and domain are kept)")
    id_field: str | None = Field(None, description="jsonl/parquet: field holding a document id; default file:line "
                                 "(file:row for parquet); directory formats use the relative path")
    exclude_ids: str | None = Field(None, description="a text file of document ids, one a line, left out of the corpus "
                                    "(a study's held-out documents)")


@dataclass(frozen=True)
class Document:
    """One document as every method reads it: a stable id, its text, its domain and its file path ('' when none)."""

    doc_id: str
    text: str
    domain: str = ""
    path: str = ""


@dataclass(frozen=True)
class Corpus:
    """A corpus resolved once: its config, the path it reads (`root`) and its format. `field` names the config section
    in error messages (corpus, documents)."""

    config: CorpusConfig
    root: Path
    format: str
    field: str = "corpus"

    def files(self) -> list[Path]:
        """The input files, in reading order."""
        if self.format in ("text_dir", "repo"):
            return _dir_files(self)
        if self.format == "synthesis":
            return _synthesis_shards(self)[1]
        return [self.root] if self.format == "squad" else _record_files(self.root, (*RECORD_SUFFIXES, ".parquet"))

    @cached_property
    def excluded(self) -> frozenset[str]:
        """The ids of exclude_ids (empty without one)."""
        if not self.config.exclude_ids:
            return frozenset()
        p = Path(self.config.exclude_ids).expanduser()
        if not p.is_file():
            raise ConfigError(f"{self.field}.exclude_ids: {self.config.exclude_ids} is not a file of document ids")
        return frozenset(line for line in p.read_text(encoding="utf-8").split("\n") if line)

    @cached_property
    def identity(self) -> dict[str, Any]:
        """What makes two readings equal: reader settings plus (name, size, mtime) of every input file."""
        files, h = self.files(), hashlib.sha256()
        for f in files:
            st = f.stat()
            h.update(f"{f.resolve().relative_to(self.root) if f.resolve() != self.root else f.name}\t{st.st_size}\t"
                     f"{st.st_mtime_ns}\n".encode())
        settings = self.config.model_dump(exclude={"max_doc_tokens"}, exclude_defaults=True)  # new optional fields keep old keys
        ident = {"path": str(self.root), "format": self.format, "files": len(files), "files_hash": h.hexdigest()[:16],
                 "settings": settings}
        if self.format == "synthesis":  # the method output's identity (its config, inputs and generator)
            ident["synthesis"] = _synthesis_shards(self)[0]["identity"]["hash"]
        if self.config.exclude_ids:  # the ids themselves, not the file's name: a rewritten split is another corpus
            ident["excluded"] = hashlib.sha256("\n".join(sorted(self.excluded)).encode()).hexdigest()[:16]
        return ident

    @cached_property
    def content_identity(self) -> dict[str, Any]:
        """What the corpus holds wherever it lies (a synthesis's input identity): the format, the reader settings but
        the path, and each file's name under the root with its content digest; moving or copying it keeps it."""
        from ctxbench.trainers.data.synthesis import files_identity

        ident = {k: v for k, v in self.identity.items() if k not in ("path", "files", "files_hash", "settings")}
        ident["settings"] = self.config.model_dump(exclude={"max_doc_tokens", "path"}, exclude_defaults=True)
        ident["files"] = files_identity(self.files(), self.root)
        return ident

    def documents(self, *, exclude: bool = True) -> Iterator[Document]:
        """Every document, streamed; those in exclude_ids are skipped unless exclude=False."""
        skip = self.excluded if exclude else frozenset()
        for doc in _read(self):
            if doc.doc_id not in skip:
                yield doc


def open_corpus(config: CorpusConfig | Mapping[str, Any], *, data_dir: Path | None = None, field: str = "corpus") -> Corpus:
    """Resolve a corpus once: its path (a relative one looked up in data_dir first), its format, its domain rule."""
    cfg = config if isinstance(config, CorpusConfig) else CorpusConfig(**config)
    p = Path(cfg.path).expanduser()
    if not p.is_absolute() and data_dir is not None and (data_dir / p).exists():
        p = data_dir / p
    if not p.exists():
        where = (f" (looked in the data dir {data_dir} and the working directory); set CTXBENCH_DATA_DIR or give an "
                 "absolute path") if data_dir is not None else "; point it at a .jsonl/.parquet file or a directory"
        raise ConfigError(f"{field}.path: {cfg.path} does not exist{where}")
    if cfg.domain_from == "field" and not cfg.domain_field:
        raise ConfigError(f"{field}.domain_from: 'field' needs {field}.domain_field")
    root = p.resolve()
    return Corpus(cfg, root, cfg.format if cfg.format != "auto" else _detect(root, field), field)


def _detect(p: Path, field: str) -> str:
    name = p.name.lower()
    if p.is_file():
        if name.endswith(".json") and '"paragraphs"' in p.read_text(errors="replace")[:200_000]:
            return "squad"
        if name.endswith(RECORD_SUFFIXES):
            return "jsonl"
        if name.endswith(".parquet"):
            return "parquet"
        raise ConfigError(f"{field}.format: cannot tell the format of {p.name}; set format: jsonl or parquet")
    if _is_synthesis_output(p):
        return "synthesis"
    files = [f for f in p.iterdir() if f.is_file()]
    if files and all(f.name.endswith((".jsonl", ".jsonl.gz")) for f in files):
        return "jsonl"
    if files and all(f.name.endswith(".parquet") for f in files):
        return "parquet"
    for _root, dirs, names in os.walk(p):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
        if any(not n.endswith(".txt") and not n.startswith(".") for n in names):
            return "repo"
    return "text_dir"


def _is_synthesis_output(p: Path) -> bool:
    from ctxbench.trainers.data.synthesis import SCHEMA, read_manifest

    try:
        return (read_manifest(p) or {}).get("schema") == SCHEMA
    except (json.JSONDecodeError, OSError):
        return False


def _synthesis_shards(corpus: Corpus) -> tuple[dict[str, Any], list[Path]]:
    """A text-producing method's finished output: its manifest and the JSON-lines shards it lists (else one line)."""
    from ctxbench.trainers.data.synthesis import SCHEMA, read_manifest

    where = f"{corpus.field}.path: {corpus.root}"
    m = read_manifest(corpus.root) if corpus.root.is_dir() else None
    if not m or m.get("schema") != SCHEMA:
        raise ConfigError(f"{where} holds no synthesis output (no {SCHEMA} manifest.json); run the method first")
    if not m.get("complete"):
        raise ConfigError(f"{where}: the {m.get('method')} synthesis is unfinished; rerun it to finish it")
    shards = [str(s) for s in m.get("shards", [])]
    if not shards or not all(s.endswith(".jsonl") for s in shards):
        raise ConfigError(f"{where} is {m.get('method')} output, not JSON-lines text shards; only a method that "
                          "produces text is read as a corpus")
    return m, [corpus.root / s for s in shards]


def _dir_files(corpus: Corpus) -> list[Path]:
    """Files of a directory corpus in depth-first order: a directory's files (sorted), then its subdirectories."""
    cfg = corpus.config
    pats = cfg.include or (["*.txt"] if corpus.format == "text_dir" else [f"*.{e}" for e in SOURCE_EXTS])
    out: list[Path] = []
    for d, dirs, names in os.walk(corpus.root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("."))
        for n in sorted(names):
            if any(fnmatch.fnmatch(n, pat) for pat in pats):
                f = Path(d) / n
                if f.stat().st_size <= cfg.max_file_bytes:
                    out.append(f)
    return out


def _record_files(p: Path, suffixes: tuple[str, ...]) -> list[Path]:
    return [p] if p.is_file() else sorted(f for f in p.iterdir() if f.name.endswith(suffixes))


def _domain(cfg: CorpusConfig, rel: str | None, field_value) -> str:
    mode = cfg.domain_from
    if mode == "auto":
        mode = "field" if cfg.domain_field else ("top_dir" if rel else "none")
    if mode == "field":
        return "" if field_value is None else str(field_value)
    if mode == "none" or not rel:
        return ""
    parts = rel.replace("\\", "/").lstrip("/").split("/")
    if mode == "top_dir" and len(parts) > 1:
        return parts[0]
    return Path(parts[-1]).suffix.lstrip(".") or "(none)"


def _read(corpus: Corpus) -> Iterator[Document]:
    readers = {"text_dir": _read_dir, "repo": _read_dir, "jsonl": _read_jsonl, "squad": _read_squad, "parquet": _read_parquet,
               "synthesis": _read_jsonl}
    yield from readers[corpus.format](corpus)


def _read_dir(corpus: Corpus) -> Iterator[Document]:
    for f in _dir_files(corpus):
        raw = f.read_bytes()
        if b"\0" in raw[:8192]:
            continue  # binary
        rel = f.resolve().relative_to(corpus.root).as_posix()
        yield Document(rel, raw.decode("utf-8", errors="replace"), _domain(corpus.config, rel, None), rel)


def _read_jsonl(corpus: Corpus) -> Iterator[Document]:
    files = corpus.files() if corpus.format == "synthesis" else _record_files(corpus.root, RECORD_SUFFIXES)
    for f in files:
        opener = gzip.open if f.name.endswith(".gz") else open
        with opener(f, "rt", encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ConfigError(f"{corpus.field}.path: {f.name}:{lineno} is not valid JSON ({e.msg}); fix or "
                                      "remove that line") from None
                yield _from_record(corpus, rec, f"{f.name}:{lineno}", f"{f.name}:{lineno}")


def _read_squad(corpus: Corpus) -> Iterator[Document]:
    """SQuAD articles as documents (hierarchical-QA's long documents): the paragraphs of a title, joined."""
    try:
        data = json.loads(corpus.root.read_text(encoding="utf-8"))["data"]
    except (json.JSONDecodeError, KeyError, TypeError, IsADirectoryError):
        raise ConfigError(f"{corpus.field}.path: {corpus.root} is not a SQuAD JSON file (no top-level 'data' list)") from None
    for article in data:
        title = str(article["title"])
        yield Document(title, "\n\n".join(par["context"] for par in article["paragraphs"]), "", title)


def _read_parquet(corpus: Corpus) -> Iterator[Document]:
    import pyarrow.parquet as pq

    cfg = corpus.config
    cols = [c for c in (cfg.text_field, cfg.domain_field, cfg.path_field, cfg.repo_field, cfg.id_field) if c]
    for f in _record_files(corpus.root, (".parquet",)):
        pf = pq.ParquetFile(f)
        missing = [c for c in cols if c not in pf.schema_arrow.names]
        if missing:
            raise ConfigError(f"{corpus.field}.text_field/domain_field/path_field/repo_field/id_field: {missing} not in "
                              f"{f.name} columns {pf.schema_arrow.names}")
        row = 0
        for batch in pf.iter_batches(batch_size=1024, columns=cols):
            for rec in batch.to_pylist():
                yield _from_record(corpus, rec, f.name, f"{f.name}:{row}")
                row += 1


def _from_record(corpus: Corpus, rec: dict, where: str, locator: str) -> Document:
    cfg, field = corpus.config, corpus.field
    if cfg.text_field not in rec:
        raise ConfigError(f"{field}.text_field: {cfg.text_field!r} missing in {where}; keys are {sorted(rec)}")
    path = str(rec.get(cfg.path_field) or "") if cfg.path_field else ""
    if cfg.repo_field and rec.get(cfg.repo_field):
        path = f"{rec[cfg.repo_field]}/{path.lstrip('/')}"
    if cfg.id_field and rec.get(cfg.id_field) is None:
        raise ConfigError(f"{field}.id_field: {cfg.id_field!r} missing in {where}; keys are {sorted(rec)}")
    doc_id = str(rec[cfg.id_field]) if cfg.id_field else locator
    return Document(doc_id, str(rec[cfg.text_field] or ""), _domain(cfg, path or None, rec.get(cfg.domain_field or "")), path)


def corpus_identity(cfg: CorpusConfig) -> dict[str, Any]:
    """The identity of a corpus config (open_corpus(cfg).identity): for callers that hold only the config."""
    return open_corpus(cfg).identity
