"""HELMET parity: ctxbench's HELMET tasks score and prompt as HELMET's own code runs them.

Every expected value below was obtained by RUNNING the official code, princeton-nlp/HELMET at commit
4526dfbdc512bd9ff721da336bff4e3e75ecfd27 (2025-04-09): its eval.py `main()` with the repository's configs
(configs/rag.yaml, rerank.yaml, icl.yaml, plus `--thinking`, `--use_chat_template True` or `--stop_newline True`
for the other modes), on the fixture rows below written as files, with a scripted model in place of `load_LLM` that
returns each case's output (for `--stop_newline True`, its first line, as the stop does); ICL's hub splits were the
fixture rows (datasets.load_dataset patched). NDCG came from pytrec_eval (cvangysel/pytrec_eval 0d8571e with
trec_eval de6a29f, built from source). The official prompts are `data["prompt_template"].format(**item)`, what
model_utils.tokenize feeds the model without a chat template. The numbers were pasted here as literals.

What the official code does that these pin down:
- configs say `stop_new_line: true`, but arguments.py reads `--stop_newline` (default False), so nothing is cut at a
  newline (checked: parse_arguments() on each config gives stop_newline=False);
- eval.py puts the prompt's answer cue (data.py's system_template: "Answer:", "Ranking:", "label:") before the
  output when no chat template is used;
- with --thinking it keeps what follows the last `</think>` (re.search(r"(.*</think>)(.*)", DOTALL)), after the cue
  was put first, and leaves an output without `</think>` as it is.
"""

from __future__ import annotations

import json

import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.types import Sample

COMMIT = "4526dfbdc512bd9ff721da336bff4e3e75ecfd27"

# --- fixtures: the same rows feed HELMET's official code (the scratch run) and ctxbench ----------------------------
# mode: "plain" (HELMET's configs as they run), "thinking" (--thinking), "chat" (--use_chat_template True),
# "stop" (--stop_newline True: the configs' stated intent, ctxbench's `stop_newline: true`)
RAG_CASES = [  # (answers, model output, mode, HELMET's substring_exact_match)
    (["Paris"], "\nParis", "plain", 1.0),  # the case: no newline cut
    (["Paris"], " I am not sure\nParis", "plain", 1.0),
    (["Answer"], " Lisbon", "plain", 1.0),  # "answer" is in every output: the cue is put first
    (["Lisbon"], " Answer: Lisboa\nLisbon", "plain", 1.0),
    (["Jay-Z"], " jay z", "plain", 0.0),
    (["The"], " anything", "plain", 1.0),
    (["U.S."], " It was the US.", "plain", 1.0),
    (["an apple"], "Apple pie", "plain", 1.0),
    (["Rome"], " Paris", "plain", 0.0),
    (["Paris"], "<think>Rome?</think> Paris", "thinking", 1.0),
    (["Rome"], "<think>x</think>Rome</think> Paris", "thinking", 0.0),  # the text after the LAST </think>
    (["Paris"], "<think>It must be Paris", "thinking", 1.0),  # an unclosed block is scored as text
    (["Answer"], "<think>a</think> Rome", "thinking", 0.0),  # the cue goes with the reasoning
    (["Answer"], "<think>still thinking", "thinking", 1.0),  # ... but stays before an unclosed block
    (["Paris"], "<think>a</think>\nParis\nmore", "thinking", 1.0),  # no newline cut in thinking mode
    (["Answer"], " Lisbon", "chat", 0.0),  # a chat template: no cue
    (["Paris"], "\nParis", "chat", 1.0),
    (["Paris"], "\nParis", "stop", 0.0),  # the stated intent: the first line only
    (["Answer"], "\nParis", "stop", 1.0),
    (["Paris"], " Paris\nRome", "stop", 1.0),
]
ICL_CASES = [  # (output, {answer}/{wrong}: the item's label and another one; mode, HELMET's exact_match)
    (" I think label: {answer}", "plain", 0.0),  # the case: "label:" is put first, so this parses whole
    (" {answer}", "plain", 1.0),
    (" label: {answer}", "plain", 1.0),  # a repeated cue is dropped
    (" {answer}\nlabel: {wrong}", "plain", 1.0),
    ("{answer}.", "plain", 1.0),
    (" {answer} {wrong}", "plain", 0.0),
    ("\n{answer}", "plain", 0.0),  # "label:" then an empty line
    (" {wrong} label: {answer}", "plain", 0.0),
    ("<think>label: {wrong}</think> label: {answer}", "thinking", 1.0),
    ("<think>{answer}", "thinking", 0.0),
    ("<think>a</think>b</think>{answer}", "thinking", 1.0),
    (" I think label: {answer}", "chat", 1.0),  # no cue with a chat template: the first "label:" in the output
    ("\n{answer}", "stop", 0.0),
    (" {answer}\nlabel: {wrong}", "stop", 1.0),
]
RERANK_QRELS = {"1": 3, "2": 1, "3": 1, "4": 2}  # passages 0-11; the rest are labelled 0
RERANK_CASES = [  # (output, mode, HELMET's NDCG@10)
    ("Here is the ranking:\n[1] > [4] > [3]", "plain", 0.91706),  # the case
    (" [1] > [4] > [3] > [2]", "plain", 1.0),
    (" 2 > 1\n1 > 4 > 3 > 2", "plain", 1.0),  # the longest chain, across lines
    (" [ID: 4] > [ID: 1]", "plain", 0.74969),
    (" 3 > 3 > 1 > 4", "plain", 0.74969),  # a repeated id keeps its first place
    (" 0 > 5 > 6 > 7 > 8 > 9 > 10 > 11 > 0 > 1 > 4", "plain", 0.28526),
    (" I cannot rank these", "plain", 0.0),
    ("<think>1 > 4</think> 2 > 3 > 1", "thinking", 0.60297),
    ("<think>4 > 1 > 3 > 2", "thinking", 0.92892),
    ("Here is the ranking:\n[1] > [4] > [3]", "chat", 0.91706),
    ("Here is the ranking:\n[1] > [4] > [3]", "stop", 0.0),
    (" 2 > 1\n1 > 4 > 3 > 2", "stop", 0.55711),
]


def rag_rows() -> tuple[list[dict], list[dict]]:
    """(test rows, demonstration rows) in HELMET's kilt format, one test row per RAG case."""
    test = [{"id": f"q{i}", "question": f"Who is number {i}?", "answers": case[0],
             "ctxs": [{"title": f"Page {i}", "text": f"Number {i} is {case[0][0]}."}, {"title": "Noise", "text": "Nothing."}]}
            for i, case in enumerate(RAG_CASES)]
    demos = [{"id": f"t{j}", "question": f"Where is city {j}?", "answers": [f"Land {j}", "x"],
              "ctxs": [{"title": f"City {j}", "text": f"City {j} lies in Land {j}."}]} for j in range(3)]
    return test, demos


def icl_rows() -> tuple[list[dict], list[dict]]:
    """(train, test) in the HF columns of CogComp/trec (text, coarse_label), one test row per ICL case."""
    train = [{"text": f"Train question {j} ?", "coarse_label": j % 6} for j in range(18)]
    test = [{"text": f"Test question {i} ?", "coarse_label": i % 6} for i in range(len(ICL_CASES))]
    return train, test


def rerank_rows() -> tuple[list[dict], list[dict]]:
    """(test rows, demonstration rows) in HELMET's msmarco format, one test row per re-rank case."""
    test = [{"qid": f"r{i}", "query": f"query {i}",
             "ctxs": [{"id": str(j), "text": f"passage {j}", "label": RERANK_QRELS.get(str(j), 0)} for j in range(12)]}
            for i in range(len(RERANK_CASES))]
    demos = [{"qid": f"d{j}", "query": f"demo query {j}",
              "ctxs": [{"id": str(j), "text": f"demo passage {j}", "label": 1}, {"id": "7", "text": "other", "label": 0}]}
             for j in range(3)]
    return test, demos


# --- the official prompts of item 0 (model_utils.tokenize without a chat template) ---------------------------------
OFFICIAL_RAG_PROMPT = (
    "Use the given documents to write a concise and short answer to the question. Write your answer in the following format:\n"
    "Answer: [answer]\n"
    "\n"
    "Document (Title: City 1): City 1 lies in Land 1.\n"
    "\n"
    "Question: Where is city 1?\n"
    "Answer: Land 1\n"
    "\n"
    "Document (Title: City 2): City 2 lies in Land 2.\n"
    "\n"
    "Question: Where is city 2?\n"
    "Answer: Land 2\n"
    "\n"
    "Document (Title: Page 0): Number 0 is Paris.\n"
    "\n"
    "Document (Title: Noise): Nothing.\n"
    "\n"
    "Question: Who is number 0?\n"
    "Answer:"
)
OFFICIAL_RERANK_PROMPT = (
    "You are provided with a list of documents, each indicated by their ID. Rank each document based on their relevance to the question in descending order from most relelvant to least relevant texts. Include all documents in the rankings. Write your answer using the unique IDs, with the following format:\n"
    "Ranking: ID3 > ID1 > ID2\n"
    "\n"
    "[ID: 0] Document: demo passage 0\n"
    "\n"
    "[ID: 7] Document: other\n"
    "\n"
    "Query: demo query 0\n"
    "Ranking: 0 > 7\n"
    "\n"
    "[ID: 2] Document: demo passage 2\n"
    "\n"
    "[ID: 7] Document: other\n"
    "\n"
    "Query: demo query 2\n"
    "Ranking: 2 > 7\n"
    "\n"
    "[ID: 0] Document: passage 0\n"
    "\n"
    "[ID: 1] Document: passage 1\n"
    "\n"
    "[ID: 2] Document: passage 2\n"
    "\n"
    "[ID: 3] Document: passage 3\n"
    "\n"
    "[ID: 4] Document: passage 4\n"
    "\n"
    "[ID: 5] Document: passage 5\n"
    "\n"
    "[ID: 6] Document: passage 6\n"
    "\n"
    "[ID: 7] Document: passage 7\n"
    "\n"
    "[ID: 8] Document: passage 8\n"
    "\n"
    "[ID: 9] Document: passage 9\n"
    "\n"
    "[ID: 10] Document: passage 10\n"
    "\n"
    "[ID: 11] Document: passage 11\n"
    "\n"
    "Query: query 0\n"
    "Ranking:"
)
OFFICIAL_ICL_PROMPT = (
    "Use the provided mapping from the text to label to assign a label to the text. Only output \"label: {label}\" and nothing else. \n"
    "\n"
    "Train question 17 ?\n"
    "label: 3\n"
    "\n"
    "Train question 7 ?\n"
    "label: 0\n"
    "\n"
    "Train question 6 ?\n"
    "label: 1\n"
    "\n"
    "Train question 8 ?\n"
    "label: 4\n"
    "\n"
    "Train question 15 ?\n"
    "label: 2\n"
    "\n"
    "Train question 4 ?\n"
    "label: 5\n"
    "\n"
    "Test question 0 ?\n"
    "label:"
)


# --- scoring ---------------------------------------------------------------------------------------------------------
def _sample(task, answers, mode: str, **meta) -> Sample:
    """A sample as the task makes it: its template ("chat" or the plain one) and, in thinking mode, the flag."""
    meta = {"template": "chat" if mode == "chat" else "plain", **({"thinking": True} if mode == "thinking" else {}), **meta}
    return Sample(task=task.name, length=8192, index=0, prompt="", answers=tuple(answers), prompt_tokens=0,
                  max_new_tokens=task.max_new_tokens, metric=task.metric, meta=meta)


def _score(task, output: str, sample: Sample, mode: str) -> float:
    """As the runner scores: in thinking mode the task's split first (never unfinished for HELMET), then score()."""
    if mode == "thinking":
        split = task.split_thinking(output, sample, api_reasoning=None, opened=False)
        assert split.finished
        output = split.answer
    return task.score(output, sample)


def _task(name: str, mode: str, **args):
    return registry.get("task", name)(**args, **({"stop_newline": True} if mode == "stop" else {}))


@pytest.mark.parametrize("answers,output,mode,official", RAG_CASES)
def test_rag_scores_as_helmet_runs(answers, output, mode, official):
    task = _task("helmet/rag_nq", mode)
    assert _score(task, output, _sample(task, answers, mode), mode) == official


@pytest.mark.parametrize("output,mode,official", ICL_CASES)
def test_icl_scores_as_helmet_runs(output, mode, official):
    task = _task("icl/trec_coarse", mode)
    text = output.format(answer="3", wrong="4")
    assert _score(task, text, _sample(task, ["3"], mode), mode) == official


@pytest.mark.parametrize("output,mode,official", RERANK_CASES)
def test_rerank_scores_as_helmet_runs(output, mode, official):
    task = _task("helmet/rerank_msmarco", mode)
    qrels = {str(j): RERANK_QRELS.get(str(j), 0) for j in range(12)}
    assert _score(task, output, _sample(task, ["1 > 4 > 2 > 3"], mode, qrels=qrels), mode) == official


def test_the_newline_option_is_part_of_the_task_identity():
    default, intent = registry.get("task", "helmet/rag_nq")(), registry.get("task", "helmet/rag_nq")(stop_newline=True)
    assert default.args_json()["stop_newline"] is False and intent.args_json()["stop_newline"] is True
    assert registry.get("task", "icl/banking77")(stop_newline=True).args_json()["stop_newline"] is True
    from ctxbench.harness.core.config import Suite
    from ctxbench.harness.run.planning import RunPlan

    def run_id(args):
        suite = Suite(name="h", lengths=[8192], samples=2, tasks=[{"task": "helmet/rag_nq", "args": args}])
        return RunPlan(suite=suite, model="m", backend="echo", backend_args={}, out_dir=".").run_id()

    assert run_id({"stop_newline": True}) != run_id({})


def test_the_runner_scores_thinking_rows_with_helmets_split(smol_tokenizer):
    """harness/run/batch.py asks the task how to split: HELMET's unclosed block is scored, not thinking_unfinished."""
    from ctxbench.harness.core.types import Generation, Prediction
    from ctxbench.harness.run.batch import sample_row as _row

    task = registry.get("task", "helmet/rag_nq")()
    sample = _sample(task, ["Paris"], "thinking")
    on = Generation(thinking="on")
    unclosed = _row(task, sample, Prediction(sample.id, "<think>It must be Paris", 10, 5, 0.1), on)
    assert unclosed.score == 1.0 and unclosed.error is None and unclosed.prediction == "Answer:<think>It must be Paris"
    last = _row(task, sample, Prediction(sample.id, "<think>Paris?</think>no</think> Rome", 10, 5, 0.1), on,
                smol_tokenizer)
    assert last.score == 0.0 and last.prediction == "Rome" and last.extra["reasoning"] == "<think>Paris?</think>no</think>"
    other = registry.get("task", "niah/single")()  # any other task keeps ctxbench's split: unfinished, never scored
    plain = Sample(task="niah/single", length=512, index=0, prompt="", answers=("1",), prompt_tokens=0, max_new_tokens=8)
    assert _row(other, plain, Prediction(plain.id, "<think>1", 10, 5, 0.1), on).extra["failure"] == "thinking_unfinished"


def test_thinking_split_of_api_reasoning_and_channels():
    """An API's separate reasoning: the content is HELMET's output (an empty one is scored, not unfinished);
    gpt-oss channels, which HELMET does not parse, are split as everywhere else in ctxbench."""
    from ctxbench.tasks.helmet.metrics import thinking_split

    api = thinking_split("", cue="Answer:", api_reasoning="I thought")
    assert (api.answer, api.reasoning, api.finished, api.form) == ("Answer:", "I thought", True, "api")
    channels = thinking_split("<|channel|>analysis<|message|>hmm<|end|><|channel|>final<|message|>Paris", cue="Answer:")
    assert (channels.answer, channels.form) == ("Paris", "channel")


# --- prompts ---------------------------------------------------------------------------------------------------------
@pytest.fixture()
def ctx(smol_tokenizer, tmp_path, monkeypatch):
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.prompting import PromptRenderer

    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    monkeypatch.setenv("CTXBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("ctxbench.tasks.realdata.hub_reachable", lambda: False)
    return GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=tmp_path)


def _jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_rag_prompt_is_helmets(ctx, tmp_path):
    test, demos = rag_rows()
    _jsonl(tmp_path / "helmet/data/kilt/nq-dev-multikilt_1000_k50_dep6.jsonl", test)
    _jsonl(tmp_path / "helmet/data/kilt/nq-train-multikilt_1000_k3_dep6.jsonl", demos)
    sample = registry.get("task", "helmet/rag_nq")().generate(length=8192, index=0, seed=0, ctx=ctx)
    assert sample.meta["id"] == "q0" and sample.prompt == OFFICIAL_RAG_PROMPT


def test_rerank_prompt_is_helmets(ctx, tmp_path):
    test, demos = rerank_rows()
    _jsonl(tmp_path / "helmet/data/msmarco/test_reranking_data_k50_dep3.jsonl", test)
    _jsonl(tmp_path / "helmet/data/msmarco/test_reranking_data_k10_dep3.jsonl", demos)
    sample = registry.get("task", "helmet/rerank_msmarco")().generate(length=8192, index=0, seed=0, ctx=ctx)
    assert sample.meta["qid"] == "r0" and sample.prompt == OFFICIAL_RERANK_PROMPT


def test_icl_prompt_is_helmets(ctx, tmp_path):
    train, test = icl_rows()
    task = registry.get("task", "icl/trec_coarse")(train_file=str(_jsonl(tmp_path / "train.jsonl", train)),
                                                   test_file=str(_jsonl(tmp_path / "test.jsonl", test)), shots=6)
    assert task.generate(length=8192, index=0, seed=0, ctx=ctx).prompt == OFFICIAL_ICL_PROMPT


def test_thinking_mode_is_recorded_on_the_sample(ctx, tmp_path, smol_tokenizer):
    """Scoring needs to know the mode (the cue is then handled by the split); the sample cache is keyed by it."""
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.prompting import PromptRenderer

    train, test = icl_rows()
    args = dict(train_file=str(_jsonl(tmp_path / "train.jsonl", train)), test_file=str(_jsonl(tmp_path / "test.jsonl", test)),
                shots=6)
    task = registry.get("task", "icl/trec_coarse")(**args)
    assert "thinking" not in task.generate(length=8192, index=0, seed=0, ctx=ctx).meta
    thinking = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer, "plain", thinking="on"), data_dir=tmp_path)
    sample = task.generate(length=8192, index=0, seed=0, ctx=thinking)
    assert sample.meta["thinking"] is True and sample.prompt == OFFICIAL_ICL_PROMPT  # HELMET's prompt keeps its cue
