"""NIAH depth grids and JSON key-value retrieval."""

import json
import os

import pytest

from ctxbench.harness.core import registry
from ctxbench.tasks.kv.task import format_records


def _gen(name, gen_ctx, length, indices, **args):
    task = registry.get("task", name)(**args)
    return task, [task.generate(length=length, index=i, seed=1, ctx=gen_ctx) for i in indices]


@pytest.mark.parametrize("length", [1024, 4096])
def test_grid_cells_realise_requested_depths(gen_ctx, length):
    task, samples = _gen("niah/single", gen_ctx, length, range(5), depths=5)
    assert task.samples_per_length() == 5
    for s, want in zip(samples, [0, 25, 50, 75, 100]):
        assert s.meta["depth"] == want
        (got,) = s.depths
        assert abs(got - want) <= 5, (want, got)  # nearest sentence boundary
        assert s.prompt_tokens + s.max_new_tokens <= length
        assert s.answers[0] in s.prompt and "One of the special magic numbers for " in s.prompt


def test_grid_prompts_share_the_haystack_prefix(gen_ctx):
    _, samples = _gen("niah/single", gen_ctx, 2048, range(3), depths=[30, 60, 90])
    shallow = samples[0].prompt
    needle_at = shallow.index("One of the special magic")
    common = os.path.commonprefix([s.prompt for s in samples])
    assert len(common) >= needle_at - 2  # everything before the first needle is shared


def test_multi_needle_spreads_and_scores_recall(gen_ctx):
    _, (s,) = _gen("niah/multi", gen_ctx, 2048, [0], depths=[20], num_needles=3)
    assert len(s.answers) == 3 and len(s.depths) == 3
    assert s.depths == tuple(sorted(s.depths)) and s.depths[0] < 30 and s.depths[-1] > 80
    from ctxbench.harness.core.metrics import string_match_all

    assert string_match_all(" ".join(s.answers[:2]), s.answers) == pytest.approx(2 / 3)


def test_kv_gold_position_and_format(gen_ctx):
    task, samples = _gen("kv/retrieval", gen_ctx, 2048, range(3), positions=[0.0, 0.5, 1.0])
    for s, frac in zip(samples, [0.0, 0.5, 1.0]):
        body = s.prompt[s.prompt.index("{"): s.prompt.rindex("}") + 1]
        records = json.loads(body)
        keys = list(records)
        gold_key = s.prompt.split('Key: "')[1].split('"')[0]
        assert records[gold_key] == s.answers[0]
        assert keys.index(gold_key) == s.meta["position"] == round(frac * (len(keys) - 1))
        assert s.prompt_tokens + s.max_new_tokens <= 2048 and s.prompt_tokens + s.max_new_tokens >= 0.97 * 2048


def test_kv_fixed_pairs(gen_ctx):
    _, (s,) = _gen("kv/retrieval", gen_ctx, 8192, [0], num_pairs=75, positions=[0.5])
    assert s.meta["num_pairs"] == 75 and s.meta["position"] == 37
    assert format_records([("a", "b"), ("c", "d")]) == '{"a": "b",\n "c": "d"}'


def test_kv_too_many_pairs_for_length_is_clear(gen_ctx):
    from ctxbench.harness.core.errors import ConfigError

    with pytest.raises(ConfigError, match="raise the length"):
        _gen("kv/retrieval", gen_ctx, 1024, [0], num_pairs=300)


def test_grid_samples_sharing_a_haystack_share_a_cluster(gen_ctx):
    """The depths of one draw move the same needle through the same haystack: one cluster; another draw, another."""
    _, samples = _gen("niah/single", gen_ctx, 1024, range(4), depths=[25, 75])
    ids = [s.meta["cluster"] for s in samples]  # indices 0, 1: draw 0; indices 2, 3: draw 1
    assert ids[0] == ids[1] and ids[2] == ids[3] and ids[0] != ids[2]
    assert all(i.startswith("niah/single:") for i in ids)
    _, (kv,) = _gen("kv/retrieval", gen_ctx, 1024, [0])
    assert "cluster" not in kv.meta  # every kv sample draws its own pairs
