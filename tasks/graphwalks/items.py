"""GraphWalks' official items: the two files of the hub dataset openai/graphwalks (MIT) at a pinned revision, or a
local copy of them, read once per run.

`graphwalks_128k_and_shorter` holds the 750 items up to 128K tokens (under OpenAI's tokenizer), and
`graphwalks_256k_to_1mil` the 400 from 256K to 1M; each row has `prompt` (the whole user message: instructions,
examples, the edge list and the operation), `answer_nodes` (the gold node ids; `answer` in older copies),
`prompt_chars`, `problem_type` (bfs or parents) and `date_added`. Only the small columns are read up front; a prompt is
read (one parquet row group at a time) when its item is measured or scored. The long file (about 300 MB) is read only
when a bin past 128K is asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxbench.harness.core.errors import ConfigError
from ctxbench.tasks.parquet_rows import ParquetRows
from ctxbench.tasks.realdata import read_records

HUB = "openai/graphwalks"
REVISION = "be6cc6ecf9b4d495b07d1ff53d2a16598e90fed7"  # the dataset's commit this task reads by default
SHORT = "graphwalks_128k_and_shorter"
LONG = "graphwalks_256k_to_1mil"
SHORT_TOP = 131072  # bins up to here draw from the short file only (the official "up to 128K" split)
SMALL = ("answer_nodes", "answer", "prompt_chars", "problem_type", "date_added")


GraphwalksItems = ParquetRows  # one problem type's official rows, in official order


def _bad(path: Path, what: str) -> ConfigError:
    return ConfigError(f"data_path: {path} is not in GraphWalks' format ({what}); give the official files of {HUB}")


def _gold(row: dict[str, Any], path: Path) -> list[str]:
    gold = row.get("answer_nodes", row.get("answer"))
    if not isinstance(gold, list | tuple) or not all(isinstance(n, str) for n in gold):
        raise _bad(path, "answer_nodes must be a list of node ids")
    return list(gold)


def _parquet_rows(path: Path) -> tuple[list[dict[str, Any]], list[tuple[Path, int, int]]]:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    names = set(pf.schema_arrow.names)
    if "prompt" not in names or "problem_type" not in names or not names & {"answer_nodes", "answer"}:
        raise _bad(path, "it needs the columns prompt, answer_nodes and problem_type")
    rows, where = [], []
    for group in range(pf.num_row_groups):
        part = pf.read_row_group(group, columns=[c for c in SMALL if c in names]).to_pylist()
        rows += part
        where += [(path, group, k) for k in range(len(part))]
    return rows, where


def _jsonl_rows(path: Path) -> tuple[list[dict[str, Any]], list[tuple[Path, int, int]]]:
    rows = read_records(path)
    for r in rows:
        if not isinstance(r.get("prompt"), str) or "problem_type" not in r:
            raise _bad(path, "each record needs prompt, answer_nodes and problem_type")
    return rows, [(path, 0, k) for k in range(len(rows))]


def read_items(files: list[Path], problem_type: str) -> GraphwalksItems:
    """The rows of `problem_type` in the files, in order (files as given, then parquet row groups or .jsonl lines)."""
    rows: list[dict[str, Any]] = []
    where: list[tuple[Path, int, int]] = []
    for path in files:
        part, part_where = _parquet_rows(path) if path.suffix == ".parquet" else _jsonl_rows(path)
        for row, spot in zip(part, part_where, strict=True):
            if str(row["problem_type"]).lower() != problem_type:
                continue
            row["answer_nodes"] = _gold(row, path)
            if row.get("prompt_chars") is None:  # the official files carry it; a hand-made copy may not
                row["prompt_chars"] = len(row["prompt"]) if "prompt" in row else 0
            rows.append(row)
            where.append(spot)
    return GraphwalksItems(rows, where, "prompt_chars")


def local_file(root: Path, stem: str) -> Path | None:
    """root/<stem>.parquet, else root/<stem>.jsonl, else None."""
    for suffix in (".parquet", ".jsonl"):
        if (root / f"{stem}{suffix}").is_file():
            return root / f"{stem}{suffix}"
    return None
