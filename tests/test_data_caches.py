"""Caches are keyed by what the data says, not where it lives, and a torn cache file is rebuilt (issue 10 §5)."""

from __future__ import annotations

import shutil
import warnings

import pytest

from ctxbench.harness.core import datasets
from ctxbench.harness.core.config import TaskSpec, build_task
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.prompting import PromptRenderer


@pytest.fixture()
def private_cache(tmp_path, monkeypatch, smol_tokenizer):
    """Caches (samples, haystack costs) in this test's own directory; the tokenizer is already loaded."""
    monkeypatch.setenv("CTXBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def ctx_for(tok, data_dir=None, verify: str = "fast") -> GenContext:
    return GenContext(tok, PromptRenderer(tok), data_dir=data_dir, verify=verify)


def essay_task(essays):
    return build_task(TaskSpec(task="ruler/niah_single_2", args={"essays": str(essays)}))


def some_essays(data_dir, tmp_path, first: int):
    folder = tmp_path / "essays"
    folder.mkdir(exist_ok=True)
    source = sorted((data_dir / "pg_essays").glob("*.txt"))
    for i, f in enumerate(source[first: first + 3]):
        shutil.copy(f, folder / f"essay{i}.txt")  # the same names whatever the content
    return folder


def test_replacing_the_essays_under_the_same_path_gives_new_samples(tmp_path, data_dir, smol_tokenizer, private_cache):
    """Each call a fresh context, as each run is. verify="full" (the one 512-token sample tokenized in full) leaves out
    the fast path's additivity check of each new set of essays, most of this test's cost and no part of what it
    checks: the sample and haystack caches' keys."""
    essays = some_essays(data_dir, tmp_path, first=0)
    task = essay_task(essays)
    (a,) = datasets.generate(task, length=512, indices=[0], seed=1, ctx=ctx_for(smol_tokenizer, verify="full"))
    (again,) = datasets.generate(task, length=512, indices=[0], seed=1, ctx=ctx_for(smol_tokenizer, verify="full"))
    assert again.prompt == a.prompt and len(list((private_cache / "datasets").glob("*.jsonl"))) == 1  # a cache hit
    some_essays(data_dir, tmp_path, first=3)  # every essay replaced, same paths
    (b,) = datasets.generate(task, length=512, indices=[0], seed=1, ctx=ctx_for(smol_tokenizer, verify="full"))
    assert b.prompt != a.prompt and b.answers == a.answers  # same needle, new haystack
    assert len(list((private_cache / "datasets").glob("*.jsonl"))) == 2


@pytest.mark.slow  # ~20 s (rebuilds a haystack)
def test_a_torn_haystack_cache_is_rebuilt_with_a_warning(data_dir, smol_tokenizer, private_cache):
    task = build_task(TaskSpec(task="ruler/niah_single_2"))
    (a,) = datasets.generate(task, length=512, indices=[0], seed=1, ctx=ctx_for(smol_tokenizer, data_dir), use_cache=False)
    (npy,) = (private_cache / "haystacks").glob("*.npy")
    npy.write_bytes(npy.read_bytes()[: npy.stat().st_size // 2])  # a crash in the middle of an old, non-atomic write
    with pytest.warns(UserWarning, match="corrupt cache entry"):
        (b,) = datasets.generate(task, length=512, indices=[0], seed=1, ctx=ctx_for(smol_tokenizer, data_dir), use_cache=False)
    assert b.prompt == a.prompt
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rebuilt entry is whole: no second warning
        (c,) = datasets.generate(task, length=512, indices=[0], seed=1, ctx=ctx_for(smol_tokenizer, data_dir), use_cache=False)
    assert c.prompt == a.prompt


@pytest.mark.parametrize("content", ["", "   \n\n", "too few words here"])
def test_empty_or_tiny_essays_are_refused(content, tmp_path, smol_tokenizer, private_cache):
    folder = tmp_path / "essays"
    folder.mkdir()
    for i in range(3):
        (folder / f"e{i}.txt").write_text(content)
    task = essay_task(folder)
    with pytest.raises(ConfigError, match=r"essays: .* holds \d+ words; a haystack needs at least"):
        task.prepare(ctx_for(smol_tokenizer))


def test_qa_files_that_are_not_the_official_format_are_refused(tmp_path, smol_tokenizer, private_cache):
    bad = tmp_path / "dev.json"
    for text, message in (("{", "not valid JSON"), ('{"data": [{"paragraphs": [{"qas": []}]}]}', "squad format"),
                          ('{"data": []}', "no usable questions")):
        bad.write_text(text)
        task = build_task(TaskSpec(task="ruler/qa_1", args={"data_file": str(bad)}))
        with pytest.raises(ConfigError, match=message):
            task.prepare(ctx_for(smol_tokenizer))
