"""AA-LCR's official items: the questions of AA-LCR_Dataset.csv and the documents of each question's set, read from a
local copy (the extracted `lcr/` folder or the release zip) or from the hub dataset at a pinned revision.

The prompt is the official one (the dataset card's template, as NeMo-Skills' prepare.py builds it and checks against
the card's cl100k `input_tokens`): the set's documents in the question's `data_source_filenames` order, each framed
as "BEGIN DOCUMENT i:" ... "END DOCUMENT i", inside "BEGIN INPUT DOCUMENTS" ... "END INPUT DOCUMENTS", then the
question between "START QUESTION" and "END QUESTION".

Document names in the CSV and in the zip do not always agree (the zip's UTF-8 names are not flagged as such, so
Python reads them as cp437: "ΓÇÖ" for a right quote; NeMo-Skills' find_actual_file maps the common ones back). Names are matched here after the same
normalisation, on both sides. A document that cannot be found is refused in one line (NeMo-Skills skips it
silently, and then its token check stops the whole preparation).
"""

from __future__ import annotations

import csv
import io
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from ctxbench.harness.core.errors import ConfigError

CSV_NAME = "AA-LCR_Dataset.csv"
ZIP_NAME = "extracted_text/AA-LCR_extracted-text.zip"
COLUMNS = ("question_id", "document_category", "document_set_id", "question", "answer", "data_source_filenames")
PROMPT = """BEGIN INPUT DOCUMENTS

{documents_text}

END INPUT DOCUMENTS

Answer the following question using the input documents provided above.

START QUESTION

{question}

END QUESTION
"""
# The mis-decoded punctuation of the release's file names (NeMo-Skills' find_actual_file), read back as the clean
# characters; a curly quote in the CSV is matched to a straight one as well.
ARTIFACTS = (("ΓÇÖ", "'"), ("ΓÇö", "—"), ("ΓÇô", "–"), ("s╠º", "ş"), ("\u2019", "'"), ("\u2018", "'"))


def documents_prompt(documents: list[str], question: str) -> str:
    """The official prompt of one question over its documents (in the CSV's order)."""
    text = "\n\n".join(f"BEGIN DOCUMENT {i + 1}:\n{doc}\nEND DOCUMENT {i + 1}" for i, doc in enumerate(documents))
    return PROMPT.format(documents_text=text, question=question)


def name_key(path: str) -> str:
    """A document's path as compared: a UTF-8 name that zipfile read as cp437 (the release zip does not flag its
    names as UTF-8) decoded again, the remaining artifacts read back as the clean characters, NFC, '/' separators."""
    try:
        path = path.encode("cp437").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        pass
    text = unicodedata.normalize("NFC", path.replace("\\", "/"))
    for artifact, clean in ARTIFACTS:
        text = text.replace(artifact, clean)
    return text


@dataclass(frozen=True)
class Question:
    """One official row: the question, its gold answer and where its documents are."""

    question_id: str
    category: str
    set_id: str
    question: str
    answer: str
    filenames: tuple[str, ...]
    input_tokens: int | None  # the card's prompt size under cl100k_base

    @property
    def set_key(self) -> str:
        return f"{self.category}/{self.set_id}"


@dataclass
class Documents:
    """The document texts of a local folder (…/lcr/<category>/<set>/<file>) or of the release zip, by name_key of
    <category>/<set>/<file>; read when first asked for."""

    root: Path
    index: dict[str, str] = field(default_factory=dict)  # name_key -> path in the folder or member of the zip
    texts: dict[str, str] = field(default_factory=dict)

    @classmethod
    def open(cls, root: Path) -> Documents:
        if root.is_dir():
            names = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
        else:
            try:
                with zipfile.ZipFile(root) as z:
                    names = [n for n in z.namelist() if not n.endswith("/")]
            except (OSError, zipfile.BadZipFile) as e:
                raise ConfigError(f"data_path: {root} is not a readable zip of the AA-LCR documents ({e}); give "
                                  f"the official {ZIP_NAME}") from None
        index = {}
        for name in names:
            parts = name.split("/")
            if len(parts) >= 3:
                index[name_key("/".join(parts[-3:]))] = name
        return cls(root, index)

    def text(self, category: str, set_id: str, filename: str) -> str:
        key = name_key(f"{category}/{set_id}/{filename}")
        if key not in self.texts:
            if key not in self.index:
                raise ConfigError(f"data_path: the AA-LCR documents at {self.root} have no {category}/{set_id}/{filename}; "
                                  "give the official documents (lcr/ or the release zip)")
            self.texts[key] = self._read(self.index[key])
        return self.texts[key]

    def _read(self, name: str) -> str:
        if self.root.is_dir():
            return (self.root / name).read_text(encoding="utf-8")
        with zipfile.ZipFile(self.root) as z:  # newlines as text mode reads the extracted file (NeMo-Skills)
            return z.read(name).decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def read_questions(path: Path) -> list[Question]:
    """The rows of the official CSV, in its order; a missing column is one line naming it."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as e:
        raise ConfigError(f"data_path: cannot read {path} ({e.strerror or e})") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise ConfigError(f"data_path: {path} is not AA-LCR's {CSV_NAME}: it lacks the columns {', '.join(missing)}; "
                          "give the official file")
    out = []
    for row in reader:
        tokens = (row.get("input_tokens") or "").strip()
        out.append(Question(question_id=row["question_id"].strip(), category=row["document_category"],
                            set_id=row["document_set_id"], question=row["question"], answer=row["answer"],
                            filenames=tuple(f for f in row["data_source_filenames"].split(";")),
                            input_tokens=int(tokens) if tokens.isdigit() else None))
    return out


@dataclass
class AalcrItems:
    """The questions and their documents; a question's prompt and its character count, built once."""

    questions: list[Question]
    documents: Documents
    _prompts: dict[int, str] = field(default_factory=dict)

    def prompt(self, i: int) -> str:
        if i not in self._prompts:
            q = self.questions[i]
            docs = [self.documents.text(q.category, q.set_id, f) for f in q.filenames]
            self._prompts[i] = documents_prompt(docs, q.question)
        return self._prompts[i]

    def chars(self) -> list[int]:
        return [len(self.prompt(i)) for i in range(len(self.questions))]


def local_layout(root: Path) -> tuple[Path, Path] | None:
    """(CSV, documents) of a local copy laid out as the hub repo (the zip under extracted_text/) or with the zip
    extracted (lcr/); None when root holds no CSV."""
    table = root / CSV_NAME
    if not table.is_file():
        return None
    for docs in (root / "lcr", root / ZIP_NAME, root / Path(ZIP_NAME).name):
        if docs.exists():
            return table, docs
    raise ConfigError(f"data_path: {root} has {CSV_NAME} but no documents; put the extracted lcr/ folder or "
                      f"{ZIP_NAME} beside it")
