"""The one cached model client (issue 33 §4): a keyed JSON-lines cache that repairs a torn tail under its lock, so
writers sharing a file lose no row; files written by the old CallCache and JudgeCache are read as they are, by the
same keys; data synthesis and the LLM judge both call models through it."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import warnings
from pathlib import Path

import pytest

from ctxbench.harness.backends.client import CachedClient, KeyedCache
from ctxbench.harness.core.types import Prediction

FIXTURES = Path(__file__).parent / "fixtures" / "cache_formats"
TORN = b'{"key": "torn", "te'  # what a writer killed half way through a line leaves


def _append_and_crash(path: str, who: int, rows: int, crash_every: int) -> None:
    """A writer process: appends `rows` rows one by one through the cache and, every `crash_every` rows, leaves a torn
    line as a writer killed mid-line does (it held the lock while writing; its death released it)."""
    from filelock import FileLock

    cache = KeyedCache(path, require=("key", "text"))
    for i in range(rows):
        cache.add([{"key": f"{who}-{i}", "text": f"reply {who}-{i}"}])
        if i % crash_every == crash_every - 1:
            with FileLock(str(cache.lock_path)), open(path, "ab") as f:
                f.write(TORN)


def test_two_writers_and_killed_ones_lose_no_row(tmp_path):
    path = tmp_path / "calls.jsonl"
    path.write_bytes(b'{"key": "old", "text": "kept"}\n' + TORN)  # a torn tail before anyone starts
    spawn = multiprocessing.get_context("spawn")
    writers = [spawn.Process(target=_append_and_crash, args=(str(path), who, 40, 3)) for who in range(2)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(timeout=240)
    alive = [w for w in writers if w.is_alive()]
    for w in alive:
        w.terminate()
    assert not alive and [w.exitcode for w in writers] == [0, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a row appended onto a torn line would be a corrupt line, skipped with a warning
        rows = KeyedCache(path, require=("key", "text")).rows
    assert set(rows) == {"old"} | {f"{who}-{i}" for who in range(2) for i in range(40)}
    assert all(json.loads(line) for line in path.read_text().splitlines())  # the torn tail was cut on reading
    assert rows["1-39"]["text"] == "reply 1-39"


def test_the_old_call_cache_format_is_read_by_the_same_keys(tmp_path, monkeypatch):
    """A generator cache written by CallCache (with a torn last line) answers the generator client's own keys, and a
    fully cached call builds no backend."""
    from ctxbench.trainers.data.generator import GeneratorClient, GeneratorConfig

    path = tmp_path / "calls.jsonl"
    shutil.copy(FIXTURES / "callcache-v1.jsonl", path)
    client = GeneratorClient(GeneratorConfig(model="smollm2-135m", backend="echo"), cache_file=path)
    client.fingerprint = "0123456789abcdef"  # the fingerprint the fixture was written under
    monkeypatch.setattr(CachedClient, "backend", lambda self: pytest.fail("a cached call built the backend"))
    assert client.complete(["Summarize: a"]) == ["a summary"]
    assert client.complete(["Ask: b"], '{"question": "') == ['{"question": "q?", "answer": "b"}']
    assert client.totals() == {"calls": 2, "prompt_tokens": 21, "generated_tokens": 11}
    assert path.read_bytes().endswith(b"}\n")  # the killed writer's torn line is gone


def test_the_old_judge_cache_format_is_read_with_its_refusals(tmp_path, monkeypatch):
    """A verdict cache written by JudgeCache: accepted verdicts come back, refused ones are counted and never read
    back as a verdict (a later accepted one of the same key is)."""
    from ctxbench.tasks.judge.cache import judge_cache_file

    monkeypatch.setenv("CTXBENCH_CACHE", str(tmp_path / "cache"))
    path = judge_cache_file("fixture-judge")
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / "judgecache-v1.jsonl", path)
    task = _judge(tmp_path, model="fixture-judge")
    cache = task.cache()
    assert cache.path == path and isinstance(cache, KeyedCache)
    assert cache.get("k-accepted")["output"] == '{"fluency": 1, "correctness": 3}' and cache.refusals("k-accepted") == 0
    assert cache.get("k-refused")["seed"] == 43 and cache.refusals("k-refused") == 1
    assert cache.get("k-only-refused") is None and cache.refusals("k-only-refused") == 2


class _StubBackend:
    name = "stub"
    context_length = 8192

    def __init__(self, text: str):
        self.text, self.asked = text, []

    def generate(self, requests):
        self.asked += requests
        return [Prediction(r.sample_id, self.text, 10, 5, 0.0) for r in requests]


def _judge(tmp_path, **more):
    from ctxbench.harness.core import registry

    data = tmp_path / "nqa.jsonl"
    data.write_text("")
    return registry.get("task", "judge/qa")(task="longbench/narrativeqa", task_args={"data_file": str(data)},
                                            base_url="http://127.0.0.1:9", api_key_env="", **more)


def test_hqa_synthesis_and_the_judge_call_models_through_the_one_client(tmp_path, monkeypatch, smol_tokenizer):
    from ctxbench.harness.core.prompting import PromptRenderer
    from ctxbench.harness.core.types import Sample
    from ctxbench.tasks.judge import task as judge_module
    from ctxbench.trainers.data import generator
    from ctxbench.trainers.hqa.generate import Generator

    assert not hasattr(generator, "CallCache") and not hasattr(judge_module, "JudgeCache")  # no second cache left
    stub = _StubBackend('{"question": "q?", "answer": "a", "fluency": 1, "correctness": 3}')
    built = []
    monkeypatch.setattr(CachedClient, "backend", lambda self: built.append(type(self).__name__) or stub)
    monkeypatch.setenv("CTXBENCH_CACHE", str(tmp_path / "cache"))

    hqa = Generator(generator.GeneratorConfig(model="smollm2-135m", backend="echo"), tmp_path / "calls")
    hqa._renderer = PromptRenderer(smol_tokenizer, "chat")
    (qa,) = hqa.qas(["Write a question about: the sea."], "diverse")
    assert qa is not None and qa.question == "q?" and isinstance(hqa.cache, KeyedCache)

    task = _judge(tmp_path, model="usage-judge")
    sample = Sample(task="judge/qa/longbench/narrativeqa", length=1024, index=0, prompt="p", answers=("a",),
                    prompt_tokens=10, max_new_tokens=32, metric="judge/qa", meta={"question": "Where?"})
    score, _, error = task.score_row("Answer: a", sample)
    assert error is None and score == 1.0 and isinstance(task.cached_client(), CachedClient)
    assert built == ["Generator", "CachedClient"] and len(stub.asked) == 2
    assert task.cache().get(task.cache_key(stub.asked[1].user_text)) is not None  # the verdict is cached by its key
