"""Writes the hand-made LongBench Pro fixture (longbenchpro/longbench_pro.json): for each of the 25 secondary tasks,
two records at the official level 8k and one at 16k, in the official record format (the hub file's fields), with
short invented documents (no official text). English and Chinese alternate; the two 8k records of a task share one
document (a cluster), the 16k record has its own (led by whitespace, which the official prompt strips). Run from the repo root: python3 tests/longbenchpro/data/make_fixture.py
"""

from __future__ import annotations

import json
from pathlib import Path

from ctxbench.tasks.longbenchpro.catalog import TASKS

OUT = Path(__file__).parent / "longbenchpro" / "longbench_pro.json"
ANSWERS = {  # per metric: (the English answer list, the Chinese one)
    "NDCG": (["[3]", "[1]", "[2]"], ["[2]", "[3]", "[1]"]),
    "Pairwise_Accuracy": (["[2]", "[1]", "[3]"], ["[1]", "[3]", "[2]"]),
    "Accuracy": (["B"], ["C"]),
    "F1_Score": (["[1]", "[3]"], ["[2]"]),
    "SubEM": (["12", "7"], ["第二组"]),
    "Summary": (["The tapir census found 310 animals in the northern forest and 275 in the southern forest."],
                ["普查发现北部森林有310只貘，南部森林有275只貘。"]),
}


def document(english: bool, task: int, n: int) -> str:
    if english:
        return "\n".join(f"[{i + 1}] Paragraph {i + 1} of report {task}-{n}: the tapir census team counted animals "
                         f"in plot {i * 7 % 13} and filed note {i + n}." for i in range(6))
    return "\n".join(f"[{i + 1}] 第{task}-{n}号报告第{i + 1}段：貘普查小组在第{i * 7 % 13}号样地计数并提交了第{i + n}号记录。"
                     for i in range(6))


def question(english: bool, official: str, thinking: bool, k: int) -> str:
    if english:
        head = f"Task ({official}), question {k + 1}: answer from the document above."
        tail = ("Think step by step, then give the final answer after [Answer], one item per line." if thinking
                else "Give only the final answer after [Answer], one item per line, without explanation.")
    else:
        head = f"任务（{official}）第{k + 1}题：根据上文作答。"
        tail = "请逐步思考，然后在[答案]之后给出最终答案，每行一项。" if thinking else "只在[答案]之后给出最终答案，每行一项，不要解释。"
    return f"{head}\n{tail}\n"  # a trailing newline: the official prompt is stripped


def records() -> list[dict]:
    out = []
    for t, spec in enumerate(TASKS):
        for k, level in enumerate(("8k", "8k", "16k")):
            english = (t % 2 == 0) == (level == "8k")
            out.append({
                "id": f"fixture-{t + 1:02d}-{k}", "context": ("" if level == "8k" else "\n ") + document(english, t + 1, 0 if level == "8k" else 1),
                "language": "English" if english else "Chinese", "token_length": level,
                "primary_task": spec.code.split(".")[0] + ". (fixture)", "secondary_task": spec.official,
                "contextual_requirement": "Full" if k else "Partial", "difficulty": "Easy",
                "question_nonthinking": question(english, spec.official, False, k),
                "question_thinking": question(english, spec.official, True, k),
                "answer": ANSWERS[spec.metric][0 if english else 1],
            })
    return out


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(records(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")
