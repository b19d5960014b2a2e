"""Issue 32: what ctxbench writes by default is ignored by git, so a command run from the checkout (a study, as the
README suggests) adds nothing that the linter or the tests see. Checked against the commands' own default output
paths and the output directories named in the shipped configs."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
OUTPUT_OPTIONS = {"out", "out_dir", "output_dir", "store", "runs_dir"}


def _ignored_dirs(*, anchored: bool | None = None) -> set[str]:
    lines = [x.strip() for x in (REPO / ".gitignore").read_text().splitlines() if x.strip().endswith("/")]
    return {x.strip("/") for x in lines if not x.startswith("#") and (anchored is None or x.startswith("/") == anchored)}


def _command_defaults() -> set[str]:
    """The top directory of every output path option's default, over the whole CLI."""
    import typer.main

    from ctxbench.harness.cli import app

    found, todo = set(), [typer.main.get_command(app)]
    while todo:
        cmd = todo.pop()
        todo += list(getattr(cmd, "commands", {}).values())
        for p in cmd.params:
            if p.name in OUTPUT_OPTIONS and isinstance(p.default, (str, Path)) and p.default:
                found.add(Path(p.default).parts[0])
    return found


def _config_outputs() -> set[str]:
    found = set()
    for path in (REPO / "configs").rglob("*.yaml"):
        doc = yaml.safe_load(path.read_text())
        for section in (doc, *(v for v in (doc or {}).values() if isinstance(v, dict))) if isinstance(doc, dict) else ():
            for key in ("out_dir", "store", "output_dir"):
                value = section.get(key)
                if isinstance(value, str) and not Path(value).is_absolute():
                    found.add(Path(value).parts[0])
    return found


def test_every_default_output_directory_is_ignored():
    from ctxbench.harness.studies.config import DEFAULT_STORE, STUDIES_DIR

    written = _command_defaults() | _config_outputs() | {DEFAULT_STORE.parts[0], STUDIES_DIR}
    assert {"runs", "board", "fit"} <= written  # the walk found the commands' defaults
    assert written - _ignored_dirs() == set(), f"add them to .gitignore: {sorted(written - _ignored_dirs())}"


def test_a_study_writes_under_the_store_by_default(tmp_path):
    from ctxbench.harness.studies.config import default_root

    assert default_root("cpu-stdlib") == Path("runs") / "studies" / "cpu-stdlib"
    assert default_root("x", tmp_path / "store") == tmp_path / "store" / "studies" / "x"


def test_no_source_directory_is_ignored():
    """An unanchored `studies/` would hide harness/studies/ from git: such names are anchored at the root."""
    sources = {p.name for top in ("harness", "tasks", "trainers", "leaderboard", "tests", "docs", "configs")
               for p in (REPO / top).rglob("*") if p.is_dir() and "__pycache__" not in p.parts}
    assert _ignored_dirs(anchored=False) & sources == set()
