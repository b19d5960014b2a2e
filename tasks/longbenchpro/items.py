"""LongBench Pro's official items (the hub dataset's longbench_pro.json, a JSON list of 1,500 records) and the
official prompt.

The prompt is the official one (modules/inference.py's prepare_prompt, then the model manager's strip): the
document, four newlines, the question, stripped at both ends, sent as one user message. The question is the
record's `question_nonthinking` or, as the official --thinking_enabled picks it, `question_thinking`.

A document shared by several records (questions on one text, in any task) gives them one cluster id, built from
the document's text: the same id in every task and for every model scored on it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ctxbench.harness.core.errors import ConfigError
from ctxbench.tasks.longbenchpro.catalog import LEVELS

FILE = "longbench_pro.json"
FIELDS = ("id", "context", "language", "token_length", "secondary_task", "question_nonthinking", "question_thinking",
          "answer")
Question = Literal["nonthinking", "thinking"]


def official_prompt(context: str, question: str) -> str:
    """prepare_prompt's text as the model manager sends it (stripped)."""
    return f"{context}\n\n\n\n{question}".strip()


@dataclass(frozen=True)
class Item:
    """One official record, as the task reads it."""

    id: str
    context: str
    language: str  # English or Chinese
    level: str  # the official token_length: 8k ... 256k
    secondary_task: str
    questions: dict[str, str]  # nonthinking / thinking
    answer: tuple[str, ...]
    extra: dict[str, Any]  # primary_task, contextual_requirement, difficulty: recorded, not used

    def prompt(self, question: Question) -> str:
        return official_prompt(self.context, self.questions[question])

    @property
    def cluster(self) -> str:
        return f"longbenchpro:{hashlib.sha1(self.context.encode('utf-8')).hexdigest()[:16]}"


def parse_item(record: Any, where: str) -> Item:
    """One record, checked: a missing field, an answer that is not a list of strings or an unknown level is one line."""
    if not isinstance(record, dict):
        raise ConfigError(f"data_path: {where} is not a JSON object; give the official {FILE}")
    missing = [f for f in FIELDS if f not in record]
    if missing:
        raise ConfigError(f"data_path: {where} lacks {', '.join(missing)}; give the official {FILE}")
    answer = record["answer"]
    if not isinstance(answer, list) or not all(isinstance(a, str) for a in answer):
        raise ConfigError(f"data_path: {where}'s answer is not a list of strings; give the official {FILE}")
    if record["token_length"] not in LEVELS:
        raise ConfigError(f"data_path: {where}'s token_length {record['token_length']!r} is not one of "
                          f"{', '.join(LEVELS)}; give the official {FILE}")
    return Item(id=str(record["id"]), context=str(record["context"]), language=str(record["language"]),
                level=record["token_length"], secondary_task=str(record["secondary_task"]),
                questions={"nonthinking": str(record["question_nonthinking"]),
                           "thinking": str(record["question_thinking"])},
                answer=tuple(answer),
                extra={k: record.get(k) for k in ("primary_task", "contextual_requirement", "difficulty")})


def read_items(path: Path) -> list[Item]:
    """Every record of the file (a .json list or .jsonl), in its order."""
    from ctxbench.tasks.realdata import read_records

    try:
        records = read_records(path)
    except ConfigError as e:
        raise ConfigError(str(e).replace("data_file:", "data_path:", 1)) from None
    return [parse_item(r, f"{path.name} record {i}") for i, r in enumerate(records)]


def local_file(data_path: str | None, data_dir: Path | None) -> Path | None:
    """The local copy: data_path (the file, or a folder holding it), else data_dir/longbenchpro/; None if neither."""
    if data_path:
        root = Path(data_path).expanduser()
        if root.is_dir():
            root = root / FILE
        if not root.is_file():
            raise ConfigError(f"data_path: {data_path} is not {FILE} nor a folder holding it; give the official file")
        return root
    if data_dir is not None and (data_dir / "longbenchpro").is_dir():
        found = data_dir / "longbenchpro" / FILE
        if not found.is_file():
            raise ConfigError(f"data_path: {data_dir / 'longbenchpro'} has no {FILE}; put the official file there")
        return found
    return None
