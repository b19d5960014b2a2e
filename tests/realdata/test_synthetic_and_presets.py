"""InfiniteBench's synthetic tasks generated at any length, and the paper preset suites."""

from __future__ import annotations

import pytest
import yaml

from ctxbench.harness.core import registry
from ctxbench.harness.core.config import Suite, build_task, load_suite, suite_path
from ctxbench.harness.core.errors import ConfigError

PRESETS = ["ruler-paper", "hqa-paper", "logo-paper", "quest-paper", "splice-paper"]


@pytest.mark.parametrize("name,digits", [("infinitebench/passkey_synth", 5), ("infinitebench/number_string_synth", 10),
                                         ("infinitebench/kv_retrieval_synth", None)])
@pytest.mark.parametrize("length", [1024, 2048])
def test_synthetic_tasks_fill_the_length_and_score(gen_ctx, name, digits, length):
    task = registry.get("task", name)(positions=[0.0, 0.5, 1.0], samples_per_position=1)
    assert task.samples_per_length() == 3
    for i in range(3):
        s = task.generate(length=length, index=i, seed=0, ctx=gen_ctx)
        assert s.prompt_tokens + s.max_new_tokens <= length and s.prompt_tokens > 0.85 * length
        assert s.answers[0] in s.prompt and task.score(f" {s.answers[0]}.", s) == 1.0
        if digits:
            assert len(s.answers[0]) == digits and s.answers[0].isdigit()
    assert s.meta["depth"] == 100.0 and s.depths[0] > 90


def test_kv_synth_with_too_many_pairs_is_a_config_error(gen_ctx):
    with pytest.raises(ConfigError, match="raise the length"):
        registry.get("task", "infinitebench/kv_retrieval_synth")(num_pairs=300).generate(length=1024, index=0, seed=0, ctx=gen_ctx)
    with pytest.raises(ConfigError, match="num_pairs"):
        registry.get("task", "infinitebench/passkey_synth")(num_pairs=10)


@pytest.mark.parametrize("preset", PRESETS)
def test_paper_presets_load(preset):
    """Every task builds; lm-eval tasks are another engineer's, so their absence only skips."""
    path = suite_path(preset)  # ruler-paper: tasks/ruler/suites/, the cross-family papers: configs/suites/
    text = path.read_text()
    assert text.startswith("#") and "Section" in text.split("name:")[0]  # a header citing the paper section
    suite = Suite(**yaml.safe_load(text))
    missing = []
    for spec in suite.tasks:
        if spec.task.startswith("lmeval/") and spec.task not in registry.names("task"):
            missing.append(spec.task)
            continue
        build_task(spec)
    if missing:
        pytest.skip(f"lm-eval tasks not registered yet: {', '.join(missing)}")
    assert load_suite(preset).name == preset
