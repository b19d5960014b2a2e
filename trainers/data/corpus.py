"""Corpus ingestion: stream documents once, tokenize in batches, keep only a memory-mapped token cache.

Packers never see text: they read one flat int32 token array plus document offsets, so corpora larger
than RAM stream from disk. The cache is keyed by the corpus identity (paths, sizes, mtimes, reader
settings) and the tokenizer fingerprint, so a corpus is tokenized once per tokenizer.

Every document has an id (its relative path in a directory corpus, `file:line` or `id_field` in records),
kept in the cache, so packed data can be traced back to documents and a held-out split (`exclude_ids`)
stays out of training, checkably.
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.io import publish_files

SOURCE_EXTS = ("py", "pyi", "c", "h", "cc", "cpp", "hpp", "cu", "java", "js", "ts", "go", "rs", "rb", "cs", "hs",
               "scala", "kt", "swift", "sh", "md", "rst", "txt", "toml", "yaml", "yml", "json", "html", "css", "sql")
SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", ".tox", ".mypy_cache"}
BATCH_DOCS = 512
NPY_HEADER = 128  # fixed header size, so shapes can be patched in after streaming
INGEST_VERSION = 2  # bump when tokenization semantics or the cache layout change (invalidates caches); 2: ids.txt


class CorpusConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str = Field(description="a .jsonl(.gz) or .parquet file (or a directory of them), a directory of .txt files, "
                                  "or a code repository tree")
    format: Literal["auto", "jsonl", "parquet", "text_dir", "repo", "squad"] = Field(
        "auto", description="auto: by suffix; a directory is text_dir when it holds only .txt files, else repo; squad: a "
                            "SQuAD JSON file, one document per article (its paragraphs joined by blank lines, id = title)")
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


def _detect(cfg: CorpusConfig) -> str:
    p = Path(cfg.path).expanduser()
    if not p.exists():
        raise ConfigError(f"corpus.path: {cfg.path} does not exist; point it at a .jsonl/.parquet file or a directory")
    if cfg.format != "auto":
        return cfg.format
    name = p.name.lower()
    if p.is_file():
        if name.endswith((".jsonl", ".jsonl.gz", ".json", ".ndjson")):
            return "jsonl"
        if name.endswith(".parquet"):
            return "parquet"
        raise ConfigError(f"corpus.format: cannot tell the format of {p.name}; set format: jsonl or parquet")
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


def _dir_files(cfg: CorpusConfig, fmt: str) -> list[Path]:
    """Files of a directory corpus in depth-first order: a directory's files (sorted), then its subdirectories."""
    root = Path(cfg.path).expanduser().resolve()
    pats = cfg.include or (["*.txt"] if fmt == "text_dir" else [f"*.{e}" for e in SOURCE_EXTS])
    out: list[Path] = []
    for d, dirs, names in os.walk(root):
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


def excluded_ids(cfg: CorpusConfig) -> frozenset[str]:
    """The ids of corpus.exclude_ids (empty without one)."""
    if not cfg.exclude_ids:
        return frozenset()
    p = Path(cfg.exclude_ids).expanduser()
    if not p.is_file():
        raise ConfigError(f"corpus.exclude_ids: {cfg.exclude_ids} is not a file of document ids")
    return frozenset(line for line in p.read_text(encoding="utf-8").split("\n") if line)


def iter_documents(cfg: CorpusConfig) -> Iterator[tuple[str, str, str]]:
    """Yield (text, domain, path) for every document not in exclude_ids, streamed (one line / batch / file at a time)."""
    for text, domain, path, _ in identified_documents(cfg):
        yield text, domain, path


def identified_documents(cfg: CorpusConfig, *, exclude: bool = True) -> Iterator[tuple[str, str, str, str]]:
    """Yield (text, domain, path, document id), streamed; documents in exclude_ids are skipped unless exclude=False."""
    skip = excluded_ids(cfg) if exclude else frozenset()
    for doc in _iter_all(cfg):
        if doc[3] not in skip:
            yield doc


def _iter_all(cfg: CorpusConfig) -> Iterator[tuple[str, str, str, str]]:
    fmt, p = _detect(cfg), Path(cfg.path).expanduser().resolve()
    if cfg.domain_from == "field" and not cfg.domain_field:
        raise ConfigError("corpus.domain_from: 'field' needs corpus.domain_field")
    if fmt in ("text_dir", "repo"):
        for f in _dir_files(cfg, fmt):
            raw = f.read_bytes()
            if b"\0" in raw[:8192]:
                continue  # binary
            rel = f.resolve().relative_to(p).as_posix()
            yield raw.decode("utf-8", errors="replace"), _domain(cfg, rel, None), rel, rel
    elif fmt == "jsonl":
        for f in _record_files(p, (".jsonl", ".jsonl.gz", ".json", ".ndjson")):
            opener = gzip.open if f.name.endswith(".gz") else open
            with opener(f, "rt", encoding="utf-8") as fh:
                for lineno, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError as e:
                        raise ConfigError(f"corpus.path: {f.name}:{lineno} is not valid JSON ({e.msg}); fix or "
                                          "remove that line") from None
                    yield _from_record(cfg, rec, f"{f.name}:{lineno}", f"{f.name}:{lineno}")
    elif fmt == "squad":
        yield from squad_articles(p)
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        cols = [c for c in (cfg.text_field, cfg.domain_field, cfg.path_field, cfg.repo_field, cfg.id_field) if c]
        for f in _record_files(p, (".parquet",)):
            pf = pq.ParquetFile(f)
            missing = [c for c in cols if c not in pf.schema_arrow.names]
            if missing:
                raise ConfigError(f"corpus.text_field/domain_field/path_field/repo_field/id_field: {missing} not in {f.name} columns "
                                  f"{pf.schema_arrow.names}")
            row = 0
            for batch in pf.iter_batches(batch_size=1024, columns=cols):
                for rec in batch.to_pylist():
                    yield _from_record(cfg, rec, f.name, f"{f.name}:{row}")
                    row += 1


def squad_articles(p: Path) -> Iterator[tuple[str, str, str, str]]:
    """SQuAD articles as documents (hierarchical-QA's long documents): the paragraphs of a title, joined."""
    try:
        data = json.loads(p.read_text(encoding="utf-8"))["data"]
    except (json.JSONDecodeError, KeyError, TypeError, IsADirectoryError):
        raise ConfigError(f"corpus.path: {p} is not a SQuAD JSON file (no top-level 'data' list)") from None
    for article in data:
        title = str(article["title"])
        yield "\n\n".join(par["context"] for par in article["paragraphs"]), "", title, title


def _from_record(cfg: CorpusConfig, rec: dict, where: str, locator: str) -> tuple[str, str, str, str]:
    if cfg.text_field not in rec:
        raise ConfigError(f"corpus.text_field: {cfg.text_field!r} missing in {where}; keys are {sorted(rec)}")
    path = str(rec.get(cfg.path_field) or "") if cfg.path_field else ""
    if cfg.repo_field and rec.get(cfg.repo_field):
        path = f"{rec[cfg.repo_field]}/{path.lstrip('/')}"
    if cfg.id_field and rec.get(cfg.id_field) is None:
        raise ConfigError(f"corpus.id_field: {cfg.id_field!r} missing in {where}; keys are {sorted(rec)}")
    doc_id = str(rec[cfg.id_field]) if cfg.id_field else locator
    return str(rec[cfg.text_field] or ""), _domain(cfg, path or None, rec.get(cfg.domain_field or "")), path, doc_id


def corpus_identity(cfg: CorpusConfig) -> dict:
    """What makes two ingestions equal: reader settings plus (name, size, mtime) of every input file."""
    fmt, p = _detect(cfg), Path(cfg.path).expanduser().resolve()
    if fmt in ("text_dir", "repo"):
        files = _dir_files(cfg, fmt)
    else:
        files = _record_files(p, (".jsonl", ".jsonl.gz", ".json", ".ndjson", ".parquet"))
    h = hashlib.sha256()
    for f in files:
        st = f.stat()
        h.update(f"{f.resolve().relative_to(p) if f.resolve() != p else f.name}\t{st.st_size}\t{st.st_mtime_ns}\n".encode())
    settings = cfg.model_dump(exclude={"max_doc_tokens"}, exclude_defaults=True)  # new optional fields keep old keys
    ident = {"path": str(p), "format": fmt, "files": len(files), "files_hash": h.hexdigest()[:16], "settings": settings}
    if cfg.exclude_ids:  # the ids themselves, not the file's name: a rewritten split is another corpus
        ident["excluded"] = hashlib.sha256("\n".join(sorted(excluded_ids(cfg))).encode()).hexdigest()[:16]
    return ident


class _NpyStream:
    """Append-only .npy writer: a fixed-size header patched with the final length on close."""

    def __init__(self, path: Path, dtype: str):
        self.path, self.dtype, self.n = path, np.dtype(dtype), 0
        self.fh = open(path, "wb")
        self.fh.write(b"\0" * NPY_HEADER)

    def write(self, arr: np.ndarray) -> None:
        self.fh.write(np.ascontiguousarray(arr, dtype=self.dtype).tobytes())
        self.n += len(arr)

    def close(self) -> None:
        d = f"{{'descr': '{self.dtype.str}', 'fortran_order': False, 'shape': ({self.n},), }}"
        head = b"\x93NUMPY\x01\x00" + (NPY_HEADER - 10).to_bytes(2, "little")
        body = d.encode().ljust(NPY_HEADER - 10 - 1) + b"\n"
        self.fh.seek(0)
        self.fh.write(head + body)
        self.fh.close()


_ENCODERS: dict[str, object] = {}


def _text_encoder(tok):
    """A copy of the Rust tokenizer that encodes special-token strings ("<|endoftext|>") in documents as text,
    so only the packer's separators are ever BOS/EOS; the caller's tokenizer stays as it is."""
    from tokenizers import Tokenizer

    spec = tok.backend_tokenizer.to_str()
    key = hashlib.sha256(spec.encode()).hexdigest()
    if key not in _ENCODERS:
        enc = Tokenizer.from_str(spec)
        enc.encode_special_tokens = True
        _ENCODERS[key] = enc
    return _ENCODERS[key]


def _ingest(cfg: CorpusConfig, tok, out: Path, progress=None) -> None:
    tmp = out / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    tokens, offsets, domains = _NpyStream(tmp / "tokens.npy", "<i4"), _NpyStream(tmp / "offsets.npy", "<i8"), \
        _NpyStream(tmp / "domains.npy", "<i4")
    offsets.write(np.zeros(1, dtype=np.int64))
    names: dict[str, int] = {}
    total, ndocs, skipped = 0, 0, 0
    backend = _text_encoder(tok)
    with open(tmp / "paths.txt", "w", encoding="utf-8") as paths, open(tmp / "ids.txt", "w", encoding="utf-8") as ids:
        batch: list[tuple[str, str, str, str]] = []

        def flush():
            nonlocal total, ndocs
            enc = backend.encode_batch_fast([t for t, _, _, _ in batch], add_special_tokens=False)
            lens = np.fromiter((len(e.ids) for e in enc), dtype=np.int64, count=len(enc))
            tokens.write(np.concatenate([np.asarray(e.ids, dtype=np.int32) for e in enc]))
            offsets.write(total + np.cumsum(lens))
            domains.write(np.array([names.setdefault(d, len(names)) for _, d, _, _ in batch], dtype=np.int32))
            paths.writelines(p.replace("\n", " ") + "\n" for _, _, p, _ in batch)
            ids.writelines(i.replace("\n", " ") + "\n" for _, _, _, i in batch)
            total += int(lens.sum())
            ndocs += len(batch)
            batch.clear()
            if progress:
                progress(ndocs)

        for text, dom, path, doc_id in identified_documents(cfg):
            if not text.strip():
                skipped += 1
                continue
            batch.append((text, dom, path, doc_id))
            if len(batch) >= BATCH_DOCS:
                flush()
            if cfg.max_docs and ndocs + len(batch) >= cfg.max_docs:
                break
        if batch:
            flush()
    for s in (tokens, offsets, domains):
        s.close()
    if ndocs == 0:
        raise ConfigError(f"corpus.path: no documents found in {cfg.path} (format {_detect(cfg)}); check include/text_field")
    meta = {"docs": ndocs, "tokens": total, "skipped_empty": skipped, "domain_names": list(names),
            "identity": corpus_identity(cfg)}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    publish_files(tmp, out, last="meta.json")


class TokenCorpus:
    """Read side of the cache: memory-mapped tokens, document offsets, domains and (optional) paths."""

    def __init__(self, root: Path, tokenizer, max_doc_tokens: int | None = None):
        self.dir = Path(root)
        self.key = self.dir.name
        self.view = max_doc_tokens or 0  # derived indexes are per view: splitting changes document ids
        self.tokenizer = tokenizer
        self.meta = json.loads((self.dir / "meta.json").read_text())
        self.tokens = np.load(self.dir / "tokens.npy", mmap_mode="r")
        offsets = np.load(self.dir / "offsets.npy")
        self.source = np.arange(len(offsets) - 1, dtype=np.int64)  # view doc -> cached doc
        if max_doc_tokens:
            offsets, self.source = _split(offsets, max_doc_tokens)
        self.offsets = offsets
        self.lengths = np.diff(offsets)
        self.domains = np.load(self.dir / "domains.npy")[self.source]
        self.domain_names: list[str] = self.meta["domain_names"]
        self._paths: list[str] | None = None
        self._ids: list[str] | None = None

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def num_tokens(self) -> int:
        return int(self.offsets[-1] - self.offsets[0])

    def doc(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i]:self.offsets[i + 1]]

    def paths(self) -> list[str]:
        """File path per (view) document; empty strings when the corpus has none."""
        if self._paths is None:
            src = (self.dir / "paths.txt").read_text(encoding="utf-8").split("\n")[:-1]
            self._paths = [src[s] for s in self.source]
        return self._paths

    def doc_ids(self) -> list[str]:
        """The source document id of every (view) document: pieces of one document share its id."""
        if self._ids is None:
            src = (self.dir / "ids.txt").read_text(encoding="utf-8").split("\n")[:-1]
            self._ids = [src[s] for s in self.source]
        return self._ids

    def texts(self, ids, max_tokens: int | None = None) -> list[str]:
        """Decode documents back to text (byte-level BPE round-trips), e.g. for embedders and RAKE."""
        seqs = [self.doc(int(i))[:max_tokens].tolist() for i in ids]
        return self.tokenizer.backend_tokenizer.decode_batch(seqs, skip_special_tokens=False)


def _split(offsets: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    lens = np.diff(offsets)
    pieces = np.maximum(1, -(-lens // n))
    source = np.repeat(np.arange(len(lens)), pieces)
    first = np.repeat(offsets[:-1], pieces)
    k = np.arange(len(source)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    starts = first + k * n
    return np.append(starts, offsets[-1]).astype(np.int64), source


def load_corpus(cfg: CorpusConfig, tokenizer, *, cache_root: str | Path | None = None, progress=None) -> TokenCorpus:
    """Tokenize the corpus once (batched, Rust tokenizer) into the cache, or reuse the cached tokens.
    cache_root defaults to $CTXBENCH_CACHE/corpora."""
    from filelock import FileLock

    from ctxbench.harness.core.models import cache_dir, tokenizer_fingerprint

    ident = corpus_identity(cfg)
    key = hashlib.sha256(json.dumps([ident, tokenizer_fingerprint(tokenizer), INGEST_VERSION],
                                    sort_keys=True).encode()).hexdigest()[:16]
    base = Path(cache_root) if cache_root else cache_dir("corpora")
    base.mkdir(parents=True, exist_ok=True)
    root = base / key
    with FileLock(str(root) + ".lock"):
        if not (root / "meta.json").exists():
            root.mkdir(parents=True, exist_ok=True)
            _ingest(cfg, tokenizer, root, progress)
    return TokenCorpus(root, tokenizer, cfg.max_doc_tokens)
