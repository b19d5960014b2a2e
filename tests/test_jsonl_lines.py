"""JSON Lines input is split on "\\n" only (jsonlines.org): U+2028, U+2029, U+0085 and the other characters that
str.splitlines() treats as line ends are data inside a JSON string, as HELMET's loader (datasets' json reader)
reads them. Every reader of .jsonl input data is covered: tasks/realdata.read_records (HELMET, InfiniteBench,
LongBench, BABILong, ICL splits, perplexity records), harness/core/io.read_jsonl and the corpus reader."""

from __future__ import annotations

import json

import pytest

from ctxbench.harness.core.io import read_jsonl
from ctxbench.tasks.realdata import read_records

# characters str.splitlines() breaks on that JSON allows raw inside a string (the C0 ones must be escaped)
SEPARATORS = ["\u2028", "\u2029", "\u0085"]


def _write(path, rows, *, crlf=False):
    end = "\r\n" if crlf else "\n"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + end for r in rows), encoding="utf-8", newline="")
    return path


@pytest.mark.parametrize("sep", SEPARATORS)
def test_read_records_keeps_unicode_line_separators_inside_strings(tmp_path, sep):
    rows = [{"id": "a", "text": f"first{sep}second"}, {"id": "b", "text": "plain"}]
    path = _write(tmp_path / "data.jsonl", rows)
    assert sep in path.read_text(encoding="utf-8")  # raw, not escaped
    assert read_records(path) == rows


def test_read_records_takes_crlf_and_blank_lines(tmp_path):
    rows = [{"q": "x\u2028y"}, {"q": "z"}]
    path = _write(tmp_path / "crlf.jsonl", rows, crlf=True)
    with open(path, "a", encoding="utf-8", newline="") as f:
        f.write("\r\n\n")
    assert read_records(path) == rows


def test_read_records_names_the_json_line_of_a_bad_record(tmp_path):
    from ctxbench.harness.core.errors import ConfigError

    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"t": "a\u2028b"}, ensure_ascii=False) + "\n{oops\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad.jsonl:2 is not a JSON object"):  # line 2 of the file, not 3
        read_records(path)


def test_store_and_corpus_readers_split_on_newline_only(tmp_path):
    rows = [{"text": f"a{sep}b"} for sep in SEPARATORS]
    path = _write(tmp_path / "rows.jsonl", rows)
    assert list(read_jsonl(path)) == rows
    from ctxbench.trainers.data.corpus import open_corpus

    texts = [d.text for d in open_corpus({"path": str(path)}).documents()]
    assert texts == [r["text"] for r in rows]
