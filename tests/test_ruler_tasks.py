"""The 13 RULER tasks: prompt structure against the spec, fill and budget, determinism, and fitting cost.

Uses the real SmolLM2 tokenizer and the shared data (../shared/data), so no network is needed.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter

import numpy as np
import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.prompting import PromptRenderer
from ctxbench.tasks.haystacks import NOISE, wonderwords_lists

TASKS = [
    "niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2", "niah_multikey_3",
    "niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe", "qa_1", "qa_2",
]
LENGTHS = [1024, 4096, 16384]
N = 3  # samples per task and length
SEED = 42
USER = "<|im_start|>user\n"
ASSISTANT = "<|im_end|>\n<|im_start|>assistant\n"


def make_ctx(tok, data_dir) -> GenContext:
    return GenContext(tok, PromptRenderer(tok), data_dir=data_dir)


def task(name: str, **overrides):
    return registry.get("task", f"ruler/{name}")(**overrides)


@pytest.fixture(scope="module")
def generated(smol_tokenizer, data_dir):
    """Samples of every task at every length, and full tokenizations per (task, length)."""
    ctx = make_ctx(smol_tokenizer, data_dir)
    out, tokenizations = {}, {}
    for name in TASKS:
        t = task(name)
        for length in LENGTHS:
            before = ctx.full_tokenizations
            out[name, length] = [t.generate(length=length, index=i, seed=SEED, ctx=ctx) for i in range(N)]
            tokenizations[name, length] = (ctx.full_tokenizations - before) / N
    return out, tokenizations


def split(prompt: str) -> tuple[str, str]:
    """(user turn, assistant start) of a prompt rendered with SmolLM2's chat template."""
    assert prompt.count(USER) == 1 and prompt.count(ASSISTANT) == 1
    user = prompt.split(USER, 1)[1]
    task_text, prefix = user.split(ASSISTANT)
    return task_text, prefix


def ntok(tok, text: str) -> int:
    return len(tok(text, add_special_tokens=False)["input_ids"])


# ---------------------------------------------------------------- NIAH -------------------------------------------------------------
NIAH = {  # value type, needles (None: the haystack is made of needles), queries, values per key
    "niah_single_1": ("numbers", 1, 1, 1),
    "niah_single_2": ("numbers", 1, 1, 1),
    "niah_single_3": ("uuids", 1, 1, 1),
    "niah_multikey_1": ("numbers", 4, 1, 1),
    "niah_multikey_2": ("numbers", None, 1, 1),
    "niah_multikey_3": ("uuids", None, 1, 1),
    "niah_multivalue": ("numbers", 4, 1, 4),
    "niah_multiquery": ("numbers", 4, 4, 1),
}
VALUE = {"numbers": r"\d{7}", "uuids": r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"}
KEY = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}|[^\W\d_]+(?:[-' ]+[^\W\d_]+)*-[^\W\d_]+"  # jalapeño, tam-o'-shanter


@pytest.mark.parametrize("name", list(NIAH))
def test_niah_prompt_structure(generated, name):
    vtype, n_needles, n_queries, n_values = NIAH[name]
    plural = n_queries * n_values > 1
    for s in generated[0][name, 4096]:
        text, prefix = split(s.prompt)
        t = vtype if plural else vtype[:-1]
        m = re.fullmatch(
            (rf"Some special magic {t} are hidden within the following text\. Make sure to memorize it\. I will quiz you about the {t} afterwards\.\n"
             rf"(?P<context>.*)\nWhat are all the special magic {t} for (?P<query>.+) mentioned in the provided text\?") if plural else
            (rf"A special magic {t} is hidden within the following text\. Make sure to memorize it\. I will quiz you about the {t} afterwards\.\n"
             rf"(?P<context>.*)\nWhat is the special magic {t} for (?P<query>.+) mentioned in the provided text\?"),
            text, flags=re.S)
        assert m, text[:300] + " ... " + text[-300:]
        query, context = m["query"], m["context"]
        assert prefix == f" The special magic {t} for {query} mentioned in the provided text {'are' if plural else 'is'}"
        needles = re.findall(rf"One of the special magic {vtype} for ({KEY}) is: ({VALUE[vtype]})\.", context)
        if n_needles is None:  # the haystack is made of needles, one per line, with distinct keys
            lines = context.split("\n")
            assert len(needles) == len(lines) > 10
            assert len({k for k, _ in needles}) == len(needles)
        else:
            assert len(needles) == n_needles
        keys = [k for k, _ in needles]
        if n_queries > 1:
            parts = query.split(", ")
            assert len(parts) == n_queries and parts[-1].startswith("and ")
            queried = parts[:-1] + [parts[-1][4:]]
        else:
            queried = [query]
        assert all(keys.count(q) == n_values for q in queried)
        assert len(s.answers) == n_queries * n_values
        for q in queried:  # each answer is a value of a queried key
            assert {v for k, v in needles if k == q} <= set(s.answers)
        assert all(context.count(a) >= 1 for a in s.answers)
        assert len(s.depths) == (len(needles) if n_needles is not None else 1)
        assert all(0 <= d <= 100 for d in s.depths)
        if name == "niah_single_1":
            assert set(context.split("\n")) - {NOISE} == {f"One of the special magic numbers for {keys[0]} is: {s.answers[0]}."}
        if name in ("niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multivalue", "niah_multiquery"):
            assert "\n" not in context and len(context.split()) > 1000  # the essays, whitespace-normalised
        assert s.metric == "string_match_all" and s.max_new_tokens == 128


# ---------------------------------------------------------------- VT ---------------------------------------------------------------
VT_TASK = "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n"
VT_Q = "\nQuestion: Find all variables that are assigned the value {v} in the text above."
VT_PREFIX = " Answer: According to the chain(s) of variable assignment in the text above, {n} variables are assigned the value {v}, they are: "


def _check_chain(context: str, names: list[str], value: str) -> list[int]:
    lines = context.split("\n")
    at = [lines.index(f"VAR {names[0]} = {value}")]
    at += [lines.index(f"VAR {names[j + 1]} = VAR {names[j]} ") for j in range(len(names) - 1)]
    assert at == sorted(at)
    assert all(line == NOISE or line.startswith("VAR ") for line in lines)
    assert sum(line.startswith("VAR ") for line in lines) == len(names)
    return at


def test_vt_prompt_structure(generated, smol_tokenizer):
    examples = []
    for length in LENGTHS:
        for s in generated[0]["vt", length]:
            text, prefix = split(s.prompt)
            assert len(s.answers) == 5 and all(re.fullmatch(r"[A-Z]{5}", a) for a in s.answers)
            value = re.fullmatch(re.escape(VT_PREFIX.format(n=5, v="XXXXX")).replace("XXXXX", r"(\d{5})"), prefix)[1]
            assert prefix == VT_PREFIX.format(n=5, v=value)
            assert text.count(VT_TASK) == 2  # the example, then the task
            example, main = text.split("\n\n" + VT_TASK)
            main = VT_TASK + main
            # the example: a complete short task with 3-letter names, its answer prefix and answer
            m = re.fullmatch(re.escape(VT_TASK) + r"(.*)" + re.escape(VT_Q.format(v="XXXXX")).replace("XXXXX", r"(\d{5})")
                             + re.escape(VT_PREFIX.format(n=5, v="XXXXX")).replace("XXXXX", r"(\d{5})") + r" ((?:[A-Z]{3} ){4}[A-Z]{3})", example, flags=re.S)
            assert m and m[2] == m[3]
            _check_chain(m[1], m[4].split(), m[2])
            assert 450 < ntok(smol_tokenizer, example) <= 520  # about 500 tokens, as in the reference
            examples.append(example)
            # the task: the chain's statements in order among noise lines
            assert main.endswith(VT_Q.format(v=value))
            context = main[len(VT_TASK):-len(VT_Q.format(v=value))]
            _check_chain(context, list(s.answers), value)
            assert len(s.depths) == 5 and list(s.depths) == sorted(s.depths) and all(0 <= d <= 100 for d in s.depths)
            assert s.metric == "string_match_all" and s.max_new_tokens == 30
    assert len(set(examples)) == len(examples)  # randomised for every sample
    names = [re.findall(r"\b[A-Z]{3}\b", e.split("they are:")[-1]) for e in examples]
    assert len({tuple(n) for n in names}) == len(names)


# ---------------------------------------------------------------- CWE --------------------------------------------------------------
CWE_TASK = "Below is a numbered list of words. In these words, some appear more often than others. Memorize the ones that appear most often.\n"
CWE_Q = "\nQuestion: What are the 10 most common words in the above list?"
CWE_PREFIX = " Answer: The top 10 words that appear most often in the list are:"


def _numbered(context: str) -> list[str]:
    nums = [int(x) for x in re.findall(r"(?:^| )(\d+)\. ", context)]
    assert nums == list(range(1, len(nums) + 1))
    words = re.split(r"(?:^| )\d+\. ", context)[1:]
    assert len(words) == len(nums)
    return words


@pytest.mark.parametrize("length", [1024, 4096])
def test_cwe_prompt_structure(generated, length):
    fcw, fucw, ex_words, ex_fcw, ex_fucw = (6, 1, 20, 3, 1) if length < 4096 else (30, 3, 40, 10, 3)
    for s in generated[0]["cwe", length]:
        text, prefix = split(s.prompt)
        assert prefix == CWE_PREFIX
        assert text.count(CWE_TASK) == 2 and text.startswith(CWE_TASK)
        example, main = text[len(CWE_TASK):].split("\n" + CWE_TASK)
        ex_list, ex_answer = example.split(CWE_Q + CWE_PREFIX + " ")
        ex_common = _numbered(ex_answer)
        counts = Counter(_numbered(ex_list))
        assert len(counts) == ex_words and len(ex_common) == 10
        assert all(counts[w] == ex_fcw for w in ex_common) and sum(counts.values()) == 10 * ex_fcw + (ex_words - 10) * ex_fucw
        assert main.endswith(CWE_Q)
        counts = Counter(_numbered(main[:-len(CWE_Q)]))
        assert len(s.answers) == 10
        assert all(counts[w] == fcw for w in s.answers)  # each common word freq_cw times
        assert all(c == fucw for w, c in counts.items() if w not in s.answers)
        assert len(counts) - 10 == s.meta["haystack_units"]
        assert s.metric == "string_match_all" and s.max_new_tokens == 120


def test_cwe_beyond_the_word_list(smol_tokenizer, data_dir):
    """More uncommon words than wonderwords has: extended with deterministic new words, counts still right."""
    from ctxbench.tasks.ruler.cwe import base_words, extra_word

    ctx = make_ctx(smol_tokenizer, data_dir)
    s = task("cwe", freq_ucw=1, num_fewshot=0).generate(length=65536, index=0, seed=SEED, ctx=ctx)
    assert s.meta["haystack_units"] > len(base_words())
    text, _ = split(s.prompt)
    counts = Counter(_numbered(text[len(CWE_TASK):-len(CWE_Q)]))
    assert all(counts[w] == 30 for w in s.answers) and all(c == 1 for w, c in counts.items() if w not in s.answers)
    assert s.prompt_tokens + s.max_new_tokens <= 65536
    assert extra_word(3) == extra_word(3) and extra_word(3) not in base_words()


# ---------------------------------------------------------------- FWE --------------------------------------------------------------
FWE_HEAD = "Read the following coded text and track the frequency of each coded word. Find the three most frequently appeared coded words. "
FWE_Q = ("\nQuestion: Do not provide any explanation. Please ignore the dots '....'. "
         "What are the three most frequently appeared words in the above coded text?")
FWE_PREFIX = " Answer: According to the coded text above, the three most frequently appeared words are:"


@pytest.mark.parametrize("length", LENGTHS)
def test_fwe_prompt_structure(generated, length):
    from scipy.special import zeta

    for s in generated[0]["fwe", length]:
        text, prefix = split(s.prompt)
        assert prefix == FWE_PREFIX and text.startswith(FWE_HEAD) and text.endswith(FWE_Q)
        words = text[len(FWE_HEAD):-len(FWE_Q)].split(" ")
        counts = Counter(words)
        assert all(w == "..." or re.fullmatch(r"[a-z]{6}", w) for w in counts)
        ranked = [w for w, _ in counts.most_common()]
        assert ranked[0] == "..."
        assert set(ranked[1:4]) == set(s.answers) and len(s.answers) == 3
        assert counts[ranked[3]] > counts[ranked[4]]  # the answer is unambiguous
        # Zipf counts: rank k appears about N k^-2 / zeta(2) times
        n = counts["..."] * zeta(2.0)
        for k, w in enumerate(ranked[:4], 1):
            assert abs(counts[w] - n * k ** -2.0 / zeta(2.0)) <= 2
        assert s.metric == "string_match_all" and s.max_new_tokens == 50


# ---------------------------------------------------------------- QA ---------------------------------------------------------------
QA_HEAD = ("Answer the question based on the given documents. Only give me the answer and do not output any other words.\n\n"
           "The following are given documents.\n\n")
QA_TAIL = "\n\nAnswer the question based on the given documents. Only give me the answer and do not output any other words.\n\nQuestion: "


def _squad(data_dir):
    data = json.loads((data_dir / "squad" / "dev-v2.0.json").read_text())["data"]
    gold = {}
    for art in data:
        for p in art["paragraphs"]:
            for q in p["qas"]:
                if not q["is_impossible"]:
                    gold.setdefault(q["question"], []).append((p["context"], {a["text"] for a in q["answers"]}))
    docs = sorted({p["context"] for art in data for p in art["paragraphs"]})
    return gold, docs


def _hotpot(data_dir):
    data = json.loads(next((data_dir / "hotpotqa").glob("*.json")).read_text())
    gold, docs = {}, set()
    for d in data:
        pairs = list(zip(d["context"]["title"], d["context"]["sentences"]))
        texts = {t: f"{t}\n{''.join(s)}" for t, s in pairs}
        docs |= set(texts.values())
        gold[d["question"]] = [([texts[t] for t in set(d["supporting_facts"]["title"])], {d["answer"]})]
    return gold, sorted(docs)


def _documents(context: str) -> list[str]:
    parts = re.split(r"(?:^|\n\n)Document (\d+):\n", context)
    assert parts[0] == ""
    nums = [int(x) for x in parts[1::2]]
    assert nums == list(range(1, len(nums) + 1))
    return parts[2::2]


@pytest.mark.parametrize("name", ["qa_1", "qa_2"])
def test_qa_prompt_structure(generated, data_dir, name):
    gold, all_docs = (_squad if name == "qa_1" else _hotpot)(data_dir)
    questions = set()
    for length in LENGTHS:
        for s in generated[0][name, length]:
            text, prefix = split(s.prompt)
            assert prefix == " Answer:" and text.startswith(QA_HEAD)
            context, question = text[len(QA_HEAD):].split(QA_TAIL)
            questions.add(question)
            docs = _documents(context)
            assert set(docs) <= set(all_docs)
            golds = [g for g, answers in gold[question] if set(s.answers) == answers] if name == "qa_1" else [g for g, _ in gold[question]]
            assert golds, "answers are the question's reference answers"
            golds = [golds[0]] if name == "qa_2" else golds
            assert any((g in docs) if isinstance(g, str) else all(x in docs for x in g) for g in golds)
            n_gold = 1 if name == "qa_1" else len(golds[0])
            assert len(s.depths) == n_gold and all(0 <= d <= 100 for d in s.depths)
            if name == "qa_1":
                assert any(a in context for a in s.answers)
            assert s.metric == "string_match_part" and s.max_new_tokens == 32
    assert len(questions) > 1


def test_qa_depths_and_question_order(smol_tokenizer, data_dir):
    ctx = make_ctx(smol_tokenizer, data_dir)
    for d in (0, 50, 100):
        s = task("qa_1", depths=[d]).generate(length=8192, index=1, seed=SEED, ctx=ctx)
        assert abs(s.depths[0] - d) < 8
    # the same index asks the same question at every length, a different seed reorders the questions
    q = [task("qa_1").generate(length=n, index=0, seed=SEED, ctx=ctx).meta["question"] for n in (2048, 4096)]
    assert q[0] == q[1]
    assert len({task("qa_1").generate(length=2048, index=0, seed=s, ctx=ctx).meta["question"] for s in range(4)}) > 1


def test_vt_variants(smol_tokenizer, data_dir):
    ctx = make_ctx(smol_tokenizer, data_dir)
    s = task("vt", haystack="essay").generate(length=4096, index=0, seed=SEED, ctx=ctx)
    text, _ = split(s.prompt)
    main = text.split("\n\n" + VT_TASK)[1]
    assert f"VAR {s.answers[1]} = VAR {s.answers[0]}." in main and 0.99 * 4096 <= s.prompt_tokens + 30 <= 4096
    s = task("vt", num_chains=2, num_hops=2, add_fewshot=False, depths=[10, 50, 90, 20, 30, 40]).generate(length=4096, index=0, seed=SEED, ctx=ctx)
    text, prefix = split(s.prompt)
    assert text.startswith(VT_TASK) and "3 variables" in prefix and len(s.answers) == 3
    assert np.allclose(s.depths[:3], [10, 50, 90], atol=2)
    assert sum(line.startswith("VAR ") for line in text.split("\n")) == 6
    s = task("vt", num_chains=3, num_hops=3).generate(length=2048, index=0, seed=SEED, ctx=ctx)
    lines = split(s.prompt)[0].split("\n\n" + VT_TASK)[1].split("\n")
    statements = {i: line for i, line in enumerate(lines) if line.startswith("VAR ")}
    assert len(statements) == 12 and len(s.depths) == 12
    roots = [line.split()[1] for line in statements.values() if re.fullmatch(r"VAR [A-Z]{5} = \d{5}", line)]
    assert len(roots) == 3 and roots.count(s.answers[0]) == 1
    _check_chain("\n".join(line for line in lines[:-1] if not line.startswith("VAR ") or any(f"VAR {a} " in line + " " for a in s.answers)),
                 list(s.answers), split(s.prompt)[1].split("the value ")[1].split(",")[0])
    s = task("vt", haystack="essay", num_chains=2, num_hops=2, depths=[60, 20, 40, 90, 70, 80]).generate(length=4096, index=0, seed=SEED, ctx=ctx)
    main = split(s.prompt)[0].split("\n\n" + VT_TASK)[1]
    assert np.allclose(s.depths, [20, 40, 60, 70, 80, 90], atol=3)  # sorted within each chain, so it reads in order
    a = s.answers
    assert main.index(f"= VAR {a[0]}.") < main.index(f"= VAR {a[1]}.")


def test_qa_official_formats(smol_tokenizer, tmp_path):
    """The official SQuAD 2.0 and HotpotQA JSON layouts (the shared HotpotQA sample uses the datasets layout)."""
    squad = {"data": [{"title": "T", "paragraphs": [
        {"context": f"Paragraph {i} says the answer is Zorblax{i}.", "qas": [
            {"question": f"What does paragraph {i} say?", "answers": [{"text": f"Zorblax{i}"}, {"text": f"Zorblax{i}"}], "is_impossible": False},
            {"question": "Unanswerable?", "answers": [], "is_impossible": True}]} for i in range(30)]}]}
    hotpot = [{"question": f"Question {i}?", "answer": f"Ans{i}", "supporting_facts": [[f"Gold {i}", 0]],
               "context": [[f"Gold {i}", [f"Gold paragraph {i}.", " Ans" + str(i) + "."]], [f"Other {i}", ["Filler."]]]} for i in range(30)]
    (tmp_path / "squad.json").write_text(json.dumps(squad))
    (tmp_path / "hotpot.json").write_text(json.dumps(hotpot))
    ctx = make_ctx(smol_tokenizer, None)
    s = task("qa_1", data_file=str(tmp_path / "squad.json")).generate(length=1024, index=0, seed=SEED, ctx=ctx)
    i = int(re.search(r"paragraph (\d+) say", s.prompt)[1])
    assert s.answers == (f"Zorblax{i}",) and f"Paragraph {i} says" in s.prompt
    assert 1024 - 40 <= s.prompt_tokens + 32 <= 1024  # short documents, repeated to fill
    s = task("qa_2", data_file=str(tmp_path / "hotpot.json")).generate(length=1024, index=0, seed=SEED, ctx=ctx)
    i = int(re.search(r"Question (\d+)\?", s.prompt)[1])
    assert s.answers == (f"Ans{i}",) and f"Gold {i}\nGold paragraph {i}. Ans{i}." in s.prompt and len(s.depths) == 1


# ---------------------------------------------------------------- fill, budget, cost -----------------------------------------------
_DOC_COSTS: dict[str, dict[str, int]] = {}


def _unit_slack(name: str, s, tok, data_dir) -> float:
    """The most a sample may fall short of its length: the cost of one more haystack unit."""
    text, _ = split(s.prompt)
    if name in ("niah_single_1", "vt"):
        return ntok(tok, "\n" + NOISE)
    if name in ("niah_multikey_2", "niah_multikey_3"):  # needle lines: the costliest of many random ones
        from ctxbench.tasks.ruler.niah import NEEDLE, random_value

        a = task(name).args
        r, w = random.Random(0), wonderwords_lists()
        lines = ["\n" + NEEDLE.format(type_v=a.value_type, key=random_value(a.key_type, r, w), value=random_value(a.value_type, r, w)) for _ in range(500)]
        return max(len(x) for x in tok(lines, add_special_tokens=False)["input_ids"]) + 2
    if name == "cwe":  # freq_ucw more entries
        entries = re.findall(r"(?:^| )\d+\. [^\d\n]+?(?= \d+\. |\n)", text.split(CWE_TASK)[-1])
        return s.meta["freq_ucw"] * max(len(x) for x in tok(entries[-50:], add_special_tokens=False)["input_ids"])
    if name in ("qa_1", "qa_2"):  # the shortest document not already in the prompt
        if name not in _DOC_COSTS:
            _, all_docs = (_squad if name == "qa_1" else _hotpot)(data_dir)
            _DOC_COSTS[name] = dict(zip(all_docs, (len(x) for x in tok(all_docs, add_special_tokens=False)["input_ids"])))
        costs = _DOC_COSTS[name]
        used = _documents(text[len(QA_HEAD):].split(QA_TAIL)[0])
        free = [c for d, c in costs.items() if d not in set(used)] or list(costs.values())
        return min(free) + ntok(tok, f"\n\nDocument {len(used) + 1}:\n") + 2
    return 0.0


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("name", TASKS)
def test_fill_and_budget(generated, smol_tokenizer, data_dir, name, length):
    for s in generated[0][name, length]:
        assert s.prompt_tokens == len(smol_tokenizer(s.prompt, add_special_tokens=s.add_special_tokens)["input_ids"])
        used = s.prompt_tokens + s.max_new_tokens
        assert used <= length
        slack = length - used
        assert slack <= max(0.01 * length, _unit_slack(name, s, smol_tokenizer, data_dir)), (name, length, used)


@pytest.mark.parametrize("name", TASKS)
def test_about_one_tokenization_per_sample(generated, name):
    assert generated[1][name, 4096] <= 1.3


def test_determinism_across_order(generated, smol_tokenizer, data_dir):
    """A sample depends only on (task, args, length, index, seed): not on what was generated before. The module's
    samples (tasks in order, each at every length, indices 0-2, one context) against the same 1024-token samples
    generated again in a fresh context with the tasks and indices reversed."""
    samples, _ = generated
    a = {(n, i): samples[n, 1024][i] for n in TASKS for i in range(N)}
    ctx = make_ctx(smol_tokenizer, data_dir)
    b = {(n, i): task(n).generate(length=1024, index=i, seed=SEED, ctx=ctx)
         for n in reversed(TASKS) for i in reversed(range(N))}
    for key, s in a.items():
        t = b[key]
        assert (s.prompt, s.answers, s.depths, s.prompt_tokens) == (t.prompt, t.answers, t.depths, t.prompt_tokens), key
    assert len({s.prompt for s in a.values()}) == len(a)
    assert np.all([s.length == 1024 for s in b.values()])


def test_trusting_exact_piece_counts_gives_identical_samples(smol_tokenizer, data_dir):
    """verify='fast' tokenizes only the first sample per task and length where the task declares its boundaries and
    the tokenizer passes them, verifies every sample otherwise, and changes nothing."""
    from ctxbench.harness.core import registry
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.prompting import PromptRenderer

    full = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=data_dir, verify="full")
    fast = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=data_dir, verify="fast")
    for name in registry.names("task"):
        task = registry.get("task", name)()
        if getattr(task, "requires_data", False) or getattr(task, "external", False):
            continue
        declared = task.boundary_probes(fast) is not None
        assert declared == (name.startswith("ruler/") or name.startswith("niah/")), name
        # a task without probes takes the full path in both contexts, decided once per context whatever the length
        # (its additivity is refused): one length shows it; the fast path's tasks are checked at two
        for length in (2048, 8192) if declared else (2048,):
            a = [task.generate(length=length, index=i, seed=5, ctx=full).to_json() for i in range(4)]
            before = fast.full_tokenizations
            b = [task.generate(length=length, index=i, seed=5, ctx=fast).to_json() for i in range(4)]
            assert a == b, name
            if declared:
                assert fast.full_tokenizations - before == 1, name  # the first sample only
            else:
                assert fast.full_tokenizations - before >= 4, name  # no probes: every sample counted in full
            for s in b:
                assert len(smol_tokenizer(s["prompt"], add_special_tokens=False)["input_ids"]) == s["prompt_tokens"]
