"""Modules import alone, and importing one RULER family does not drag in the package's others (issue 23: the cycle
through tasks/ruler/__init__)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

RULER = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "tasks" / "ruler").glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("module", [*(f"ctxbench.tasks.ruler.{m}" for m in RULER), "ctxbench.tasks.kv.task",
                                    "ctxbench.tasks.infinitebench.synth", "ctxbench.trainers.logo.chunks"])
def test_each_module_imports_alone(module):
    r = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


def test_the_ruler_package_imports_none_of_its_modules():
    code = "import sys, ctxbench.tasks.kv.task; print(sorted(m for m in sys.modules if m.startswith('ctxbench.tasks.ruler.')))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["['ctxbench.tasks.ruler.needle_pool',", "'ctxbench.tasks.ruler.niah',",
                                "'ctxbench.tasks.ruler.uuid_costs']"]
