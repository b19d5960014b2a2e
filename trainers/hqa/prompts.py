"""The generator prompts of App. B of the paper, verbatim, and how they are filled in.

The text of each prompt is copied from App. B (PDF extraction); only the separator rules around
``${context}`` (rendered in the PDF as runs of '-' or '_' of varying length) are normalized to one
line of 21 dashes. Two choices are ours, because the paper names no prompt for them:

- GENERAL (Algorithm 1's GenerateGeneralQAPair, used for the global summary and medium sections)
  is App. B's "complex question" diverse prompt, filled with the section's summary.
- The multi-hop prompt is written for three chunks; for 2 or 4 chunks (§3.1: "spanning 2–4 chunks")
  the word "three" is replaced by "two"/"four".
"""

from __future__ import annotations

import hashlib
from string import Template

RULE = "-" * 21

SUMMARY = """Summarize the following text concisely in no more than {word_limit} words:
{chunk}"""

_HEAD = """Context information is below.
""" + RULE + """
${context}
""" + RULE + """
Given the context information and not prior knowledge.
Generate content based on the below query.
"""

_JSON = """You must return the result in JSON: {'question': <question>, 'answer': <answer>}"""

TEMPORAL = _HEAD + """You are a Teacher/Professor. Your task is to set up 1 diverse temporal question about the context for an upcoming quiz/examination. The question should cover different time periods and events described in the context. Restrict the question to the context information provided. """ + _JSON

CHARACTER = _HEAD + """You are a Teacher/Professor. Your task is to create 1 character-based question from the context for an upcoming quiz/examination. The question should explore different aspects of the characters, such as their motivations, actions, and relationships. Restrict the question to the context information provided. """ + _JSON

COMPLEX = _HEAD + """Formulate 1 complex question that requires analysis of multiple aspects from the context for an upcoming quiz/examination. The question should encourage critical thinking and synthesis of different pieces of information within the context. Restrict the question to the context information provided. """ + _JSON

THEMES = _HEAD + """You are a Teacher/Professor. Ask 1 question about the main themes or messages of the text for an upcoming quiz/examination. The question should cover different aspects of the themes and how they are developed in the context. Restrict the question to the context information provided. """ + _JSON

COMPARE = _HEAD + """You are a Teacher/Professor. Create 1 question that compare different elements within the context for an upcoming quiz/examination. The question should highlight similarities and differences between various elements such as characters, events, and themes. Restrict the question to the context information provided. """ + _JSON

CAUSE_EFFECT = _HEAD + """You are a Teacher/Professor. Develop 1 question that explore the cause and effect relationships within the context for an upcoming quiz/examination. The question should focus on understanding the reasons behind events and their outcomes. Restrict the question to the context information provided. """ + _JSON

HYPOTHETICAL = _HEAD + """You are a Teacher/Professor. Create 1 hypothetical question based on the context for an upcoming quiz/examination. The question should explore what-if scenarios and possible alternate outcomes. Restrict the question to the context information provided. """ + _JSON

INTERPRETATION = _HEAD + """You are a Teacher/Professor. Formulate 1 question that require interpretation of the context for an upcoming quiz/examination. The question should encourage students to provide their own insights and interpretations based on the information given. Restrict the question to the context information provided. """ + _JSON

DETAIL = _HEAD + """You are a Teacher/Professor. Ask 1 detail-oriented question about the context for an upcoming quiz/examination. These question should focus on specific details, facts, and figures mentioned in the context. Restrict the question to the context information provided. """ + _JSON

PERSPECTIVES = _HEAD + """You are a Teacher/Professor. Create 1 question that explore different perspectives or viewpoints within the context for an upcoming quiz/examination. The question should examine how different characters or groups might view events or themes differently. Restrict the questions to the context information provided. """ + _JSON

SPECIFIC = """Context information is below.
""" + RULE + """
${context}
""" + RULE + """
Given the context information and not prior knowledge, generate content based on the below query. You are a Teacher/Professor. Create 1 specific question about the details, events, characters, and settings from the context provided. This question should have an exact, unambiguous answer that can be directly found in the given information. The question should be similar in style to the following examples:
"Where does Character A meet Character B for the first time?"
"What is Character C's religion?"
"Where does Character D live for the majority of the story?"
"Which of the following is NOT one of Character E's responsibilities?"
"Which among [list of names] is not [Character F]'s child?"
"Who among [list of names] is the final to perish?"
"What's the name of [Family name]'s summer home?"
"Who accompanied [Character G] [specific activity] at last?"
Ensure that the question and answer are strictly based on the context information provided. The question may include multiple-choice options when appropriate. """ + _JSON

MULTIHOP = """Context information is below.
${chunks}
You are a Professor designing a final exam for an advanced interdisciplinary course. Create 1 complex question requiring deep analysis and synthesis of information from all three chunks. Do not mention that there are three chunks/your questions. Do not mention excerpts either. For example, instead of a question that says "Analyze the theme of justice and its various forms as portrayed in the three provided literary excerpts. How do the characters' actions and the outcomes of their situations reflect or challenge traditional notions of justice? Consider the legal, personal, and societal implications of justice in each excerpt and discuss the role of power dynamics in shaping justice." You should say: "Analyze the theme of justice and its various forms as portrayed. How do the characters' actions and the outcomes of their situations reflect or challenge traditional notions of justice? Consider the legal, personal, and societal implications of justice and discuss the role of power dynamics in shaping justice."
Question Guidelines:
1. The question must integrate and require reasoning across all three chunks.
2. The question should be multi-layered, promoting analysis, synthesis, and evaluation.
Answer Guidelines:
1. Provide a comprehensive answer addressing all question aspects.
2. Reference and interconnect information from each chunk.
Return 1 question-answer pair in JSON format:
{ "question": <question>, "answer": <answer> }"""

GENERAL = COMPLEX

# The QA prompts a diverse question draws from uniformly (§3.1: "a small chunk and one question are randomly
# selected"); multi-hop is drawn separately with probability multihop_p (App. E).
DIVERSE: dict[str, str] = {
    "temporal": TEMPORAL, "character": CHARACTER, "complex": COMPLEX, "themes": THEMES, "compare": COMPARE,
    "cause_effect": CAUSE_EFFECT, "hypothetical": HYPOTHETICAL, "interpretation": INTERPRETATION, "detail": DETAIL,
    "perspectives": PERSPECTIVES, "specific": SPECIFIC,
}

SUMMARY_REQUEST = " Please give me a summary of the book"  # the user turn after each document (§3.2, App. C)
_COUNT_WORDS = {2: "two", 3: "three", 4: "four"}
_AVOID = "\nAsk about something other than these questions, already asked about this context:\n"
RETRY_NUDGE = {"json": "\n\n(Attempt {attempt}: reply with the JSON object only.)",
               "text": "\n\n(Attempt {attempt}: reply with the summary only.)"}


def summary(chunk: str, word_limit: int) -> str:
    return SUMMARY.replace("{word_limit}", str(word_limit)).replace("{chunk}", chunk)


def qa(template: str, context: str, avoid: list[str] = ()) -> str:
    """A single-context QA prompt; `avoid` lists questions already asked about this context (Algorithm 1's
    'deeper' step revisits a chunk, and a greedy generator would otherwise repeat itself)."""
    text = Template(template).safe_substitute(context=context)
    return text + (_AVOID + "\n".join(f"- {q}" for q in avoid) if avoid else "")


def multihop(chunks: list[str]) -> str:
    if len(chunks) not in _COUNT_WORDS:
        raise ValueError(f"multi-hop prompts take 2 to 4 chunks, got {len(chunks)}")
    body = "\n".join(f"{RULE}\n{c}\n{RULE}" for c in chunks)
    text = MULTIHOP.replace("three", _COUNT_WORDS[len(chunks)])
    return Template(text).safe_substitute(chunks=body)


def retry(prompt: str, attempt: int, reply: str = "json") -> str:
    """The prompt of retry `attempt` (>= 1): decoding is greedy, so an unchanged prompt would fail the same way."""
    return prompt + RETRY_NUDGE[reply].format(attempt=attempt + 1) if attempt else prompt


def prompts_hash() -> str:
    """Identifies the prompt set in manifests: a changed prompt is different data."""
    blob = "\0".join([SUMMARY, GENERAL, MULTIHOP, _AVOID, *RETRY_NUDGE.values(), SUMMARY_REQUEST, *[f"{k}={v}" for k, v in DIVERSE.items()]])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
