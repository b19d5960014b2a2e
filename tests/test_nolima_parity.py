"""NoLiMa at parity with its official code as it runs (adobe-research/NoLiMa at commit
7532e4eebf095c5540dc256900a63968da58a9d0): evaluation/async_api_connector.py sends the system message
"You are a helpful assistant" (no period) on every call for the openai, azure-openai, vllm and gemini providers
(generate_response's add_default_system_prompt defaults to True, and run_tests.py's use_default_system_prompt only
changes what is logged), so ctxbench sends it by default, as a recorded task argument. run_tests.py seeds a book's
characters with base_seed + the entry's id + the book's position in os.listdir(haystack_dir): ctxbench uses the
sorted position unless `listing` gives the official run's. The literals were read from the official files. No network."""

from __future__ import annotations

import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.prompting import PromptRenderer
from ctxbench.tasks.nolima.task import character_at
from tests.realdata.test_nolima import ENTRY, nolima_dir  # noqa: F401 - the fixture

OFFICIAL_SYSTEM_PROMPT = "You are a helpful assistant"  # APIConnector.SYSTEM_PROMPT (openai, azure-openai, vllm, gemini)


def samples(tokenizer, data_dir, system=None, **args):
    ctx = GenContext(tokenizer, PromptRenderer(tokenizer, "plain", system=system), data_dir=data_dir)
    task = registry.get("task", "nolima/needles")(books=[1, 2], depths=2, question_types=["onehop"], **args)
    return task, [task.generate(length=1024, index=i, seed=0, ctx=ctx) for i in range(4)]


def test_the_official_system_message_is_sent_by_default(smol_tokenizer, nolima_dir, monkeypatch):  # noqa: F811
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    task, made = samples(smol_tokenizer, nolima_dir)
    assert task.args_json()["system_prompt"] == OFFICIAL_SYSTEM_PROMPT  # a task argument: in the run's identity
    for s in made:
        assert s.turns == (("system", OFFICIAL_SYSTEM_PROMPT),)  # chat APIs get it as a system message
        assert s.prompt.startswith(OFFICIAL_SYSTEM_PROMPT + "\n\n") and s.meta["system_prompt"] == OFFICIAL_SYSTEM_PROMPT
        assert s.prompt_tokens + 192 <= 1024  # counted inside the length


def test_the_system_message_can_be_turned_off_or_replaced_by_the_runs(smol_tokenizer, nolima_dir, monkeypatch):  # noqa: F811
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    _, off = samples(smol_tokenizer, nolima_dir, system_prompt=None)
    assert all(s.turns == () and s.prompt.startswith("You will answer a question") for s in off)
    _, run = samples(smol_tokenizer, nolima_dir, system="Be brief.")
    assert all(s.prompt.startswith("Be brief.\n\n") and OFFICIAL_SYSTEM_PROMPT not in s.prompt for s in run)


def test_book_seeds_follow_the_listing_position(smol_tokenizer, nolima_dir, monkeypatch):  # noqa: F811
    """run_tests.py: seed = base_seed + int(id[:4]) + haystack_no, haystack_no the index in os.listdir. ext4 listed
    rand_book_1..5 here as [4, 5, 3, 1, 2]: with that listing book 2 is at position 4, not 1."""
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    _, sorted_order = samples(smol_tokenizer, nolima_dir)
    _, listed = samples(smol_tokenizer, nolima_dir, listing=[4, 5, 3, 1, 2])
    chars = ENTRY["character_set"]
    assert [s.answers[0] for s in sorted_order] == [character_at(chars, 42 + 401 + p, d) for p in (0, 1) for d in (0, 1)]
    assert [s.answers[0] for s in listed] == [character_at(chars, 42 + 401 + p, d) for p in (3, 4) for d in (0, 1)]
    with pytest.raises(ValueError, match="listing: give each of the books 1..5 once"):
        registry.get("task", "nolima/needles")(listing=[1, 2])
