"""The docs' runnable examples run, and print what the docs show; the plugin example installs and scores.

Convention (CONTRIBUTING.md): in docs/*.md, a line `<!-- run -->` right before a fenced block makes it a runnable
bash block; `<!-- file: NAME -->` before a fenced block writes its content to NAME first; `<!-- output -->` before a
fenced block right after a runnable one is that block's expected stdout. The blocks of one page run in order, in one
temporary directory, with the plugin example installed (pip --target, on PYTHONPATH; the environment is untouched;
once per test run: tests/conftest.py's plugin_site)
and CTXBENCH_DATA_DIR set to ../shared/data. `CTXBENCH_DOCS_UPDATE=1 pytest tests/test_docs_examples.py` rewrites
the expected outputs from the run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
MARKER = re.compile(r"^<!-- (run|output|file: (\S+)) -->\n(```+)[^\n]*\n(.*?)^\3[ \t]*$", re.M | re.S)
RUN_ID = re.compile(r"(runs/[\w.-]+?-)[0-9a-f]{8}\b")
RULE = re.compile(r"([━─═])\1+")  # a table rule's length follows the column widths


@dataclass
class Step:
    kind: str  # "run", "output" or "file"
    body: str
    name: str = ""
    span: tuple[int, int] = (0, 0)  # where the body sits in the page, for CTXBENCH_DOCS_UPDATE


def steps(page: Path) -> list[Step]:
    text = page.read_text()
    return [Step(m.group(1).split(":")[0], m.group(4), m.group(2) or "", m.span(4)) for m in MARKER.finditer(text)]


def pages() -> list[Path]:
    return [p for p in sorted(DOCS.glob("*.md")) if any(s.kind == "run" for s in steps(p))]


def normalise(text: str) -> str:
    """What a reader compares: the words and numbers of each line. Run ids end in a hash of the run's identity, and
    table padding and rule widths follow the terminal, so neither is compared."""
    lines = [" ".join(RULE.sub(r"\1", RUN_ID.sub(r"\1<hash>", line)).split()) for line in text.strip("\n").splitlines()]
    return "\n".join(lines)


def user_env(site: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBENCH_")}
    data = REPO.parent / "shared" / "data"
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")])), COLUMNS="100",
               NO_COLOR="1", TERM="dumb", CTXBENCH_DATA_DIR=str(data) if data.is_dir() else "")
    return env


def run_page(page: Path, cwd: Path, env: dict[str, str]) -> list[tuple[Step, str]]:
    """Run a page's blocks in order; returns (expected output step, actual stdout) pairs."""
    compared, last_out = [], None
    for step in steps(page):
        if step.kind == "file":
            (cwd / step.name).write_text(step.body)
        elif step.kind == "run":
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", step.body], cwd=cwd, env=env, capture_output=True,
                                  text=True, timeout=600)
            assert done.returncode == 0, f"{page.name}: block failed (exit {done.returncode}):\n{step.body}\n{done.stderr[-3000:]}"
            last_out = done.stdout
        elif step.kind == "output":
            assert last_out is not None, f"{page.name}: an output block must follow a runnable block"
            compared.append((step, last_out))
            last_out = None
    return compared


def update(page: Path, compared: list[tuple[Step, str]]) -> None:
    text = page.read_text()
    for step, actual in sorted(compared, key=lambda c: -c[0].span[0]):
        shown = "\n".join(line.rstrip() for line in actual.strip("\n").splitlines())
        text = text[: step.span[0]] + shown + "\n" + text[step.span[1]:]
    page.write_text(text)


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.name)
def test_runnable_examples(page: Path, tmp_path: Path, plugin_site: Path) -> None:
    compared = run_page(page, tmp_path, user_env(plugin_site))
    if os.environ.get("CTXBENCH_DOCS_UPDATE") == "1":
        update(page, compared)
        return
    for step, actual in compared:
        assert normalise(actual) == normalise(step.body), f"{page.name}: the output shown differs from the run"


def test_there_are_runnable_examples() -> None:
    """The convention is in use (a renamed marker would silently run nothing)."""
    assert len(pages()) >= 2


def test_plugin_adds_every_kind(tmp_path: Path, plugin_site: Path) -> None:
    """Installed from docs/examples, the plugin's task, metric, backend, packing method, trainer and suite are registered."""
    code = ("from ctxbench.harness.core import registry as r; "
            "print(*[n for k in ('task', 'metric', 'backend', 'packing', 'trainer', 'suite') for n in r.names(k) "
            "if n.startswith('example')])")  # the plugin's names (a shipped task may contain 'example' elsewhere)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=user_env(plugin_site), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["example/secret_word", "example/first_word", "example_constant", "example_sorted",
                                   "example_tail", "example-secret"]


def test_plugin_task_argument_is_checked(tmp_path: Path, plugin_site: Path) -> None:
    """The plugin task's pydantic argument is validated like a shipped task's: one line, exit 2, nothing written."""
    (tmp_path / "bad.yaml").write_text("name: bad\nlengths: [256]\nsamples: 1\n"
                                       "tasks: [{task: example/secret_word, args: {copies: 0}}]\n")
    done = subprocess.run(["ctxbench", "score", "--suite", "bad.yaml", "--backend", "echo"], cwd=tmp_path,
                          env=user_env(plugin_site), capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "copies" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def yaml_blocks() -> list[tuple[str, str]]:
    blocks = []
    for page in sorted(DOCS.glob("*.md")):
        blocks += [(page.name, m.group(1)) for m in re.finditer(r"^```yaml\n(.*?)^```", page.read_text(), re.M | re.S)]
    return blocks


def test_yaml_examples_are_valid_configs(tmp_path: Path) -> None:
    """Every suite and study shown in the docs loads through the models that validate real config files."""
    import yaml

    from ctxbench.harness.core.config import load_suite
    from ctxbench.harness.studies.config import StudyConfig

    checked = 0
    for i, (page, text) in enumerate(yaml_blocks()):
        data = yaml.safe_load(text)
        if not isinstance(data, dict) or "example/" in text:  # plugin suites run in test_runnable_examples
            continue
        if "methods" in data:
            StudyConfig(**data)
        elif "tasks" in data:
            (tmp_path / f"{i}.yaml").write_text(text)
            load_suite(str(tmp_path / f"{i}.yaml"))
        else:
            continue
        checked += 1
    assert checked >= 2
