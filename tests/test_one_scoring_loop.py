"""One scoring loop (issue 33): the engine generates, builds rows and appends them in one place, whatever schedules it.

Before, `runner._score_cells` and `adaptive_run._score_turn` each repeated generate -> row -> append -> count, and
`runner._run_external` appended lm-eval's rows after the loop. Now a schedule (harness/run/full.py,
harness/run/sequential.py, harness/run/external.py) only says what to score next; harness/run/loop.py drives it,
harness/run/batch.py scores a batch and the loop hands an external task's batch to its harness. Read statically over harness/ outside the backends and the core.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# call -> the one module allowed to make it; lm-eval tasks produce their own rows, which the loop appends
ONE_PLACE = {
    "backend.generate": ["harness/run/batch.py"],
    "backend.token_logprobs": ["harness/run/batch.py"],
    "sample_row": ["harness/run/batch.py"],
    "store.append": ["harness/run/loop.py"],
    "task.run_external": ["harness/run/loop.py"],
}


def calls(path: Path) -> set[str]:
    """The dotted names called in a module: `store.append(...)` -> "store.append", `sample_row(...)` -> "sample_row"."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                out.add(func.id)
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                out.add(f"{func.value.id}.{func.attr}")
    return out


def engine_modules() -> list[Path]:
    skip = ("backends", "core")
    return sorted(p for p in (REPO / "harness").rglob("*.py")
                  if "__pycache__" not in p.parts and p.relative_to(REPO / "harness").parts[0] not in skip)


def test_each_scoring_step_is_written_once():
    found: dict[str, list[str]] = {name: [] for name in ONE_PLACE}
    for path in engine_modules():
        for name in calls(path) & set(ONE_PLACE):
            found[name].append(str(path.relative_to(REPO)))
    assert found == ONE_PLACE


def test_every_schedule_is_driven_by_the_one_loop():
    """runner.py appends nothing itself: each schedule it builds (full N, --until, external) goes through drive()."""
    tree = ast.parse((REPO / "harness/run/runner.py").read_text())
    driven = {ast.unparse(c.args[0]) for c in ast.walk(tree) if isinstance(c, ast.Call) and ast.unparse(c.func) == "drive"}
    built = {ast.unparse(c.func) for c in ast.walk(tree) if isinstance(c, ast.Call) and ast.unparse(c.func).endswith("Schedule")}
    assert built == {"SequentialSchedule", "FullSchedule", "ExternalSchedule"} and len(driven) == 3
    assert "store.append" not in calls(REPO / "harness/run/runner.py")
