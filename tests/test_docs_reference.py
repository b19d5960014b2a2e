"""The generated reference pages say what the code says: every CLI option of `--help`, every registered task, every
record field and sample row key (with a meaning), every backend argument."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GENERATOR = REPO / "docs" / "scripts" / "gen_reference.py"


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("reference")
    done = subprocess.run([sys.executable, str(GENERATOR), str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return {p.name: p.read_text() for p in (out / "reference").glob("*.md")}


@pytest.mark.parametrize("command", [["score"], ["board", "build"], ["train"]])
def test_cli_page_has_every_option_of_help(pages: dict[str, str], command: list[str]) -> None:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    done = subprocess.run(["ctxbench", *command, "--help"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    options = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9_-]*", done.stdout))
    section = pages["cli.md"].split(f"## `ctxbench {' '.join(command)}`", 1)[1].split("\n## ", 1)[0]
    missing = sorted(o for o in options if f"`{o}" not in section and f" {o}" not in section and f"/{o}" not in section)
    assert not missing, f"ctxbench {' '.join(command)} --help shows {missing}, the CLI reference does not"


def test_tasks_page_lists_every_registered_task(pages: dict[str, str]) -> None:
    from ctxbench.harness.core import registry

    missing = [n for n in registry.names("task") if f"`{n}`" not in pages["tasks.md"]]
    assert not missing


def test_record_page_describes_every_field_and_row_key(pages: dict[str, str]) -> None:
    from ctxbench.harness.core.types import RunRecord

    page = pages["record.md"]
    assert all(f"| `{f.name}` |" in page for f in dataclasses.fields(RunRecord))
    assert "| `prediction` |" in page and "| `score` |" in page
    undescribed = re.findall(r"^\| `(\w+)` \|.*not described yet", page, re.M)
    assert not undescribed, (f"{undescribed}: give each a comment in harness/core/types.py, or a meaning in "
                             "docs/scripts/gen_reference.py (FIELD_MEANING / ROW_MEANING)")


def test_backend_page_lists_every_argument(pages: dict[str, str]) -> None:
    from ctxbench.harness.core import registry

    shipped = [n for n, fn in registry.entries("backend").items() if fn.__module__.startswith("ctxbench.harness.backends")]
    assert "echo" in shipped and "lmeval" in shipped
    for name in shipped:
        model = registry.backend_traits(name).args
        section = pages["backends.md"].split(f"## `{name}`", 1)[1].split("\n## ", 1)[0]
        assert all(f"| `{key}` |" in section for key in model.model_fields), name
