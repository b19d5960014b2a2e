"""Issue 33: a benchmark's suites live with it (tasks/<family>/suites/), the cross-family paper suites in configs/suites/;
`--suite NAME`, the package path and the path a suite had before (configs/suites/NAME.yaml) all find the same file."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxbench.harness.core.config import CONFIG_ROOT, TASKS_ROOT, shipped_suite_files, shipped_suites, suite_path
from ctxbench.harness.core.errors import ConfigError

CROSS_FAMILY = {"hqa-paper", "logo-paper", "quest-paper", "splice-paper"}


def test_each_benchmark_ships_its_suites_and_names_are_unique():
    files = [*(CONFIG_ROOT / "suites").glob("*.y*ml"), *TASKS_ROOT.glob("*/suites/*.y*ml")]
    assert len({p.stem for p in files}) == len(files), sorted(p.name for p in files)
    found = shipped_suite_files()
    assert {n for n, p in found.items() if p.parent == CONFIG_ROOT / "suites"} == CROSS_FAMILY
    assert found["ruler-quick"] == TASKS_ROOT / "ruler" / "suites" / "ruler-quick.yaml"
    assert found["niah-grid"] == TASKS_ROOT / "niah" / "suites" / "niah-grid.yaml"
    for name, path in found.items():
        if name not in CROSS_FAMILY:  # a benchmark's suite sits in a family package that registers tasks
            assert (path.parents[1] / "__init__.py").is_file(), path


@pytest.mark.parametrize("spelling", ["ruler-quick", "ruler-quick.yaml", "configs/suites/ruler-quick.yaml",
                                      "tasks/ruler/suites/ruler-quick.yaml"])
def test_every_spelling_of_a_shipped_suite_finds_it_from_anywhere(spelling, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert suite_path(spelling) == TASKS_ROOT / "ruler" / "suites" / "ruler-quick.yaml"
    assert suite_path("splice-paper") == CONFIG_ROOT / "suites" / "splice-paper.yaml"


def test_a_users_own_file_wins_and_an_unknown_name_lists_every_shipped_suite(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("ruler-quick.yaml").write_text("name: mine\n")
    assert suite_path("ruler-quick.yaml") == Path("ruler-quick.yaml")
    with pytest.raises(ConfigError) as e:
        suite_path("nope")
    assert "among the shipped suites" in str(e.value) and "babilong" in str(e.value) and "hqa-paper" in str(e.value)


def test_the_listing_names_both_kinds():
    listed = shipped_suites()
    assert {"babilong", "ruler-quick", "mrcr", "hqa-paper"} <= set(listed)
    assert not any(desc.startswith("unreadable") for desc in listed.values())
