"""Corpus ingestion: every input format, the token cache, domains/paths metadata, document splitting."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from ctxbench.harness.core.errors import ConfigError
from ctxbench.trainers.data.corpus import CorpusConfig
from ctxbench.trainers.data.token_cache import load_corpus

STDLIB = Path(sysconfig.get_paths()["stdlib"])


@pytest.fixture()
def cache(tmp_path):
    return tmp_path / "cache"


def _texts(corpus):
    return [corpus.tokenizer.decode(corpus.doc(i).tolist()) for i in range(len(corpus))]


def test_jsonl_round_trip_domains_and_cache(tmp_path, cache, smol_tokenizer):
    recs = [{"text": f"document {i} about {'cats' if i % 2 else 'dogs'}", "src": "a" if i < 3 else "b"} for i in range(6)]
    recs.insert(2, {"text": "   ", "src": "a"})  # empty: skipped
    f = tmp_path / "c.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    cfg = CorpusConfig(path=str(f), domain_field="src")
    c = load_corpus(cfg, smol_tokenizer, cache_root=cache)
    assert len(c) == 6 and c.meta["skipped_empty"] == 1
    assert _texts(c) == [r["text"] for r in recs if r["text"].strip()]
    assert [c.domain_names[d] for d in c.domains] == ["a", "a", "a", "b", "b", "b"]
    assert c.tokens.dtype == np.int32 and isinstance(c.tokens, np.memmap)
    stamp = (c.dir / "tokens.npy").stat().st_mtime_ns
    again = load_corpus(cfg, smol_tokenizer, cache_root=cache)  # cached: not re-tokenized
    assert again.dir == c.dir and (c.dir / "tokens.npy").stat().st_mtime_ns == stamp
    f.write_text(f.read_text() + json.dumps({"text": "one more", "src": "b"}) + "\n")
    assert load_corpus(cfg, smol_tokenizer, cache_root=cache).dir != c.dir  # changed input: new cache


def test_special_token_text_is_not_a_separator(tmp_path, cache, smol_tokenizer):
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps({"text": "before <|im_end|> after <|im_start|>"}) + "\n")
    c = load_corpus(CorpusConfig(path=str(f)), smol_tokenizer, cache_root=cache)
    ids = set(c.doc(0).tolist())
    assert smol_tokenizer.eos_token_id not in ids and smol_tokenizer.bos_token_id not in ids
    assert c.texts([0])[0] == "before <|im_end|> after <|im_start|>"


def test_parquet_and_max_docs(tmp_path, cache, smol_tokenizer):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"body": [f"row {i}" for i in range(10)], "path": [f"d{i % 3}/f{i}.txt" for i in range(10)]}),
                   tmp_path / "c.parquet")
    c = load_corpus(CorpusConfig(path=str(tmp_path / "c.parquet"), text_field="body", path_field="path", max_docs=7),
                    smol_tokenizer, cache_root=cache)
    assert len(c) == 7 and c.paths()[:2] == ["d0/f0.txt", "d1/f1.txt"]
    assert [c.domain_names[d] for d in c.domains[:3]] == ["d0", "d1", "d2"]  # top-level dir of path_field
    with pytest.raises(ConfigError, match="text_field"):
        load_corpus(CorpusConfig(path=str(tmp_path / "c.parquet")), smol_tokenizer, cache_root=cache)


def test_text_dir_and_repo_tree(tmp_path, cache, smol_tokenizer):
    (tmp_path / "t" / "sub").mkdir(parents=True)
    (tmp_path / "t" / "a.txt").write_text("alpha text")
    (tmp_path / "t" / "sub" / "b.txt").write_text("beta text")
    c = load_corpus(CorpusConfig(path=str(tmp_path / "t")), smol_tokenizer, cache_root=cache)
    assert c.meta["identity"]["format"] == "text_dir" and c.paths() == ["a.txt", "sub/b.txt"]
    assert [c.domain_names[d] for d in c.domains] == ["txt", "sub"]

    repo = load_corpus(CorpusConfig(path=str(STDLIB / "json")), smol_tokenizer, cache_root=cache)
    assert repo.meta["identity"]["format"] == "repo"
    assert repo.paths() == sorted(repo.paths()) and "decoder.py" in repo.paths()
    assert _texts(repo)[repo.paths().index("decoder.py")] == (STDLIB / "json" / "decoder.py").read_text()


def test_max_doc_tokens_is_a_view(tmp_path, cache, smol_tokenizer):
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps({"text": "word " * 300, "path": "x/long.txt"}) + "\n" + json.dumps({"text": "short"}) + "\n")
    whole = load_corpus(CorpusConfig(path=str(f), path_field="path"), smol_tokenizer, cache_root=cache)
    split = load_corpus(CorpusConfig(path=str(f), path_field="path", max_doc_tokens=64), smol_tokenizer,
                        cache_root=cache)
    assert split.dir == whole.dir  # same token cache
    assert split.lengths.max() <= 64 and split.lengths.sum() == whole.lengths.sum()
    assert np.array_equal(np.concatenate([split.doc(i) for i in range(len(split))]), whole.tokens)
    assert split.paths()[:-1] == ["x/long.txt"] * (len(split) - 1)


def test_config_errors(tmp_path, cache, smol_tokenizer):
    with pytest.raises(ConfigError, match="corpus.path"):
        load_corpus(CorpusConfig(path=str(tmp_path / "missing.jsonl")), smol_tokenizer, cache_root=cache)
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps({"content": "x"}) + "\n")
    with pytest.raises(ConfigError, match="text_field"):
        load_corpus(CorpusConfig(path=str(f)), smol_tokenizer, cache_root=cache)


def test_repo_field_prefixes_paths_and_bad_json_is_one_line(tmp_path, cache, smol_tokenizer):
    f = tmp_path / "code.jsonl"
    rows = [{"content": "int a;", "repo": "acme/x", "path": "src/a.c"}, {"content": "int b;", "repo": "acme/y", "path": "b.c"}]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    c = load_corpus(CorpusConfig(path=str(f), text_field="content", path_field="path", repo_field="repo"),
                    smol_tokenizer, cache_root=cache)
    assert c.paths() == ["acme/x/src/a.c", "acme/y/b.c"] and [c.domain_names[d] for d in c.domains] == ["acme", "acme"]
    f.write_text(f.read_text() + "{not json\n")
    with pytest.raises(ConfigError, match="code.jsonl:3 is not valid JSON"):
        load_corpus(CorpusConfig(path=str(f), text_field="content"), smol_tokenizer, cache_root=cache)


def test_documents_keep_their_ids_and_exclude_ids_leaves_them_out(tmp_path, cache, smol_tokenizer):
    recs = [{"text": f"document number {i} " * (3 + i), "key": f"k{i}"} for i in range(5)]
    f = tmp_path / "c.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    plain = load_corpus(CorpusConfig(path=str(f)), smol_tokenizer, cache_root=cache)
    assert plain.doc_ids() == [f"c.jsonl:{i + 1}" for i in range(5)]  # file:line by default
    keyed = load_corpus(CorpusConfig(path=str(f), id_field="key", max_doc_tokens=16), smol_tokenizer, cache_root=cache)
    assert len(keyed) > 5 and sorted(set(keyed.doc_ids())) == [f"k{i}" for i in range(5)]  # pieces share their id
    held = tmp_path / "held.txt"
    held.write_text("k1\nk3\n")
    train = load_corpus(CorpusConfig(path=str(f), id_field="key", exclude_ids=str(held)), smol_tokenizer, cache_root=cache)
    assert train.doc_ids() == ["k0", "k2", "k4"] and _texts(train) == [recs[i]["text"] for i in (0, 2, 4)]
    held.write_text("k0\n")  # another split is another corpus (another cache)
    other = load_corpus(CorpusConfig(path=str(f), id_field="key", exclude_ids=str(held)), smol_tokenizer, cache_root=cache)
    assert other.dir != train.dir and other.doc_ids() == ["k1", "k2", "k3", "k4"]
    repo = load_corpus(CorpusConfig(path=str(STDLIB / "json")), smol_tokenizer, cache_root=cache)
    assert repo.doc_ids() == repo.paths()  # directory corpora: the relative path
    with pytest.raises(ConfigError, match="id_field"):
        load_corpus(CorpusConfig(path=str(f), id_field="nope"), smol_tokenizer, cache_root=cache)


def test_one_reader_resolves_identifies_and_reads(tmp_path, data_dir):
    """open_corpus resolves once (a relative path in the data dir first, the format sniffed: a SQuAD file is squad),
    and the one object gives the identity, the files and the documents with their ids and domains."""
    from ctxbench.trainers.data.corpus import open_corpus

    squad = open_corpus({"path": "squad/dev-v2.0.json"}, data_dir=data_dir)
    assert squad.format == "squad" and squad.root == (data_dir / "squad" / "dev-v2.0.json").resolve()
    assert squad.files() == [squad.root] and squad.identity["format"] == "squad"
    first = next(squad.documents())
    assert first.doc_id == first.path == "Normans" and "\n\n" in first.text
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.txt").write_text("one")
    (tmp_path / "y.txt").write_text("two")
    docs = list(open_corpus(CorpusConfig(path=str(tmp_path))).documents())
    assert [(d.doc_id, d.domain, d.text) for d in docs] == [("y.txt", "txt", "two"), ("a/x.txt", "a", "one")]
    with pytest.raises(ConfigError, match=r"^documents.path: nope.json does not exist \(looked in the data dir"):
        open_corpus({"path": "nope.json"}, data_dir=data_dir, field="documents")


def test_hqa_reads_its_documents_through_the_corpus_reader(tmp_path):
    """hqa's document source is a corpus config: records keep hqa's ids (position and text hash), a study corpus its
    own ids with its held-out ids left out; max_documents counts in file order."""
    from ctxbench.trainers.hqa.data import DocumentSource

    f = tmp_path / "books.jsonl"
    f.write_text("".join(json.dumps({"text": f"book {i}", "key": f"k{i}"}) + "\n" for i in range(4)))
    src = DocumentSource(path="books.jsonl", format="jsonl", max_documents=3)
    docs = src.documents(src.open(tmp_path))
    assert [d.doc_id[:10] for d in docs] == ["doc000000-", "doc000001-", "doc000002-"] and docs[2].text == "book 2"
    assert src.identity(src.open(tmp_path))[0][0] == "books.jsonl"  # by content: (name, sha256)
    (tmp_path / "held.txt").write_text("k1\n")
    study = DocumentSource(path=str(f), format="corpus",
                           corpus={"path": str(f), "id_field": "key", "exclude_ids": str(tmp_path / "held.txt")})
    assert [d.doc_id for d in study.documents(study.open(None))] == ["k0", "k2", "k3"]
    assert "excluded" in study.identity(study.open(None))[0]
