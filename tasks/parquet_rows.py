"""Official fixed items kept light: their small columns in memory, each prompt read from its parquet row group only
when asked for (MRCR's 8needle and GraphWalks' long files hold gigabytes of text). A .jsonl copy keeps its prompts in
the rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ParquetRows:
    rows: list[dict[str, Any]]
    where: list[tuple[Path, int, int]]  # per row: (file, row group, offset in it); a .jsonl row keeps its prompt
    chars_key: str  # the column holding each prompt's length in characters (the length bins' prefilter)
    _group: tuple[Path, int] | None = None
    _prompts: list[str] = field(default_factory=list)

    def chars(self) -> list[int]:
        return [int(r[self.chars_key]) for r in self.rows]

    def prompt(self, i: int) -> str:
        path, group, offset = self.where[i]
        if path.suffix != ".parquet":
            return self.rows[i]["prompt"]
        if self._group != (path, group):
            import pyarrow.parquet as pq

            self._prompts = pq.ParquetFile(path).read_row_group(group, columns=["prompt"]).column("prompt").to_pylist()
            self._group = (path, group)
        return self._prompts[offset]
