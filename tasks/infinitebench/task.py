"""InfiniteBench (`infinitebench/<task>`, OpenBMB/InfiniteBench): the 12 tasks over 100K+ token contexts.

Prompts are the official templates the repository uses for every open model it evaluates
(`yarn_mistral_templates` in src/prompt.py: YaRN-Mistral, Yi-6B/34B-200K, ChatGLM3), with the same
fields (math_find's "What is the ... in the following list?" prefix, code_run's function call);
they are rendered with the suite's template (the official open-model runs feed raw text: use
template: plain for parity). Generation lengths and scoring (get_score_one) are the official
ones. The official code cuts the middle of the whole prompt to 128K tokens; we cut only the
context, to the sample's length with the generation reserved (tasks/realdata.py).

Data: a local jsonl in the official format (fields id, context, input, answer, options), else the
task's jsonl from the hub dataset xinrongzhang2022/InfiniteBench - the file the official download
script fetches, read with plain json so math_find's int/float labels keep their types.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Sample
from ctxbench.tasks.infinitebench.metrics import get_score_one
from ctxbench.tasks.realdata import RealArgs, RealDataTask, fit_context, hub_file, read_records, split_template

HUB = "xinrongzhang2022/InfiniteBench"

TEMPLATES = {
    "passkey": "There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. I will quiz you about the important information.\n\n{context}\n\n{input}\n\nThe pass key is",
    "number_string": "There is an important info hidden inside a lot of irrelevant text. Find it. I will quiz you about the important information there.\n\n{context}\n\n{input}\n\nThe sequence of digits is",
    "kv_retrieval": "Extract the value corresponding to the specified key in the JSON object below.\n\n{context}\n\n{input}",
    "longbook_sum_eng": "Summarize the book below.\n\n{context}\n\nSummary:",
    "longbook_choice_eng": "Read the book and answer the question.\n\n{context}\n\nQuestion: {question}\nA. {OPTION_A}\nB. {OPTION_B}\nC. {OPTION_C}\nD. {OPTION_D}\n\nThe letter of the correct answer is",
    "longbook_qa_eng": "Read the book and answer the question. Be very concise in your answer.\n\n{context}\n\nQuestion: {question}\nAnswer:",
    "longbook_qa_chn": "阅读以下书籍然后回答问题。\n\n{context}\n\n问题：{question}\n答案：",
    "math_find": "{prefix}\n\n{context}\n\n{input}",
    "math_calc": "Let us calculate the intermediate values of an expression.\n\nExpression: 1 + 3 + 4\nValues: [1, 4, 8]\n\nExpression: 8 - 3 + 2 - 4\nValues: [8, 5, 7, 3]\n\nExpression: {context}\nValues:",
    "code_run": "There is a function called {func} in the following Python code.\n\n{context}\n\nPlease compute the exact value of {func_call}. The value of {func_call} is",
    "code_debug": "Following is a Python code where exactly one of the functions/methods has a deliberate error that makes it crash.\n\n{context}\n\nOptions:\nA. {OPTION_A}\nB. {OPTION_B}\nC. {OPTION_C}\nD. {OPTION_D}\n\nThe correct option is:",
    "longdialogue_qa_eng": "Below is a dialogue script where one random occurrence of a character name is replaced with \"$$MASK$$\", and you should try to guess who that character is.\n\n{context}\n\nThe name that has been replaced with $$MASK$$ is likely",
}

# task -> (max new tokens, category as in the paper's grouping)
SPEC: dict[str, tuple[int, str]] = {
    "passkey": (6, "retrieval"), "number_string": (12, "retrieval"), "kv_retrieval": (50, "retrieval"),
    "longbook_sum_eng": (1200, "novel"), "longbook_choice_eng": (40, "novel"), "longbook_qa_eng": (40, "novel"),
    "longbook_qa_chn": (40, "novel"), "longdialogue_qa_eng": (40, "dialogue"),
    "math_find": (3, "math"), "math_calc": (30000, "math"), "code_run": (5, "code"), "code_debug": (5, "code"),
}
OPTIONS = "ABCD"


def prompt_fields(task: str, rec: dict[str, Any]) -> dict[str, str]:
    """The template's fields besides {context}, as the official create_prompt fills them."""
    if task == "code_run":
        call = re.findall(r"func_[0-9]+\(\-?[0-9]+\)", rec["input"])[0]
        return {"func": call.split("(")[0], "func_call": call}
    if task in ("code_debug", "longbook_choice_eng"):
        opts = {f"OPTION_{c}": rec["options"][i] for i, c in enumerate(OPTIONS)}
        return opts if task == "code_debug" else {"question": rec["input"], **opts}
    if task in ("longbook_qa_eng", "longbook_qa_chn"):
        return {"question": rec["input"]}
    if task == "math_find":
        found = re.findall(r"The .+ of", rec["input"])
        if not found:
            raise ConfigError(f"infinitebench/math_find: cannot find the target ('The ... of') in the input {rec['input'][:80]!r}")
        return {"prefix": f"What is {found[0].lower()[:-3]} in the following list?", "input": rec["input"]}
    if task in ("longdialogue_qa_eng", "longbook_sum_eng", "math_calc"):
        return {}
    return {"input": rec["input"]}


def get_answer(task: str, rec: dict[str, Any]) -> list[Any]:
    """The official label: [option text, letter] for the choice tasks, else the answer (as a list)."""
    answer = rec["answer"]
    if task in ("code_debug", "longbook_choice_eng"):
        if isinstance(answer, list) and len(answer) == 2 and answer[1] in OPTIONS:
            return list(answer)
        text = answer[0] if isinstance(answer, list) and len(answer) == 1 else answer
        if not isinstance(text, str) or text not in rec["options"]:
            raise ConfigError(f"infinitebench/{task}: example {rec.get('id')} has an answer that is not one of its options")
        return [text, OPTIONS[rec["options"].index(text)]]
    return list(answer) if isinstance(answer, list) else [answer]


class InfiniteBench(RealDataTask):
    summary = "InfiniteBench {name}: the official examples, fitted to the length by middle truncation"
    data_source = "xinrongzhang2022/InfiniteBench (hub), or data_file"
    shared_context = "document"
    Args = RealArgs

    def __init__(self, task: str, args: RealArgs):
        self.task = task
        super().__init__(f"infinitebench/{task}", args)
        self.official_max_new_tokens, self.category = SPEC[task]
        self.metric = f"infinitebench/{task}"

    def local_candidates(self) -> list[str]:
        return [f"infinitebench/{self.task}.jsonl"]

    def load(self, data_dir: Path | None) -> list[dict[str, Any]]:
        hint = f"pass data_file: path/to/{self.task}.jsonl or put it under data_dir/infinitebench/"
        path = self.local_path(data_dir)
        return read_records(path or hub_file(HUB, f"{self.task}.jsonl", what=self.name, hint=hint))

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        rec = self.record(index, ctx)
        head, tail = split_template(TEMPLATES[self.task], **prompt_fields(self.task, rec))
        fit = fit_context(ctx, lambda c: ctx.renderer.render(head + c + tail), rec["context"], length=length,
                          max_new_tokens=self.max_new_tokens, what=f"{self.name} example {index}")
        label = get_answer(self.task, rec)
        flat = label[0] if self.task == "math_calc" and label and isinstance(label[0], list) else label
        meta = {"id": rec.get("id", index), "truncated_tokens": fit.truncated_tokens, "context_tokens": fit.context_tokens,
                "cluster": self.document_cluster(rec["context"])}
        return self.make_sample(length=length, index=index, text=fit.rendered, tokens=fit.tokens, answers=[str(x) for x in flat], meta=meta)

    def score(self, prediction: str, sample: Sample) -> float:
        return get_score_one(prediction, list(sample.answers), self.task)


def _register(task: str) -> None:
    def factory(**args):
        return InfiniteBench(task, RealArgs(**args))

    register("task", f"infinitebench/{task}", args=RealArgs)(factory)


for _t in SPEC:
    _register(_t)
