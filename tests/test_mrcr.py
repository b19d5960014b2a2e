"""MRCR: OpenAI's grader on hand-made hard cases, the official file format (parquet and .jsonl), and items binned by
their real size under the scored model's tokenizer (tasks/length_bins.py)."""

from __future__ import annotations

import json

import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.prompting import PromptRenderer
from ctxbench.tasks.length_bins import bin_edges, in_bin
from ctxbench.tasks.mrcr.task import grade

P = "aZ3kQ9"
BODY = "A tapir dreams\nof rivers."
LONG_ANSWER = "Tapirs wander " + "in the quiet green forest, " * 10
LONG_RESPONSE = "Tapirs wander " + "in quiet forests, green and still. " * 3

# (response, answer, the official grade): values from the dataset card's `grade` (prefix gate, removeprefix on both,
# SequenceMatcher(None, response, answer).ratio()); each is one a plausible re-implementation gets wrong.
PARITY = [
    (P + BODY, P + BODY, 1.0),
    (BODY, P + BODY, 0.0),  # the prefix missing: 0 even though the rest is the answer
    (" " + P + BODY, P + BODY, 0.0),  # no strip: a leading space before the prefix is a miss
    (P.lower() + BODY, P + BODY, 0.0),  # the prefix is case-sensitive
    (P + "Something else entirely.", P + BODY, 0.20408163265306123),  # prefix right, answer wrong: partial credit
    (P, P + BODY, 0.0),  # the prefix alone
    (P, P, 1.0),  # both empty after the prefix: difflib calls two empty strings equal
    (P + BODY + "\n", P + BODY, 0.9803921568627451),  # a trailing newline costs a little, is not stripped
    (P + P + BODY, P + BODY, 0.8928571428571429),  # removeprefix removes the prefix once
    (P + BODY, BODY, 1.0),  # an answer without the prefix is compared as it is
    (P + LONG_RESPONSE, P + LONG_ANSWER, 0.08436724565756824),  # response first: the swapped ratio is 0.243 (autojunk)
]


@pytest.mark.parametrize("response,answer,official", PARITY)
def test_grade_matches_openai_grader(response, answer, official):
    assert grade(response, answer, P) == pytest.approx(official, abs=1e-12)


def test_bins_are_openai_ranges():
    assert bin_edges(8192) == (4096, 8192) and bin_edges(16384) == (8193, 16384)  # MRCR's first bin is closed
    assert bin_edges(1 << 20) == (524289, 1 << 20)
    assert in_bin(131073, 262144) and not in_bin(131072, 262144) and in_bin(131072, 131072)


def conversation(k: int, turns: int = 3) -> list[dict[str, str]]:
    """A hand-made MRCR-like conversation whose size grows with k."""
    out = []
    for t in range(turns):
        out += [{"role": "user", "content": f"write a poem about tapirs ({t})"},
                {"role": "assistant", "content": f"Poem {t}. " + "Tapirs dream of rivers and of rain. " * k}]
    return [*out, {"role": "user", "content": "Prepend XYZ to the 2nd (1 indexed) poem about tapirs."}]


def items(sizes) -> list[dict]:
    return [{"prompt": json.dumps(conversation(k)), "answer": f"XYZPoem {i}", "random_string_to_prepend": "XYZ",
             "n_needles": 2, "desired_msg_index": 3, "total_messages": 7, "n_chars": len(json.dumps(conversation(k)))}
            for i, k in enumerate(sizes)]


def write_parquet(path, rows, row_group_size=2):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=row_group_size)


SIZES = [2, 30, 4, 60, 10, 3, 120]  # conversations from ~150 to ~3000 tokens, bins out of order


@pytest.fixture()
def ctx(smol_tokenizer, tmp_path, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    return GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer, "plain"), data_dir=tmp_path)


def test_parquet_items_binned_by_real_size_in_official_order(ctx, tmp_path):
    rows = items(SIZES)
    write_parquet(tmp_path / "mrcr" / "2needle" / "2needle_0.parquet", rows[:4])
    write_parquet(tmp_path / "mrcr" / "2needle" / "2needle_1.parquet", rows[4:])
    task = registry.get("task", "mrcr/2needle")(max_new_tokens=32)
    sizes = [task.size(i, ctx) for i in range(len(rows))]
    for length in (512, 1024, 2048, 4096):
        expected = [i for i, n in enumerate(sizes) if length // 2 < n <= length]
        assert task.samples_at(length, ctx) == len(expected)
        got = [task.generate(length=length, index=j, seed=0, ctx=ctx) for j in range(len(expected))]
        assert [s.meta["row"] for s in got] == expected
        for s in got:  # the sample carries its bin as the length and its real size as the prompt
            assert s.length == length and s.prompt_tokens + 32 == sizes[s.meta["row"]] <= length
            assert s.turns[0] == ("user", "write a poem about tapirs (0)") and s.user_text.startswith("Prepend XYZ")
            assert task.score("XYZ" + s.answers[0][3:], s) == 1.0 and task.score(s.answers[0][3:], s) == 0.0
    with pytest.raises(ConfigError, match="out of range; the bin of length 512"):
        task.generate(length=512, index=task.samples_at(512, ctx), seed=0, ctx=ctx)


def test_prefilter_never_tokenises_items_far_outside_the_bin(ctx, tmp_path):
    rows = items([2, 3, 2, 400, 3])  # one ~10K-token conversation among small ones
    write_parquet(tmp_path / "mrcr" / "2needle" / "2needle_0.parquet", rows)
    task = registry.get("task", "mrcr/2needle")(max_new_tokens=32)
    seen = []
    size = task.size
    task.size = lambda i, c: seen.append(i) or size(i, c)  # type: ignore[method-assign]
    assert task.samples_at(256, ctx) == 4  # the small ones take 150-190 tokens
    assert 3 not in seen  # its characters alone place it far past 256 tokens


def test_jsonl_copy_needles_and_bad_data(ctx, tmp_path):
    folder = tmp_path / "copy" / "4needle"
    folder.mkdir(parents=True)
    (folder / "part.jsonl").write_text("\n".join(json.dumps({k: v for k, v in r.items() if k != "n_chars"}) for r in items([2, 3])))
    task = registry.get("task", "mrcr")(needles=4, data_path=str(tmp_path / "copy"), max_new_tokens=32)
    assert task.name == "mrcr/4needle" and task.samples_at(256, ctx) == 2
    with pytest.raises(ConfigError, match="has no 2needle"):
        registry.get("task", "mrcr/2needle")(data_path=str(tmp_path / "copy")).prepare(ctx)
    with pytest.raises(ConfigError, match="needles: mrcr/8needle has 8"):
        registry.get("task", "mrcr/8needle")(needles=2)
    (folder / "part.jsonl").write_text(json.dumps({"prompt": "[]", "answer": "x"}))
    with pytest.raises(ConfigError, match="random_string_to_prepend"):
        registry.get("task", "mrcr")(needles=4, data_path=str(tmp_path / "copy")).prepare(
            GenContext(ctx.tokenizer, ctx.renderer, data_dir=tmp_path))  # a new run (a context reads its data once)


def test_score_plans_each_bin_by_its_items(ctxbench, tmp_path, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    write_parquet(tmp_path / "data" / "mrcr" / "2needle" / "2needle_0.parquet", items(SIZES))
    (tmp_path / "suite.yaml").write_text("name: mrcr-small\nlengths: [256, 512, 4096]\nsamples: 2\n"
                                         "tasks:\n  - {task: mrcr/2needle, args: {max_new_tokens: 32}}\n")
    code, _, err = ctxbench("score", "--suite", str(tmp_path / "suite.yaml"), "--backend", "echo", "--data-dir",
                            str(tmp_path / "data"), "--store", str(tmp_path / "runs"))
    assert code == 0, err
    record = json.loads(next((tmp_path / "runs").rglob("record.json")).read_text())
    # under the chat template the items take 211, 967, 265, 1777, 427, 238 and 3397 tokens with their answer budget
    assert record["plan"]["mrcr/2needle"] == {"256": 2, "512": 2, "4096": 1}
    rows = [json.loads(line) for f in (tmp_path / "runs").rglob("*.jsonl") for line in f.read_text().splitlines()]
    rows = [r for r in rows if r.get("task") == "mrcr/2needle"]
    assert len(rows) == 5 and all(r["score"] is not None and r["prompt_tokens"] + 32 <= r["length"] for r in rows)
