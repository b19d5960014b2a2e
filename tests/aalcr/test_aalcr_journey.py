"""The AA-LCR journey: `ctxbench score --backend echo --model smollm2-135m --suite aalcr-quick` on the hand-made
fixture, judged by a local OpenAI-compatible stand-in (tests/json_server.py) that replies with the card's verdict
words: rows written with their document-set clusters and judge records, the table printed, the paid calls guarded by
--judge-budget and cached, and --until refused (questions share documents). No network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.json_server import json_server

FIXTURE = Path(__file__).parent / "data"


class EqualityChecker:
    """A scripted judge: CORRECT for a candidate that echoes the prompt's documents (echo's sampled answer), else
    INCORRECT; it keeps every prompt it was asked."""

    def __init__(self):
        self.prompts: list[str] = []
        self.server, self.url = json_server(lambda: {"data": [{"id": "checker"}]}, self._answer)

    def _answer(self, body: dict) -> dict:
        prompt = body["messages"][-1]["content"]
        self.prompts.append(prompt)
        candidate = prompt.split("\nCANDIDATE ANSWER TO ASSESS: ", 1)[1]
        verdict = "Correct." if "BEGIN INPUT DOCUMENTS" in candidate else "INCORRECT"
        return {"model": "checker", "choices": [{"message": {"content": verdict}}],
                "usage": {"prompt_tokens": 90, "completion_tokens": 2}}


@pytest.fixture()
def checker(monkeypatch, tmp_path):
    judge = EqualityChecker()
    monkeypatch.setenv("OPENAI_BASE_URL", judge.url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setattr("ctxbench.tasks.judge.task.judge_cache_file", lambda model: tmp_path / "verdicts.jsonl")
    yield judge
    judge.server.shutdown()


def rows(store: Path) -> list[dict]:
    return [json.loads(x) for x in next(store.rglob("samples.jsonl")).read_text().splitlines()]


def test_quick_suite_scores_end_to_end_through_the_judge(ctxbench, tmp_path, checker):
    store = tmp_path / "runs"
    score = ("score", "--backend", "echo", "--model", "smollm2-135m", "--suite", "aalcr-quick", "--data-dir", str(FIXTURE),
             "--store", str(store), "--repeats", "2", "--gen-kwargs", "temperature=0.6,seed=0")
    code, _, err = ctxbench(*score)
    assert code == 2 and "pass --judge-budget 12" in err and not store.exists() and not checker.prompts
    code, _, err = ctxbench(*score[:-4], "--until", "effective-length", "--judge-budget", "6")
    assert code == 2 and "--until: aalcr's samples share" in err and not store.exists()

    code, out, err = ctxbench(*score, "--judge-budget", "12")
    assert code == 0, err
    got = {r["id"]: r for r in rows(store)}
    assert len(got) == 12 and {i.split("~")[0] for i in got} == {f"aalcr@{n}#{j}" for n in (2048, 4096, 8192) for j in (0, 1)}
    assert {r["cluster"] for r in got.values()} == {"aalcr:Company_Documents/1", "aalcr:Legal/2", "aalcr:Academia/3"}
    judged = [r for r in got.values() if "skipped" not in r["judge"]]
    asked = {r["judge"]["prompt_sha"][0] for r in judged}  # two repeats that answer alike share one verdict (cached)
    assert len(checker.prompts) == len(asked) and 0 < len(judged) < 12  # echo answers the prompt or nothing
    for r in got.values():
        assert r["error"] is None and r["judge"]["model"] == "Qwen/Qwen3-235B-A22B-Instruct-2507"
        assert r["score"] == (1.0 if r in judged else 0.0)  # "Correct." reads as correct; an empty answer is 0 unasked
    assert all(r["judge"]["verdicts"] == [{"verdict": "Correct.", "correct": True}] for r in judged)
    assert all("The question, for reference only: " in p and p.count("BEGIN INPUT DOCUMENTS") == 1 for p in checker.prompts)
    assert "aalcr" in out and "2 repeats" in out

    code, _, err = ctxbench(*score, "--fresh", "--judge-budget", "12")  # re-scored: every verdict from the cache
    assert code == 0, err
    assert len(checker.prompts) == len(asked)
    assert all(r["judge"]["cached"] == 1 for r in rows(store) if "skipped" not in r["judge"])
