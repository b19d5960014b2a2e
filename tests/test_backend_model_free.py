""""Model-free" and "batch-dependent" are traits a backend declares when it registers (issue 33), not closed tables of
backend names: a plugin backend that answers without the model is filed and named apart from the model as echo is,
and a plugin batching engine gets the same session note as vllm."""

from __future__ import annotations

import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.types import board_name, model_free, run_fingerprint

WEIGHTS = "sha256:" + "ab" * 32


def test_in_tree_backends_declare_what_they_are():
    shipped = [n for n, fn in registry.entries("backend").items() if fn.__module__.startswith("ctxbench.harness.backends")]
    assert {n for n in shipped if registry.backend_traits(n).model_free} == {"echo"}
    assert {n for n in shipped if registry.backend_traits(n).batch_dependent} == {"vllm"}


def test_a_plugin_backend_that_declares_model_free_is_filed_and_named_apart(scratch):
    scratch.register("backend", "parrot", model_free=True)(lambda **kw: None)
    scratch.register("backend", "mimic")(lambda **kw: None)  # declares nothing: a model's backend
    assert model_free("parrot") and not model_free("mimic") and model_free("echo")
    assert run_fingerprint("parrot", WEIGHTS) == f"parrot:{WEIGHTS}" == run_fingerprint("parrot", f"parrot:{WEIGHTS}")
    assert run_fingerprint("mimic", WEIGHTS) == WEIGHTS
    assert board_name("", "parrot", "smollm2-135m") == "parrot(smollm2-135m)"
    assert board_name("smollm2-135m", "mimic", "smollm2-135m") == "smollm2-135m"


def test_a_backend_no_one_registers_is_not_model_free():
    """A store written by a plugin that is no longer installed is read, not refused: its rows stay the model's."""
    assert not model_free("never-installed") and not model_free("") and not model_free("lmeval:hf")
    assert run_fingerprint("never-installed", WEIGHTS) == WEIGHTS


def test_a_trait_of_the_wrong_type_is_refused(scratch):
    with pytest.raises(ValueError, match="model_free='yes'; give True if its answers never come from the model"):
        scratch.register("backend", "parrot", model_free="yes")


def test_a_batch_dependent_plugin_backend_gets_the_session_note(scratch):
    from types import SimpleNamespace

    from ctxbench.harness.run.runner import execution

    scratch.register("backend", "batcher", batch_dependent=True)(lambda **kw: None)
    scratch.register("backend", "plain")(lambda **kw: None)

    def plan(backend):
        return SimpleNamespace(backend=backend, until=None, execution_args=lambda: {})

    assert "batch_dependent" in execution(plan("batcher"), {}, [])
    assert "batch_dependent" not in execution(plan("plain"), {}, [])


def test_a_backend_object_handed_in_needs_no_registration():
    """A test or notebook passes a backend object under a name no one registers: its session is recorded, not refused."""
    from types import SimpleNamespace

    from ctxbench.harness.run.runner import execution

    plan = SimpleNamespace(backend="stub", until=None, execution_args=lambda: {})
    assert "batch_dependent" not in execution(plan, {}, [])


def test_a_model_free_backend_without_its_own_fingerprint_is_filed_apart(scratch):
    """The run's identity files it as the store's resume check and the board read it (`NAME:...`): before, a plugin
    backend that declared model_free but had no fingerprint() was refused on resume ("a different model fingerprint")."""
    from types import SimpleNamespace

    from ctxbench.harness.run.planning import model_fingerprint

    scratch.register("backend", "parrot", model_free=True)(lambda **kw: None)
    assert model_fingerprint(SimpleNamespace(name="parrot"), "no-such-model-dir") == "parrot:name:no-such-model-dir"
    assert model_fingerprint(SimpleNamespace(name="hf"), "no-such-model-dir") == "name:no-such-model-dir"
    echo = SimpleNamespace(name="echo", fingerprint=lambda: f"echo:{WEIGHTS}")  # one that says so itself: unchanged
    assert model_fingerprint(echo, "smollm2-135m") == f"echo:{WEIGHTS}"


def test_thinking_is_refused_where_the_backend_declared_it_has_none(scratch):
    """`--thinking on` was refused by name (`backend.startswith("lmeval")`); now by what a backend declared."""
    from ctxbench.harness.cli_generation import generation
    from ctxbench.harness.core.errors import ConfigError

    scratch.register("backend", "plain_lm", thinking=False)(lambda **kw: None)

    def protocol(backend):
        return generation(thinking="on", max_thinking_tokens=None, system_prompt=None, gen_kwargs=None, repeats=1,
                          backend=backend)

    for backend in ("plain_lm", "lmeval:hf"):
        with pytest.raises(ConfigError, match=rf"--thinking: backend {backend} has no thinking budget or reasoning "
                                              r"split; use --backend .*echo.*hf"):
            protocol(backend)
    assert protocol("echo").thinking == "on" and protocol("never-registered").thinking == "on"
    assert not registry.backend_traits("lmeval").thinking and registry.backend_traits("hf").thinking
