"""Hierarchical-QA synthesis: answer-only labels, Algorithms 1 and 2, reply parsing and retries, resumable calls."""

from __future__ import annotations

import copy
import hashlib
import json
import pathlib
from collections import Counter

import numpy as np
import pytest

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.types import Prediction
from ctxbench.trainers.data.synthesis import synthesize
from ctxbench.trainers.hqa import prompts
from ctxbench.trainers.hqa.algorithms import Composition, DocumentQAs, concatenate, hierarchical_steps
from ctxbench.trainers.hqa.chat import IGNORE, tokenize
from ctxbench.trainers.hqa.data import HQADataConfig
from ctxbench.trainers.hqa.generate import QA, Generator, parse_qa

SQUAD = "squad/dev-v2.0.json"


class Killed(Exception):
    pass


class StubBackend:
    """Answers deterministically from the prompt's hash; `replies` scripts bad replies; `kill_after` simulates a kill."""

    name = "stub"
    context_length = 8192

    def __init__(self, tokenizer, *, kill_after: int | None = None, bad: Counter | None = None):
        self.tokenizer, self.kill_after, self.calls, self.bad = tokenizer, kill_after, 0, bad or Counter()

    def generate(self, requests):
        out = []
        for r in requests:
            if self.kill_after is not None and self.calls >= self.kill_after:
                raise Killed()
            self.calls += 1
            h = hashlib.sha256(r.prompt.encode()).hexdigest()[:8]
            if "Summarize the following" in r.user_text:
                text = f"summary {h}"
            elif self.bad[r.user_text.split("\n\n(Attempt")[0]] > 0:  # scripted failures for this prompt, one per attempt
                self.bad[r.user_text.split("\n\n(Attempt")[0]] -= 1
                text = "I am sorry, here is some prose."
            else:
                text = json.dumps({"question": f"q{h}?", "answer": f"a{h}"})
            out.append(Prediction(r.sample_id, text, r.prompt_tokens or 0, 4, 0.0))
        return out


def stub_generator(cfg: HQADataConfig, tok, **kw) -> Generator:
    from ctxbench.harness.core.prompting import PromptRenderer

    gen = Generator(cfg.generator, pathlib.Path(cfg.cache_dir), max_retries=cfg.max_retries)
    gen._backend, gen._renderer = StubBackend(tok, **kw), PromptRenderer(tok, "chat")
    return gen


def tiny_data(tmp_path, data_dir, **kw) -> HQADataConfig:
    raw = {"documents": {"path": str(data_dir / SQUAD), "max_documents": 5}, "tokenizer": "smollm2-135m",
           "generator": {"model": "smollm2-135m", "backend": "hf", "max_new_tokens": 32}, "small_tokens": 128,
           "medium_tokens": 384, "hierarchical_per_document": 3, "diverse_per_document": 4, "documents_per_sample": 2,
           "target_tokens": 2048, "samples": 3, "composition": {"n1": 2, "n2": 2, "n3": 1}, "out_dir": str(tmp_path / "out"),
           "cache_dir": str(tmp_path / "cache"), "shard_samples": 2}
    return HQADataConfig(**{**raw, **kw})


# --- 1. labels -------------------------------------------------------------------------------------------
def llama3_tokenizer(smol):
    import trl

    tok = copy.deepcopy(smol)
    tok.add_special_tokens({"additional_special_tokens": ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                                                          "<|eot_id|>"]})
    tok.bos_token = "<|begin_of_text|>"
    tok.chat_template = (pathlib.Path(trl.__file__).parent / "chat_templates" / "llama3_1.jinja").read_text()
    return tok, "<|eot_id|>"


@pytest.mark.parametrize("template", ["smollm2", "llama3.1"])
def test_labels_decode_exactly_to_the_answers_and_their_end_of_turn(smol_tokenizer, template):
    tok, eot = (smol_tokenizer, "<|im_end|>") if template == "smollm2" else llama3_tokenizer(smol_tokenizer)
    answers = ["The book follows Ada across three winters.", "Forty-two {\"x\": 1}", "Yes - in chapter 3, at the mill."]
    messages = [{"role": "system", "content": "You answer questions about books."}]
    for q, a in zip(["Long document text. Please give me a summary of the book", "How many?", "Does she return?"], answers):
        messages += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    ids, labels = tokenize(tok, messages)
    assert len(ids) == len(labels)
    labelled = [t for t, lab in zip(ids, labels) if lab != IGNORE]
    assert tok.decode(labelled) == "".join(a + eot for a in answers)
    assert all(lab == t for t, lab in zip(ids, labels) if lab != IGNORE)
    # everything else is -100, and the unlabelled text holds the system prompt, the questions and the template
    rest = tok.decode([t for t, lab in zip(ids, labels) if lab == IGNORE])
    assert "You answer questions about books." in rest and "How many?" in rest and answers[0] not in rest
    assert tok.decode(ids) == tok.apply_chat_template(messages, tokenize=False)


# --- 3. Algorithm 1 --------------------------------------------------------------------------------------
def test_algorithm1_order_uniform_moves_and_indices_in_range():
    from scipy.stats import chisquare

    shape = [3, 2, 3, 1]
    for seed in range(50):
        steps = hierarchical_steps(shape, 25, np.random.default_rng(seed))
        assert [s.level for s in steps[:3]] == ["global", "medium", "small"]
        assert steps[1].move == "random_medium" and (steps[2].medium, steps[2].small) == (steps[1].medium, 0)
        for prev, s in zip(steps, steps[1:]):
            if s.level != "global":
                assert 0 <= s.medium < len(shape)
            if s.level == "small":
                assert 0 <= s.small < shape[s.medium]
            if prev.level == "medium":  # after a medium comes its first small chunk
                assert (s.level, s.medium, s.small, s.move) == ("small", prev.medium, 0, "first_small")
            if s.move == "deeper":
                assert (s.medium, s.small) == (prev.medium, prev.small)
    moves = Counter()
    rng = np.random.default_rng(7)
    while sum(moves.values()) < 3000:
        moves.update(s.move for s in hierarchical_steps(shape, 40, rng) if s.move in ("deeper", "next_small", "next_medium"))
    counts = [moves[m] for m in ("deeper", "next_small", "next_medium")]
    assert chisquare(counts).pvalue > 0.001, counts
    starts = Counter(hierarchical_steps(shape, 2, np.random.default_rng(s))[1].medium for s in range(400))
    assert set(starts) == set(range(len(shape)))  # the first medium is random


def test_algorithm1_next_wraps_to_an_unvisited_chunk():
    from ctxbench.trainers.hqa.algorithms import _next_unvisited

    assert _next_unvisited(2, 3, lambda i: i == 0) == 1  # past the end: wraps, skipping visited chunk 0
    assert _next_unvisited(0, 3, lambda i: False) == 1
    assert _next_unvisited(1, 3, lambda i: True) == 2  # all visited: simply the next


# --- 4. Algorithm 2 --------------------------------------------------------------------------------------
def pools(k: int, n_h: int = 25, n_s: int = 50) -> list[DocumentQAs]:
    return [DocumentQAs(f"d{i}", f"text {i}", f"summary {i}",
                        [{"id": f"d{i}/h{j}", "question": f"h{i}.{j}?", "answer": "a"} for j in range(n_h)],
                        [{"id": f"d{i}/s{j}", "question": f"s{i}.{j}?", "answer": "a"} for j in range(n_s)]) for i in range(k)]


def test_algorithm2_counts_revisit_rate_no_reuse_and_order():
    comp = Composition()  # paper: N1=5, N2=9, N3=3, p=0.6
    revisits, chances = 0, 0
    for seed in range(2000):
        docs = pools(3)
        messages, turns = concatenate(docs, np.random.default_rng(seed), comp)
        assert len(messages) == 2 * len(turns)
        by = Counter((t["doc"], t["kind"]) for t in turns)
        for i in range(3):
            assert by[(i, "summary")] == 1 and by[(i, "hierarchical")] == 5 and by[(i, "diverse")] == 5
        assert sum(v for (d, k), v in by.items() if k == "earlier_diverse") == 9 * 2  # after documents 2 and 3
        assert by[(2, "earlier_diverse")] == 0  # only earlier documents' pools
        ids = [t["qa"] for t in turns]
        assert len(ids) == len(set(ids))  # no QA used twice
        for i in range(3):  # each document's hierarchical QAs appear in Algorithm 1 order
            order = [int(t["qa"].split("/h")[1]) for t in turns if t["qa"] and t["qa"].startswith(f"d{i}/h")]
            assert order == list(range(len(order)))
        # revisits come in blocks of N3=3; documents 1 and 2 after document 2's turn; document 1 again after 3
        revisits += by[(0, "revisit_hierarchical")] // 3 + by[(1, "revisit_hierarchical")] // 3
        chances += 3
        summary_at = [i for i, m in enumerate(messages) if m["content"].endswith(prompts.SUMMARY_REQUEST)]
        assert [messages[i]["content"] for i in summary_at] == [f"text {i}{prompts.SUMMARY_REQUEST}" for i in range(3)]
    assert abs(revisits / chances - 0.6) < 0.05


def test_algorithm2_ablation_axes():
    rng = np.random.default_rng(0)
    _, turns = concatenate(pools(2), rng, Composition(after="h", revisit="s", revisit_p=1.0))
    kinds = Counter((t["doc"], t["kind"]) for t in turns)
    assert kinds[(0, "hierarchical")] == 10 and kinds[(0, "diverse")] == 0 and kinds[(0, "revisit_hierarchical")] == 0
    assert kinds[(0, "earlier_diverse")] == 9
    messages, turns = concatenate(pools(2), rng, Composition(summary=False))
    assert not any(t["kind"] == "summary" for t in turns)
    assert messages[0]["content"].startswith("text 0\n\n") and messages[0]["content"].endswith("?")
    lens = {len(concatenate(pools(2), np.random.default_rng(s), Composition(counts="randomized"))[1]) for s in range(30)}
    assert len(lens) > 5  # randomized counts vary


# --- 5. parsing and retries ------------------------------------------------------------------------------
@pytest.mark.parametrize("reply, expected", [
    ('{"question": "Who?", "answer": "Ada"}', QA("Who?", "Ada")),
    ("{'question': 'Who?', 'answer': 'Ada'}", QA("Who?", "Ada")),
    ('Sure! {"question": "When?", "answer": 1850} Hope this helps.', QA("When?", "1850")),
    ("", "empty"), ("   ", "empty"),
    ("The question is about Ada and the answer is yes.", "no_object"),
    ('{"question": "Who?", "answer": ', "no_object"),
    ("{question: Who?}", "unparsable"),
    ('{"question": "", "answer": "x"}', "missing_fields"),
])
def test_replies_parse_from_json_or_dict_literals(reply, expected):
    assert parse_qa(reply) == expected


def test_prose_replies_are_retried_then_dropped_and_counted(tmp_path, smol_tokenizer):
    cfg = tiny_data(tmp_path, pathlib.Path("/"), max_retries=2)
    texts = [prompts.qa(prompts.SPECIFIC, f"context {i}") for i in range(3)]
    bad = Counter({texts[0]: 1, texts[1]: 5})  # prompt 0 fails once then succeeds; prompt 1 always fails
    gen = stub_generator(cfg, smol_tokenizer, bad=bad)
    out = gen.qas(texts, "diverse")
    assert out[0] is not None and out[1] is None and out[2] is not None
    assert gen.drops == Counter({"diverse:no_object": 1})
    assert gen._backend.calls == 3 + 2 + 1  # first attempts, then 2 retries of prompt 1 and 1 of prompt 0
    again = stub_generator(cfg, smol_tokenizer)  # a rerun asks nothing: failures and successes are cached
    assert [x is None for x in again.qas(texts, "diverse")] == [False, True, False] and again._backend.calls == 0


# --- 6. resumability -------------------------------------------------------------------------------------
def test_killed_generation_reruns_only_the_rest_byte_identically(tmp_path, smol_tokenizer, data_dir):
    import shutil

    from ctxbench.harness.core.locks import LOCK_NAME  # the one-writer lock file stays in out_dir

    cut = tiny_data(tmp_path, data_dir)
    gen = stub_generator(cut, smol_tokenizer)
    synthesize("hqa", cut, generator=gen)
    total = gen._backend.calls
    files = {p.name: p.read_bytes() for p in pathlib.Path(cut.out_dir).iterdir() if p.name != LOCK_NAME}
    assert len(files) == 3 and json.loads(files["manifest.json"])["counts"]["generator"]["calls"] == total
    shutil.rmtree(cut.out_dir)
    shutil.rmtree(cut.cache_dir)  # start over, and kill this run after k calls
    k = total // 3
    with pytest.raises(Killed):
        synthesize("hqa", cut, generator=stub_generator(cut, smol_tokenizer, kill_after=k))
    assert not (pathlib.Path(cut.out_dir) / "manifest.json").exists()
    rerun = stub_generator(cut, smol_tokenizer)
    synthesize("hqa", cut, generator=rerun)
    assert rerun._backend.calls == total - k
    assert {p.name: p.read_bytes() for p in pathlib.Path(cut.out_dir).iterdir() if p.name != LOCK_NAME} == files
    third = stub_generator(cut, smol_tokenizer)
    synthesize("hqa", cut, generator=third)  # finished: reused as is
    assert third._backend.calls == 0


def test_synthesis_counts_and_fits_the_target(tmp_path, smol_tokenizer, data_dir):
    cfg = tiny_data(tmp_path, data_dir)
    m = synthesize("hqa", cfg, generator=stub_generator(cfg, smol_tokenizer))
    rows = [json.loads(line) for s in m["shards"] for line in (pathlib.Path(cfg.out_dir) / s).read_text().splitlines()]
    assert len(rows) == m["samples"] == 3 and m["counts"]["documents_used"] == 5
    for r in rows:
        ids, labels = tokenize(smol_tokenizer, r["conversations"])
        assert len(ids) == r["meta"]["tokens"] <= cfg.target_tokens and len(r["meta"]["documents"]) == 2
        assert sum(x != IGNORE for x in labels) == r["meta"]["answer_tokens"]
        assert [m["role"] for m in r["conversations"]] == ["user", "assistant"] * (len(r["conversations"]) // 2)
    assert m["tokenizer_fingerprint"] and m["generator_fingerprint"] and m["prompts_hash"] == prompts.prompts_hash()


# --- bad input -------------------------------------------------------------------------------------------
def test_short_documents_are_skipped_and_counted_or_refused(tmp_path, smol_tokenizer, data_dir):
    docs = tmp_path / "docs.jsonl"
    long_text = (data_dir / "pg_essays").glob("*.txt").__next__().read_text()
    docs.write_text(json.dumps({"text": "too short"}) + "\n" + json.dumps({"text": long_text}) + "\n"
                    + json.dumps({"text": long_text[::-1]}) + "\n")
    cfg = tiny_data(tmp_path, data_dir, documents={"path": str(docs)}, samples=1)
    m = synthesize("hqa", cfg, generator=stub_generator(cfg, smol_tokenizer))
    assert m["drops"]["documents:shorter_than_medium"] == 1 and m["counts"]["documents_usable"] == 2
    docs.write_text(json.dumps({"text": "too short"}) + "\n")
    with pytest.raises(ConfigError, match="out/? holds a synthesis of another input data; use another out_dir"):
        synthesize("hqa", cfg, generator=stub_generator(cfg, smol_tokenizer))  # the documents changed under a finished out_dir
    cfg = cfg.model_copy(update={"out_dir": str(tmp_path / "other")})
    with pytest.raises(ConfigError, match="none of the 1 documents has 384 tokens"):
        synthesize("hqa", cfg, generator=stub_generator(cfg, smol_tokenizer))


def test_bad_data_configs_are_one_line(tmp_path, data_dir, repo_root, ctxbench, monkeypatch):
    import yaml

    from ctxbench.trainers.hqa.data import load_data_config

    good = tiny_data(tmp_path, data_dir).model_dump(mode="json")
    cases = [({**good, "smal_tokens": 3}, "smal_tokens: unknown key"),
             ({**good, "medium_tokens": 300}, "multiple of small_tokens"),
             ({**good, "target_tokens": 900}, "target_tokens: 900 leaves")]
    f = tmp_path / "bad.yaml"
    for raw, hint in cases:
        f.write_text(yaml.safe_dump(raw))
        with pytest.raises(ConfigError) as e:
            synthesize("hqa", load_data_config(f))
        assert hint in str(e.value) and "\n" not in str(e.value)
    # on the command line (in process: a refusal needs no process): one line on stderr, exit 2, before any generator
    # call (a 200-token generator window)
    f.write_text(yaml.safe_dump({**good, "generator": {"model": "smollm2-135m", "backend": "echo", "max_new_tokens": 32,
                                                        "backend_args": {"context_length": 200}}}))
    monkeypatch.chdir(repo_root)
    code, _, err = ctxbench("data", "hqa", "--config", str(f))
    assert code == 2 and "generator.model: context of 200 tokens" in err, err[-1500:]
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
