"""Modules import alone, and importing one RULER family does not drag in the package's others (issue 23: the cycle
through tasks/ruler/__init__).

"Alone" means as the first ctxbench import of an interpreter: a cycle shows only then. One child interpreter checks
every module, forgetting every ctxbench module (sys.modules) before each, which is that same first import, without a
Python start-up and the third-party imports per module."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

RULER = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "tasks" / "ruler").glob("*.py") if p.stem != "__init__")
MODULES = [*(f"ctxbench.tasks.ruler.{m}" for m in RULER), "ctxbench.tasks.kv.task", "ctxbench.tasks.infinitebench.synth",
           "ctxbench.trainers.logo.chunks"]

EACH_ALONE = """
import importlib, json, sys, traceback

def forget():
    for name in [m for m in sys.modules if m == "ctxbench" or m.startswith("ctxbench.")]:
        del sys.modules[name]

result = {}
for module in json.loads(sys.argv[1]):
    forget()
    try:
        importlib.import_module(module)
        result[module] = {"ok": True, "ruler": sorted(m for m in sys.modules if m.startswith("ctxbench.tasks.ruler."))}
    except BaseException:
        result[module] = {"ok": False, "error": traceback.format_exc()[-2000:]}
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def imported_alone() -> dict[str, dict]:
    """module -> {"ok", "ruler": the ctxbench.tasks.ruler modules it loaded} or {"ok": False, "error"}."""
    r = subprocess.run([sys.executable, "-c", EACH_ALONE, json.dumps(MODULES)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_alone(module, imported_alone):
    assert imported_alone[module]["ok"], imported_alone[module].get("error")


def test_the_ruler_package_imports_none_of_its_modules(imported_alone):
    assert imported_alone["ctxbench.tasks.kv.task"]["ruler"] == ["ctxbench.tasks.ruler.needle_pool",
                                                                 "ctxbench.tasks.ruler.niah",
                                                                 "ctxbench.tasks.ruler.uuid_costs"]
