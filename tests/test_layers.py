"""The package holds together: ctxbench.* names everywhere, layers without cycles, each helper written once."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[1]
TOPS = ("harness", "tasks", "trainers", "leaderboard")

# Which layers a layer may import. The core imports only itself; backends, tasks, trainers and leaderboard
# build on the core (trainers may reuse tasks' data loaders); the run engine (harness/run/) builds on the core, the
# backends and the tasks, never on the leaderboard or the CLI (the statistics both need are in harness/core/stats/);
# the CLI and orchestration ("top") use anything.
ALLOWED = {
    "core": {"core"},
    "backends": {"core", "backends"},
    "tasks": {"core", "tasks"},
    "leaderboard": {"core", "leaderboard"},
    "trainers": {"core", "tasks", "trainers"},
    "engine": {"core", "backends", "tasks", "engine"},
    "top": {"core", "backends", "tasks", "trainers", "leaderboard", "engine", "top"},
}


# The one cached model client lives with the backends but imports only the core, so tasks (the LLM judge) and
# trainers (data synthesis) use it as they use the core; counted as core, it is held to importing only the core.
CORE_LEVEL = {"ctxbench.harness.backends.client"}


def layer(module: str) -> str:
    parts = module.split(".")
    if parts[:3] == ["ctxbench", "harness", "core"] or module in CORE_LEVEL:
        return "core"
    if parts[:3] == ["ctxbench", "harness", "backends"]:
        return "backends"
    if parts[:3] == ["ctxbench", "harness", "run"]:
        return "engine"
    if parts[1] in ("tasks", "trainers", "leaderboard"):
        return parts[1]
    return "top"


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return "ctxbench." + ".".join(parts)


def source_files(*tops: str) -> list[Path]:
    return sorted(p for top in tops for p in (REPO / top).rglob("*.py") if "__pycache__" not in p.parts)


def imported(path: Path) -> list[tuple[int, str]]:
    """Every module imported anywhere in the file (function-level lazy imports too), relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((node.lineno, mod))
            # `from ctxbench.harness import study` imports the module ctxbench.harness.study
            out += [(node.lineno, f"{mod}.{a.name}") for a in node.names
                    if (REPO / Path(*mod.split(".")[1:]) / f"{a.name}.py").exists()
                    or (REPO / Path(*mod.split(".")[1:]) / a.name / "__init__.py").exists()]
    return out


def test_every_import_uses_the_ctxbench_namespace():
    bad = []
    for path in source_files(*TOPS, "tests", "benchmarks"):
        for line, mod in imported(path):
            if mod.split(".")[0] in TOPS:
                bad.append(f"{path.relative_to(REPO)}:{line}: import {mod} (use ctxbench.{mod})")
    assert not bad, "\n".join(bad)


def test_layers_import_only_what_they_build_on():
    bad = []
    for path in source_files(*TOPS):
        me = module_name(path)
        for line, mod in imported(path):
            if mod.startswith("ctxbench.") and mod not in ("ctxbench.configs",):
                if layer(mod) not in ALLOWED[layer(me)]:
                    bad.append(f"{path.relative_to(REPO)}:{line}: {layer(me)} imports {mod} ({layer(mod)})")
    assert not bad, "\n".join(bad)


def test_the_layer_check_catches_a_violation(tmp_path):
    """The walk sees a lazy import inside a function, so a core module reaching into tasks would fail."""
    fake = REPO / "harness" / "core" / "_layer_probe.py"
    try:
        fake.write_text("def f():\n    from ctxbench.tasks.base import Task\n    return Task\n")
        found = [mod for _, mod in imported(fake)]
        assert "ctxbench.tasks.base" in found and layer("ctxbench.tasks.base") not in ALLOWED[layer(module_name(fake))]
    finally:
        fake.unlink()


@pytest.mark.parametrize("module", ["ctxbench.leaderboard.stats", "ctxbench.harness.cli", "ctxbench.harness.commands.plan",
                                    "ctxbench.harness.summary", "ctxbench.harness.studies.run"])
def test_the_engine_may_not_import_the_board_or_the_cli(module):
    """The engine (harness/run/) is its own layer: an import of the leaderboard or the CLI from it fails the walk."""
    assert layer("ctxbench.harness.run.runner") == "engine"
    assert layer(module) not in ALLOWED["engine"]


def test_every_package_directory_is_installed():
    """pyproject lists packages explicitly (the namespace mapping needs it): a new package must be added there."""
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    found = {module_name(p) for top in TOPS for p in (REPO / top).rglob("__init__.py") if "__pycache__" not in p.parts}
    assert found - listed == set(), f"add to [tool.setuptools] packages: {sorted(found - listed)}"
    assert {"ctxbench.configs"} | found == listed


# Helpers that once existed in several hand-written copies; each must now exist once (issue: one package).
ONCE = {
    r"def (atomic_write|write_atomic|_atomic_save)\b": "harness/core/io.py",
    r"def (_?jsonable|_plain)\b": "harness/core/io.py",
    r"def _?lm_eval_version\b": None,  # provenance.version("lm_eval") replaces it
    r"def parse_length\b": "harness/core/lengths.py",
    r"re\.sub\(r\"\[\^A-Za-z0-9_\.-\]\+\"": None,  # core.io.slug
    r"(BarColumn|MofNCompleteColumn)\(": "harness/core/progress.py",
    r"os\.O_APPEND": "harness/core/io.py",
}


@pytest.mark.parametrize("pattern", sorted(ONCE))
def test_shared_helpers_exist_once(pattern):
    where = [str(p.relative_to(REPO)) for p in source_files(*TOPS) if re.search(pattern, p.read_text())]
    expected = [ONCE[pattern]] if ONCE[pattern] else []
    assert where == expected, f"{pattern}: found in {where}; call the one in {ONCE[pattern] or 'ctxbench.harness.core'}"


def test_temp_then_rename_is_written_once():
    """Atomic writes go through core.io: no other module renames a temp file into place by hand."""
    pattern = re.compile(r"os\.replace\(|\.replace\((tmp|dest)\b|\btmp\.rename\(")
    where = [str(p.relative_to(REPO)) for p in source_files(*TOPS) if pattern.search(p.read_text())]
    assert where == ["harness/core/io.py"], where
