"""Registry entries declare their traits when they register (issue 33): a backend's Args, sampling support and
distributions, a task's Args and version, a synthesis method's data and trainer. The checks, `ctxbench backends`, the
--backend help and a record's versions read them, so a backend registered from outside is treated as an in-tree one."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, Field

from ctxbench.harness.cli_generation import generation
from ctxbench.harness.core import registry
from ctxbench.harness.core.errors import ConfigError


class ToyArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    answer: str = Field("x", description="what it says")
    lanes: int = Field(1, ge=1, description="answers at once", json_schema_extra={"execution": True})


def _protocol(backend: str, gen_kwargs: str | None = "temperature=0.7,seed=1"):
    return generation(thinking="off", max_thinking_tokens=None, system_prompt=None, gen_kwargs=gen_kwargs, repeats=1,
                      backend=backend)


def shipped_backends() -> list[str]:
    """ctxbench's own backends (not a plugin's, not one a test conftest registered)."""
    return [n for n, fn in registry.entries("backend").items() if fn.__module__.startswith("ctxbench.harness.backends")]


def test_in_tree_backends_declare_args_and_sampling():
    samples = {n: registry.backend_traits(n).samples for n in shipped_backends()}
    assert samples == {"echo": True, "hf": True, "lmeval": False, "openai": True, "vllm": True}
    assert all(registry.backend_traits(n).args is not None for n in samples)
    assert registry.backend_traits("lmeval:local-completions").name == "lmeval"  # any lm-eval type is lmeval's entry


def test_sampling_is_what_the_backend_declared(scratch):
    scratch.register("backend", "toy_sampler", args=ToyArgs, samples=True)(lambda **kw: None)
    scratch.register("backend", "toy_greedy", args=ToyArgs)(lambda **kw: None)
    assert _protocol("toy_sampler").gen_kwargs == (("seed", 1), ("temperature", 0.7))
    with pytest.raises(ConfigError, match=r"--gen-kwargs: backend toy_greedy decodes greedily only; sample with "
                                          r"--backend .*toy_sampler"):
        _protocol("toy_greedy")
    with pytest.raises(ConfigError, match="--gen-kwargs: backend lmeval:hf decodes greedily only"):
        _protocol("lmeval:hf")


def test_a_declared_args_model_is_checked_before_the_backend_is_built(scratch):
    from ctxbench.harness.backends.args import check_backend_args

    scratch.register("backend", "toy", args=ToyArgs, samples=True)(lambda **kw: pytest.fail("never built"))
    check_backend_args("toy", {"answer": "y", "lanes": 4})
    with pytest.raises(ConfigError, match="lane.*answer, lanes"):
        check_backend_args("toy", {"lane": 4})


def test_a_backends_distributions_join_the_record_versions(scratch, monkeypatch):
    from ctxbench.harness.core import provenance

    before = provenance.distributions()
    assert set(before) == {"ctxbench", "torch", "transformers", "tokenizers", "wonderwords", "vllm", "numpy", "httpx",
                           "lm_eval", "trl", "peft", "datasets"}  # what records named before backends declared them
    scratch.register("backend", "toy", distributions=("toy-sdk",))(lambda **kw: None)
    assert set(provenance.distributions()) == {*before, "toy-sdk"}
    monkeypatch.setattr(provenance, "version", lambda d: "9.9" if d == "toy-sdk" else None)
    assert provenance.versions()["toy-sdk"] == "9.9"


@pytest.mark.parametrize(("kind", "traits", "message"), [
    ("backend", {"sampling": True}, "unknown trait 'sampling'; a backend's traits: args, samples, distributions"),
    ("backend", {"samples": "yes"}, "samples='yes'; give True if it decodes with --gen-kwargs"),
    ("backend", {"args": dict}, "args=<class 'dict'>; give a pydantic model"),
    ("task", {"version": -1}, "version=-1; give an integer >= 0"),
    ("suite", {"args": ToyArgs}, "unknown trait 'args'; a suite's it declares none"),
])
def test_a_trait_of_the_wrong_name_or_type_is_refused_at_registration(scratch, kind, traits, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("'", "'")):
        scratch.register(kind, "toy", **traits)


def test_every_task_declares_the_args_it_is_built_with():
    for name in registry.names("task"):
        assert registry.task_traits(name).args is type(registry.get("task", name)().args), name


def test_a_synthesis_method_declares_any_data_and_its_trainer(scratch):
    from ctxbench.trainers.data import synthesis

    synthesis.register_synthesis("toy_rows", ToyArgs, identity=lambda c: None, produces="rows",
                                 trainer="toy_trainer")(lambda cfg, ident: None)
    spec = synthesis.get_synthesis("toy_rows")
    assert (spec.produces, spec.trainer) == ("rows", "toy_trainer")
    assert registry.info("synthesis", "toy_rows") == {"produces": "rows", "trainer": "toy_trainer"}


def test_backend_help_lists_registered_backends_plugins_included(scratch):
    from typer.testing import CliRunner

    from ctxbench.harness.cli import app

    scratch.register("backend", "toy_plugin_backend", args=ToyArgs)(lambda **kw: None)
    shown = CliRunner().invoke(app, ["score", "--help"], env={"COLUMNS": "400", "NO_COLOR": "1", "TERM": "dumb"})
    assert shown.exit_code == 0, shown.output
    names = registry.names("backend")
    assert "toy_plugin_backend" in names and {"echo", "hf", "lmeval", "openai", "vllm"} <= set(names)
    assert f"registered: {', '.join(names)}" in " ".join(shown.output.split())


def test_backends_command_lists_arguments_and_speed_only_ones(scratch, capsys):
    from ctxbench.harness.commands.catalog import list_backends

    scratch.register("backend", "toy", args=ToyArgs, samples=True)(lambda **kw: None)
    list_backends(None)
    lines = capsys.readouterr().out.splitlines()
    assert any(x.startswith("toy ") and "samples with --gen-kwargs; 2 arguments (speed only: lanes)" in x for x in lines)
    list_backends("toy")
    table = capsys.readouterr().out.splitlines()
    assert any(x.split()[:3] == ["lanes", "int", "1"] and "(speed only) answers at once" in x for x in table), table


def test_a_task_lists_the_args_it_declared_and_says_so_when_it_declared_none(scratch, capsys):
    from ctxbench.harness.commands.catalog import list_tasks

    def needs_word(**args):
        raise RuntimeError("needs a word")

    scratch.register("task", "toy/declared", args=ToyArgs)(needs_word)
    scratch.register("task", "toy/undeclared")(needs_word)
    list_tasks("toy/declared")
    assert any(x.split()[:2] == ["lanes", "int"] for x in capsys.readouterr().out.splitlines())
    list_tasks("toy/undeclared")
    assert "this task declares no Args model (register(\"task\", NAME, args=Model) lists them)" in capsys.readouterr().out
