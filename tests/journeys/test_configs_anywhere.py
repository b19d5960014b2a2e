"""Issue 21 item 10: every shipped config resolves by its documented path (configs/<kind>/<name>.yaml) or by name,
from any directory; a real file in the user's directory wins. The README's training command is the one the shared
`tiny_checkpoint` fixture types from a directory outside the checkout (a process, trained once per test run); the
packs, study checks, imports and refusals run in process (`user_in_process`)."""

from __future__ import annotations

import json
from pathlib import Path

from ctxbench.harness.core.config import CONFIG_ROOT


def test_the_readme_training_command_works_outside_the_checkout(tiny_checkpoint):
    """`ctxbench train cpt --config configs/trainers/cpt-tiny.yaml --max-steps 4`, typed by the fixture in a directory
    outside the checkout, exited 0 (the fixture asserts it): here, what it left in that directory."""
    from ctxbench.trainers.base import MANIFEST_NAME

    work = tiny_checkpoint.parents[2]
    assert CONFIG_ROOT.parent not in tiny_checkpoint.parents
    assert tiny_checkpoint.match("runs/train-cpt-tiny-standard-*/model") and (tiny_checkpoint / "config.json").is_file()
    assert json.loads((tiny_checkpoint / MANIFEST_NAME).read_text())["steps"] == 4
    assert json.loads((work / "packed" / "tiny-standard" / "manifest.json").read_text())["complete"]  # the user's data


def test_a_trainer_config_by_name_is_read(user_in_process):
    # max_steps 0 is refused by the config's own schema: the shipped cpt-tiny was found and read, nothing was trained
    r = user_in_process.run("ctxbench train cpt --config cpt-tiny --max-steps 0")
    assert r.code == 2 and "cpt-tiny.yaml: max_steps" in r.last_err_line, r.err
    assert user_in_process.files() == set()


def test_data_pack_by_documented_path_packs_the_users_directory(user_in_process):
    (user_in_process.cwd / "code").mkdir()
    for p in sorted((CONFIG_ROOT.parent / "harness" / "core").glob("*.py"))[:8]:
        (user_in_process.cwd / "code" / p.name).write_text(p.read_text())
    r = user_in_process.run("ctxbench data pack --config configs/data/standard.yaml --out packed/x --budget-tokens 20000")
    assert r.code == 0, r.err[-3000:]
    assert json.loads((user_in_process.cwd / "packed/x/manifest.json").read_text())["shards"]


def test_a_study_by_documented_path_and_by_name(user_in_process):
    r = user_in_process.run("ctxbench study configs/studies/cpu-stdlib.yaml --check")
    assert r.code == 0 and "valid; 3 methods" in r.out, r.err
    r = user_in_process.run("ctxbench study cpu-trainers --check")  # its methods name configs/data/logo-tiny.yaml and hqa-tiny.yaml
    assert r.code == 0 and "valid; 3 methods" in r.out, r.err
    assert user_in_process.files() == set()


def test_a_real_file_in_the_users_directory_wins(user_in_process):
    mine = user_in_process.cwd / "configs" / "trainers"
    mine.mkdir(parents=True)
    (mine / "cpt-tiny.yaml").write_text("not_a_key: 1\n")
    r = user_in_process.run("ctxbench train cpt --config configs/trainers/cpt-tiny.yaml")
    assert r.code == 2 and "base_model: required key is missing" in r.last_err_line, r.err  # the user's file was read


def test_an_unknown_name_is_one_line_listing_the_shipped_ones(user_in_process):
    r = user_in_process.run("ctxbench train cpt --config cpt-tinny")
    assert r.code == 2, r.err
    assert "--config: cpt-tinny does not exist" in r.last_err_line and "cpt-tiny," in r.last_err_line
    assert len(r.err.strip().splitlines()) == 1 and user_in_process.files() == set()


def test_configs_a_config_names_resolve_from_anywhere(tmp_path, monkeypatch):
    """A trainer config's data YAML (hqa stages) and DeepSpeed presets, from a directory outside the checkout."""
    from ctxbench.trainers.base import config_path, deepspeed_path
    from ctxbench.trainers.hqa.trainer import data_identity

    monkeypatch.chdir(tmp_path)
    assert deepspeed_path("zero3") == deepspeed_path("configs/deepspeed/zero3.json") == CONFIG_ROOT / "deepspeed/zero3.json"
    assert config_path("hqa-tiny") == config_path("configs/data/hqa-tiny.yaml") == CONFIG_ROOT / "data/hqa-tiny.yaml"
    assert len(data_identity("configs/data/hqa-tiny.yaml", {})) == 16
    assert not list(Path(tmp_path).iterdir())


def test_a_shipped_paper_table_imports_by_its_documented_path(user_in_process):
    r = user_in_process.run("ctxbench board import configs/reported/hqa-table1.csv --store runs")
    assert r.code == 0 and "imported 48 reported rows" in r.out, r.err
    r = user_in_process.run("ctxbench board import logo-table1 --store runs")
    assert r.code == 0, r.err
    assert len(list((user_in_process.cwd / "runs").rglob("*.csv"))) == 2
