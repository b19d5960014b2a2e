"""The token cache of a corpus: its documents tokenized once (batched, Rust tokenizer) into memory-mapped arrays.

Packers never see text: they read one flat int32 token array plus document offsets, so corpora larger than RAM
stream from disk. The cache is keyed by the corpus identity (trainers/data/corpus.py: paths, sizes, mtimes, reader
settings) and the tokenizer fingerprint, so a corpus is tokenized once per tokenizer. Every document keeps its id,
so packed data can be traced back to documents and a held-out split (`exclude_ids`) stays out of training.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.identity import content_hash
from ctxbench.harness.core.io import publish_files
from ctxbench.trainers.data.corpus import Corpus, CorpusConfig, open_corpus

BATCH_DOCS = 512
NPY_HEADER = 128  # fixed header size, so shapes can be patched in after streaming
INGEST_VERSION = 2  # bump when tokenization semantics or the cache layout change (invalidates caches); 2: ids.txt


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
    so only the packer's separators are ever BOS/EOS; the caller's tokenizer stays as it is. Padding or truncation a
    transformers call left on the Rust tokenizer is dropped from the copy: a document is its own tokens, never padded
    to a batch's longest or cut."""
    from tokenizers import Tokenizer

    spec = tok.backend_tokenizer.to_str()
    key = hashlib.sha256(spec.encode()).hexdigest()
    if key not in _ENCODERS:
        enc = Tokenizer.from_str(spec)
        enc.encode_special_tokens = True
        enc.no_padding()
        enc.no_truncation()
        _ENCODERS[key] = enc
    return _ENCODERS[key]


def _ingest(corpus: Corpus, tok, out: Path, progress=None) -> None:
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

        for doc in corpus.documents():
            if not doc.text.strip():
                skipped += 1
                continue
            batch.append((doc.text, doc.domain, doc.path, doc.doc_id))
            if len(batch) >= BATCH_DOCS:
                flush()
            if corpus.config.max_docs and ndocs + len(batch) >= corpus.config.max_docs:
                break
        if batch:
            flush()
    for s in (tokens, offsets, domains):
        s.close()
    if ndocs == 0:
        raise ConfigError(f"corpus.path: no documents found in {corpus.config.path} (format {corpus.format}); check "
                          "include/text_field")
    meta = {"docs": ndocs, "tokens": total, "skipped_empty": skipped, "domain_names": list(names),
            "identity": corpus.identity}
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


def load_corpus(cfg: CorpusConfig | Corpus, tokenizer, *, cache_root: str | Path | None = None, progress=None) -> TokenCorpus:
    """Tokenize the corpus once (batched, Rust tokenizer) into the cache, or reuse the cached tokens.
    cache_root defaults to $CTXBENCH_CACHE/corpora."""
    from filelock import FileLock

    from ctxbench.harness.core.models import cache_dir, tokenizer_fingerprint

    corpus = cfg if isinstance(cfg, Corpus) else open_corpus(cfg)
    key = content_hash([corpus.identity, tokenizer_fingerprint(tokenizer), INGEST_VERSION])
    base = Path(cache_root) if cache_root else cache_dir("corpora")
    base.mkdir(parents=True, exist_ok=True)
    root = base / key
    with FileLock(str(root) + ".lock"):
        if not (root / "meta.json").exists():
            root.mkdir(parents=True, exist_ok=True)
            _ingest(corpus, tokenizer, root, progress)
    return TokenCorpus(root, tokenizer, corpus.config.max_doc_tokens)
