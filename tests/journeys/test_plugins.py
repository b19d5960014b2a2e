"""Journey (issue 23, plugins): a third-party distribution adds a task with a required argument and a named suite.
`ctxbench tasks` lists the task with its arguments (no traceback); `ctxbench score --suite <the plugin's suite>` runs it
and record.json names the plugin's distribution and version; a second, broken plugin costs one warning line at most."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

PLUGIN = '''
"""A plugin: task journey/echo_word (a required argument, `word`) and suite journey-quick."""
from pathlib import Path

from pydantic import Field

from ctxbench.harness.core.registry import register
from ctxbench.tasks.base import Task, TaskArgs


class EchoWordArgs(TaskArgs):
    word: str = Field(description="the word the prompt asks for")
    tokens_to_generate: int = Field(4, ge=1, description="answer budget")


class EchoWord(Task):
    Args = EchoWordArgs
    category = "retrieval"
    summary = "say one given word"

    def generate(self, *, length, index, seed, ctx):
        rendered = ctx.renderer.render(f"Say {self.args.word}.", "Answer:")
        return self.make_sample(length=length, index=index, text=rendered, tokens=ctx.count(rendered),
                                answers=[self.args.word])


@register("task", "journey/echo_word", args=EchoWordArgs)
def echo_word(**args):
    return EchoWord("journey/echo_word", EchoWordArgs(**args))


@register("suite", "journey-quick")
def journey_quick():
    return Path(__file__).with_name("journey_quick.yaml")
'''

SUITE = """
name: journey-quick
lengths: [256]
samples: 2
tasks: [{task: journey/echo_word, args: {word: amber}}]
"""


def _dist(site: Path, name: str, version: str, entry: str, module: str, source: str) -> None:
    """An installed distribution as importlib.metadata finds it: a module and its .dist-info (no pip needed)."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[ctxbench.plugins]\n{entry} = {module}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(source))


@pytest.fixture
def plugin_env(tmp_path) -> dict[str, str]:
    site = tmp_path / "site"
    _dist(site, "ctxbench-journey-plugin", "1.2.3", "journey", "journey_plugin", PLUGIN)
    (site / "journey_quick.yaml").write_text(SUITE)
    _dist(site, "ctxbench-broken-plugin", "0.0.1", "broken", "broken_plugin", "import no_such_module_anywhere\n")
    return {"PYTHONPATH": str(site)}


def test_a_plugin_task_with_a_required_argument_is_listed_with_it(user, plugin_env):
    r = user.run("ctxbench tasks", env=plugin_env)
    assert r.code == 0, r.err
    line = next(x for x in r.out.splitlines() if x.startswith("journey/echo_word"))
    assert "needs argument word" in line
    assert "Traceback" not in r.err
    warnings = [x for x in r.err.splitlines() if x.strip()]
    assert len(warnings) == 1 and "broken" in warnings[0] and "no_such_module_anywhere" in warnings[0]  # one line

    one = user.run("ctxbench tasks journey/echo_word", env=plugin_env)
    assert one.code == 0, one.err
    word = next(x for x in one.out.splitlines() if x.split()[:1] == ["word"])
    assert "str" in word and "(required)" in word


def test_a_plugin_suite_scores_and_the_record_names_the_plugin(user, plugin_env):
    r = user.run("ctxbench score --suite journey-quick --backend echo --store runs", env=plugin_env)
    assert r.code == 0, r.err
    (record,) = (user.cwd / "runs").glob("*/record.json")
    used = json.loads(record.read_text())["plugins"]
    assert {"kind": "task", "name": "journey/echo_word", "distribution": "ctxbench-journey-plugin", "version": "1.2.3"} in used
    assert {"kind": "suite", "name": "journey-quick", "distribution": "ctxbench-journey-plugin", "version": "1.2.3"} in used
    assert all(u["distribution"] != "ctxbench-broken-plugin" for u in used)
    listed = user.run("ctxbench suites", env=plugin_env)
    assert listed.code == 0 and "journey-quick  1 tasks at [256] (plugin ctxbench-journey-plugin)" in listed.out


CLASH = '''
"""A plugin that takes ctxbench's own names (task niah/single, backend echo) beside one of its own."""
from ctxbench.harness.core.registry import register


@register("task", "clash/extra")
def extra(**args):
    raise AssertionError("never built: the plugin is unloaded whole")


@register("task", "niah/single")
def niah_single(**args):
    raise AssertionError("ctxbench's own niah/single stays")


@register("backend", "echo")
def echo(**args):
    raise AssertionError("ctxbench's own echo stays")
'''


@pytest.fixture
def clash_env(tmp_path) -> dict[str, str]:
    site = tmp_path / "clash-site"
    _dist(site, "ctxbench-clash-plugin", "0.3.0", "clash", "clash_plugin", CLASH)
    return {"PYTHONPATH": str(site)}


def _one_clash_line(err: str) -> None:
    lines = [x for x in err.splitlines() if x.strip()]
    clash = [x for x in lines if "ctxbench-clash-plugin" in x]
    assert len(clash) == 1 and "Traceback" not in err, err  # one line, whatever the command
    assert "ctxbench already registers" in clash[0] and "was not loaded" in clash[0], clash[0]


def test_a_plugin_that_takes_ctxbench_names_is_one_line_in_every_command(user, clash_env, data_dir):
    """Issue 32 Medium 6: the clash is one line naming both distributions in tasks, study and score; the plugin is
    unloaded whole (its own task is gone too) and ctxbench's entries stay."""
    tasks = user.run("ctxbench tasks", env=clash_env)
    assert tasks.code == 0
    _one_clash_line(tasks.err)
    assert "clash/extra" not in tasks.out and "niah/single" in tasks.out

    study = user.run("ctxbench study configs/studies/cpu-stdlib.yaml --check", env=clash_env)
    assert study.code == 0, study.err
    _one_clash_line(study.err)

    score = user.run("ctxbench score --backend echo --tasks niah/single --lengths 512 --samples 1", env=clash_env)
    assert score.code == 0, score.err
    _one_clash_line(score.err)
