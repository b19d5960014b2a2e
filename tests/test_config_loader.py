"""One config loader (issue 23): every kind of config is found the same way and refuses a bad key in the same one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from ctxbench.harness.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def _loaders():
    from ctxbench.harness.core.config import load_suite
    from ctxbench.harness.studies.config import load_study
    from ctxbench.trainers.base import load_config as load_trainer
    from ctxbench.trainers.cpt import CPTConfig
    from ctxbench.trainers.data.pipeline import load_config as load_packing
    from ctxbench.trainers.hqa.data import load_data_config
    from ctxbench.trainers.logo.data import load_config as load_logo

    return [("suites/splice-paper.yaml", load_suite), ("studies/cpu-stdlib.yaml", load_study),
            ("trainers/cpt-tiny.yaml", lambda p: load_trainer(CPTConfig, p)), ("data/standard.yaml", load_packing),
            ("data/hqa-tiny.yaml", load_data_config), ("data/logo-tiny.yaml", load_logo)]


@pytest.mark.parametrize("index", range(6))
def test_a_misspelled_key_is_one_line_naming_file_and_key(tmp_path, index):
    shipped, load = _loaders()[index]
    raw = yaml.safe_load((ROOT / "configs" / shipped).read_text())
    bad = tmp_path / Path(shipped).name
    bad.write_text(yaml.safe_dump({**raw, "sedd": 1}))
    with pytest.raises(ConfigError) as e:
        load(bad)
    assert str(e.value) == f"{bad.name}: sedd: unknown key; remove it or fix its spelling"


def test_yaml_is_read_in_one_place():
    out = subprocess.run(["git", "grep", "-l", "yaml.safe_load", "--", "harness", "tasks", "trainers", "leaderboard"],
                         cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert out == ["harness/core/config.py"]
