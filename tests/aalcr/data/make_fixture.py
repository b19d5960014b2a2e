"""Writes the hand-made AA-LCR fixture (aalcr/): three document sets in the official layout (AA-LCR_Dataset.csv and
lcr/<category>/<set>/<file>), sized so that under SmolLM2's tokenizer and chat template, with the 1,024-token answer
budget, set 1's questions land in the 2048 bin, set 2's in 4096 and set 3's in 8192. Invented content; no official
text. Run from the repo root: python3 tests/aalcr/data/make_fixture.py"""

from __future__ import annotations

import csv
from pathlib import Path

ROOT = Path(__file__).parent / "aalcr"
SETS = {  # (category, set id): {file: (facts, filler lines)}
    ("Company_Documents", "1"): {"Tapir Corp Annual Report 2023.txt": ("Tapir Corp revenue in 2023 was 120 million dollars.", 6),
                                 "Tapir Corp Annual Report 2024.txt": ("Tapir Corp revenue in 2024 was 150 million dollars.", 6)},
    ("Legal", "2"): {"Case A judgment.txt": ("In Case A the court awarded damages of 40,000 pounds to the river board.", 40),
                     "Case B judgment.txt": ("In Case B the court awarded damages of 65,000 pounds to the canal trust.", 40)},
    ("Academia", "3"): {"Paper one.txt": ("Study one measured 310 tapirs in the northern forest.", 65),
                        "Paper two.txt": ("Study two measured 275 tapirs in the southern forest.", 65),
                        "Paper three.txt": ("Study three found that tapir counts fell by 12 percent between surveys.", 65)},
}
QUESTIONS = [  # (set, question, answer, files in the order the prompt shows them)
    (("Company_Documents", "1"), "By how much did Tapir Corp's revenue grow from 2023 to 2024, in percent?", "25%",
     ["Tapir Corp Annual Report 2023.txt", "Tapir Corp Annual Report 2024.txt"]),
    (("Company_Documents", "1"), "What was Tapir Corp's total revenue over 2023 and 2024?", "270 million dollars",
     ["Tapir Corp Annual Report 2024.txt", "Tapir Corp Annual Report 2023.txt"]),
    (("Legal", "2"), "Which case awarded the larger damages, and by how much?", "Case B, by 25,000 pounds",
     ["Case A judgment.txt", "Case B judgment.txt"]),
    (("Legal", "2"), "What were the combined damages of both cases?", "105,000 pounds", ["Case A judgment.txt", "Case B judgment.txt"]),
    (("Academia", "3"), "How many tapirs did the two studies measure in total?", "585",
     ["Paper one.txt", "Paper two.txt", "Paper three.txt"]),
    (("Academia", "3"), "Which forest had more tapirs, given the studies?", "The northern forest",
     ["Paper one.txt", "Paper two.txt", "Paper three.txt"]),
]


def document(title: str, fact: str, lines: int) -> str:
    filler = [f"Section {i + 1}. The committee reviewed item {i * 7 % 31} of the {title} appendix and noted no change "
              f"to the figures reported on page {i + 2}." for i in range(lines)]
    middle = len(filler) // 2
    return "\n".join([f"# {title}", *filler[:middle], fact, *filler[middle:]]) + "\n"


def main() -> None:
    for (category, set_id), files in SETS.items():
        folder = ROOT / "lcr" / category / set_id
        folder.mkdir(parents=True, exist_ok=True)
        for name, (fact, lines) in files.items():
            (folder / name).write_text(document(name.removesuffix(".txt"), fact, lines), encoding="utf-8")
    with (ROOT / "AA-LCR_Dataset.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["document_category", "document_set_id", "question_id", "question", "answer", "data_source_filenames",
                    "data_source_urls", "input_tokens"])
        for i, ((category, set_id), question, answer, names) in enumerate(QUESTIONS, 1):
            w.writerow([category, set_id, i, question, answer, ";".join(names), ";".join(f"https://example.org/{n}" for n in names), ""])


if __name__ == "__main__":
    main()
