"""RULER v2's prompt texts and how a drawn layout becomes the task text (NeMo-Skills chsieh/ruler2 @ 991a7432:
prepare_niah.py, prepare_mmlu.py, prepare_qa.py), with prompt_type "instruct" as its prepare.py passes it.

The whole text is one user message (NeMo-Skills' generic/default prompt: `user: "{question}"`, no system prompt and
no answer prefix). These functions are pure, so the parity tests can render the official layout of one item and
compare the text with what the official generator printed for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# ---- multi-key / multi-value NIAH, basic level (prepare_niah.py: a haystack of needle-shaped lines)
NIAH_SINGLE = ("A special magic {type_v} is hidden within the following text. Make sure to memorize it. I will quiz you "
               "about the {type_v} afterwards.\n{context}\nWhat is the special magic {type_v} for {query} mentioned in the "
               "provided text? The special magic {type_v} for {query} mentioned in the provided text is")
NIAH_MULTIPLE = ("Some special magic {type_v} are hidden within the following text. Make sure to memorize them. I will quiz "
                 "you about the {type_v} afterwards.\n{context}\nWhat are all the special magic {type_v} for {query} mentioned "
                 "in the provided text? The special magic {type_v} for {query} mentioned in the provided text are")
NIAH_LINE = "One of the special magic {type_v} for {key} is: {value}."


def niah_text(lines: Sequence[str], query: str, *, single: bool, type_v: str = "numbers") -> str:
    """The task text: the lines joined by newlines inside the single- or multiple-answer template."""
    template = NIAH_SINGLE if single else NIAH_MULTIPLE
    return template.format(type_v=type_v[:-1] if single else type_v, context="\n".join(lines), query=query)


# ---- questions as haystack: MMLU (prepare_mmlu.py)
MMLU_CONTEXT = {
    "retrieve": "Below are some questions. I will ask you to copy one of them. Please copy and paste the question you find.",
    "niah": "Below are some questions. I will ask you to copy some of them. Please copy and paste the questions you find.",
    # the official template writes \\boxed\\{{\\}} in a str.format string: the model reads \boxed\{\}
    "solve": "Below are some questions. I will ask you to solve one of them. Please solve the question you find and make "
             "sure to put the answer (and only answer) inside \\boxed\\{\\}.",
}
MMLU_PROBLEM = {
    ("retrieve", "single"): "Please copy the {order}Question {i} from the context.",
    ("retrieve", "2steps"): "Please first copy all the Question {i} from the context and then copy the {order}Question {i} at the end.",
    ("niah", "single"): "Please find and copy all the Question {i} from the context.",
    ("solve", "single"): "Please solve the Question {i} from the context with an answer from A, B, C, D.",
    ("solve", "2steps"): "Please copy the Question {i} from the context and then solve it with an answer from A, B, C, D.",
}
QUESTION = "Question {i}: {question}"
EXAMPLES = "Here are some examples to help you understand the task:\n\n{examples}\n\nHere is the actual task you need to solve:\n\n"


@dataclass(frozen=True)
class Listed:
    """One question of the context: its random index, text, ordinal label ('' or '2nd (1 indexed) ') and solution."""

    index: str
    text: str
    order: str = ""
    solution: str = ""


def mmlu_example(task_type: str, algo_type: str, q: Listed) -> str:
    problem = MMLU_PROBLEM[(task_type, algo_type)].format(i=q.index, order=q.order)
    if task_type == "retrieve":
        return problem + "\n" + QUESTION.format(i=q.index, question=q.text)
    if algo_type == "single":
        return problem + "\nSolution:" + q.solution
    return problem + "\n" + QUESTION.format(i=q.index, question=q.text) + "\nSolution:" + q.solution


INTENDED_BOX = ("\\boxed\\{\\}", "\\boxed{}")  # what the official solve instruction prints, and what its escapes meant


def mmlu_parts(task_type: str, algo_type: str, target: Listed, examples: Sequence[Listed] = (), *,
               intended_box: bool = False) -> tuple[str, str]:
    """(text before the listed questions, text after them); intended_box writes \\boxed{} for \\boxed\\{\\}."""
    head = MMLU_CONTEXT[task_type] + "\n\n"
    if intended_box:
        head = head.replace(*INTENDED_BOX)
    shots = EXAMPLES.format(examples="\n\n".join(mmlu_example(task_type, algo_type, q) for q in examples)) if examples else ""
    return head, "\n\n" + shots + MMLU_PROBLEM[(task_type, algo_type)].format(i=target.index, order=target.order)


def mmlu_text(task_type: str, algo_type: str, listed: Sequence[Listed], target: Listed, examples: Sequence[Listed] = (), *,
              intended_box: bool = False) -> str:
    head, tail = mmlu_parts(task_type, algo_type, target, examples, intended_box=intended_box)
    return head + "\n\n".join(QUESTION.format(i=q.index, question=q.text) for q in listed) + tail


def ordinal(n: int) -> str:
    """inflect's ordinal of an integer: 1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st ..."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# ---- documents as haystack: HotpotQA (prepare_qa.py)
DOCUMENT = "Document {i}:\n{text}"
QA_CONTEXT = {
    "doc": "Below are some documents. I will give you a text at the end. Please find the document index of the text. "
           "Only give me the index without any document contents.",
    "question": "Below are some documents. I will give you a question at the end. Please find the index of the most relevant "
                "document that can help answer the question. Only give me the index without any document contents.",
    "solve": "Below are some documents. I will ask you to answer a question based on the documents. Please answer the question.",
}
QA_PROBLEM = {
    "doc": "Text: {text}\nMost relevant document index:",
    "question": "Question: {question}\nIndex of the most relevant document that can help answer the question:",
    "single": "Please answer the following question based on the documents.\n\nQuestion: {question}",
    "2steps": "Please first find and copy paste the documents relevant to the following question and then answer it based "
              "on the documents you find.\n\nQuestion: {question}",
}


def qa_parts(kind: str, *, question: str, gold_text: str) -> tuple[str, str]:
    """(text before the documents, after them); kind: doc, question (retrieval) or single, 2steps (answering)."""
    context = QA_CONTEXT[kind if kind in ("doc", "question") else "solve"]
    return context + "\n\n", "\n\n" + QA_PROBLEM[kind].format(text=gold_text, question=question)


def qa_text(kind: str, documents: Sequence[tuple[str, str]], *, question: str, gold_text: str) -> str:
    """The task text of (index, text) documents in prompt order."""
    head, tail = qa_parts(kind, question=question, gold_text=gold_text)
    return head + "\n\n".join(DOCUMENT.format(i=i, text=t) for i, t in documents) + tail
