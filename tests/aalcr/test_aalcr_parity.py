"""AA-LCR parity with the official code as it runs. Artificial Analysis publishes the prompt and the equality-check
prompt on the dataset card (ArtificialAnalysis/AA-LCR), not code; the code that runs them is NeMo-Skills at commit
0b012df8a09cd4730d31b16e90a0d8f13d145fb8: nemo_skills/dataset/aalcr/prepare.py (prompt_template, construct_prompt,
find_actual_file; its prompts are checked there against the card's cl100k input_tokens), prompt/config/judge/aalcr.yaml
(the equality-check prompt) and evaluation/metrics/aalcr_metrics.py (AALCRMetrics.is_aalcr_correct, _get_score_dict).

Every expected value below is a literal printed by those functions themselves, extracted from the files in /tmp (ast,
without NeMo-Skills' imports) and run with python; none is computed here.
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from ctxbench.harness.core.errors import ConfigError
from ctxbench.tasks.aalcr.items import AalcrItems, Documents, documents_prompt, read_questions
from ctxbench.tasks.aalcr.verdicts import answered, is_correct, judge_prompt

FIXTURE = Path(__file__).parent / "data" / "aalcr"

# construct_prompt(["First doc.\nLine two.", "Second {doc} with braces"], "Which is larger, X or Y?")
OFFICIAL_PROMPT = ("BEGIN INPUT DOCUMENTS\n\nBEGIN DOCUMENT 1:\nFirst doc.\nLine two.\nEND DOCUMENT 1\n\nBEGIN DOCUMENT 2:\n"
                   "Second {doc} with braces\nEND DOCUMENT 2\n\nEND INPUT DOCUMENTS\n\nAnswer the following question using "
                   "the input documents provided above.\n\nSTART QUESTION\n\nWhich is larger, X or Y?\n\nEND QUESTION\n")
# judge/aalcr.yaml's user template .format(original_question="Q?", expected_answer="42", generation="forty-two")
OFFICIAL_JUDGE = ("Assess whether the following CANDIDATE ANSWER is CORRECT or INCORRECT. For the CANDIDATE ANSWER to be "
                  "correct, it must be consistent with the OFFICIAL ANSWER.\n\nThe question, for reference only: Q?\nThe "
                  "OFFICIAL ANSWER: 42\nCANDIDATE ANSWER TO ASSESS: forty-two\n\nReply only with CORRECT or INCORRECT.")
# construct_prompt over the fixture's documents as find_actual_file finds them: (question_id, characters, sha256)
FIXTURE_PROMPTS = [
    ("1", 2168, "abbf7fe16c7c924e5e1c4a1823e5fb0019e1f1e1e58643bfb57d29e62d59ac78"),
    ("2", 2151, "dfdf28a0f8c7f683cbfbc323d02e18421340f13c4fff1933164c3dc0e8568959"),
    ("3", 10875, "2680334343b8720270fa7bed86b45beded81ddfee0f44dfc779aced0dc03c317"),
    ("4", 10865, "e15d4cded2f9442bdab4d065f941bf21ed921893baf707e7a8e8448d0bae73d4"),
    ("5", 24912, "f65ed8c733cf77e14a47d7086c8cf56507e4749d53a55096e6f2481b19fea275"),
    ("6", 24907, "0aa8c009fc2a2e3a1e102e7c0dc8758737e54bd82d415eefc474757bc1fe7922"),
]
# AALCRMetrics.is_aalcr_correct(verdict)
VERDICTS = [
    ("CORRECT", True), ("INCORRECT", False), (" correct\n", True), ("Correct.", True), ("Correct", True),
    ("\nCORRECT", True),
    ("CORRECTNESS: INCORRECT", True),  # starts with CORRECT: counted correct as it runs
    ("correctly stated", True),
    ("**CORRECT**", False), ("The answer is CORRECT", False), ("INCORRECT - the answer is CORRECT", False), ("", False),
    (None, False),
]
# _get_score_dict({"generation": g, "judgement": "CORRECT"})["judge_correct"]: an empty answer is never correct
GENERATIONS = [("", False), ("  \n", False), ("x", True), (" 42 ", True)]


def test_prompt_is_the_official_text():
    assert documents_prompt(["First doc.\nLine two.", "Second {doc} with braces"], "Which is larger, X or Y?") == OFFICIAL_PROMPT


def test_fixture_prompts_are_the_official_prompts_in_the_csv_order_of_documents():
    items = AalcrItems(read_questions(FIXTURE / "AA-LCR_Dataset.csv"), Documents.open(FIXTURE / "lcr"))
    got = [(q.question_id, len(items.prompt(i)), hashlib.sha256(items.prompt(i).encode()).hexdigest())
           for i, q in enumerate(items.questions)]
    assert got == FIXTURE_PROMPTS


def test_judge_prompt_is_the_official_text():
    assert judge_prompt("Q?", "42", "forty-two") == OFFICIAL_JUDGE


@pytest.mark.parametrize("verdict,correct", VERDICTS)
def test_verdict_read_as_it_runs(verdict, correct):
    assert is_correct(verdict) is correct


@pytest.mark.parametrize("generation,valid", GENERATIONS)
def test_empty_answer_is_incorrect(generation, valid):
    assert answered(generation) is valid


def test_exact_reading_is_the_cards_intent():
    assert [is_correct(v, "exact") for v in ("CORRECT", " correct.\n", "CORRECTNESS: INCORRECT", "correctly stated",
                                              "INCORRECT")] == [True, True, False, False, False]


def test_document_names_match_through_the_release_artifacts(tmp_path):
    """find_actual_file maps "Annual Report\u2019s.txt" and "Annual Report's.txt" to the file "Annual ReportΓÇÖs.txt",
    and "Rate — note.txt" to "Rate ΓÇö note.txt"; a missing file it returns unchanged (and the read then fails)."""
    folder = tmp_path / "lcr" / "Legal" / "7"
    folder.mkdir(parents=True)
    (folder / "Annual ReportΓÇÖs.txt").write_text("quote", encoding="utf-8")
    (folder / "Rate ΓÇö note.txt").write_text("dash\r\nline", encoding="utf-8")
    docs = Documents.open(tmp_path / "lcr")
    assert docs.text("Legal", "7", "Annual Report\u2019s.txt") == docs.text("Legal", "7", "Annual Report's.txt") == "quote"
    assert docs.text("Legal", "7", "Rate — note.txt") == "dash\nline"  # text mode's newlines, as the official read
    with pytest.raises(ConfigError, match="data_path: .* have no Legal/7/Missing.txt"):
        docs.text("Legal", "7", "Missing.txt")
    with zipfile.ZipFile(tmp_path / "docs.zip", "w") as z:
        z.write(folder / "Rate ΓÇö note.txt", "lcr/Legal/7/Rate ΓÇö note.txt")
        z.writestr("lcr/Legal/7/Caf├⌐.txt", "menu")  # "Café.txt" as zipfile reads an unflagged UTF-8 name (cp437)
    zipped = Documents.open(tmp_path / "docs.zip")
    assert zipped.text("Legal", "7", "Rate — note.txt") == "dash\nline" and zipped.text("Legal", "7", "Café.txt") == "menu"
