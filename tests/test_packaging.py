"""The wheel works outside the checkout: shipped configs, its own namespace, plugins.

One venv per module: ctxbench's wheel (not the editable install), a dummy distribution that owns a top-level
`tasks` package, and a plugin distribution that registers a task and a backend through `ctxbench.plugins`.
The venv sees this interpreter's site-packages through a path file, so dependencies are not reinstalled; path
files inside that directory (the editable install's finder among them) are not processed, so the checkout
stays invisible. Every command runs from a directory outside the checkout.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

PLUGIN = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "ctxbench-demo-plugin"
        version = "0.0.1"
        [project.entry-points."ctxbench.plugins"]
        demo = "demo_plugin"
        [tool.setuptools]
        py-modules = ["demo_plugin"]
    """,
    "demo_plugin.py": '''
        """A third-party ctxbench plugin: one task and one backend, registered through the entry point."""
        from ctxbench.harness.core.registry import register
        from ctxbench.harness.core.types import Prediction, Sample
        from ctxbench.tasks.base import Task, TaskArgs


        class EchoArgs(TaskArgs):
            tokens_to_generate: int = 4


        class Parrot(Task):
            """Asks the model to repeat a word; scored by exact match."""
            Args = EchoArgs
            category = "demo"

            def generate(self, *, length, index, seed, ctx):
                word = f"word{index}"
                text = ctx.renderer.render(f"Repeat: {word}")
                return self.make_sample(length=length, index=index, text=text, tokens=ctx.count(text), answers=[word])


        @register("task", "demo/parrot")
        def parrot(**args):
            return Parrot("demo/parrot", EchoArgs(**args))


        class ParrotBackend:
            """Answers with the last word of the user text: a perfect parrot."""
            name = "parrot"
            capabilities = frozenset({"generate"})

            def __init__(self, *, model, **kwargs):
                from ctxbench.harness.core.models import load_tokenizer
                self.model, self.tokenizer, self.context_length, self.batch_size = model, load_tokenizer(model), 1 << 20, 4

            def info(self):
                return {"model": self.model}

            def fingerprint(self):
                return "parrot"

            def generate(self, requests):
                return [Prediction(r.sample_id, r.user_text.split()[-1], r.prompt_tokens or 0, 1, 0.0) for r in requests]


        @register("backend", "parrot")
        def parrot_backend(**kwargs):
            return ParrotBackend(**kwargs)
    ''',
}

DUMMY_TASKS = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "someone-elses-tasks"
        version = "1.0"
        [tool.setuptools]
        packages = ["tasks"]
    """,
    "tasks/__init__.py": "OWNER = 'someone-elses-tasks'\n",
}


def _write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


def _pip(python: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "-q", "--disable-pip-version-check", *args],
                   check=True, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("wheel")
    wheels = root / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(REPO)],
                   check=True, capture_output=True, text=True, timeout=600)
    (wheel,) = wheels.glob("ctxbench-*.whl")
    env_dir = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120)
    python = env_dir / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    outer = [*site.getsitepackages(), sysconfig.get_paths()["purelib"]]
    (purelib / "_outer_site.pth").write_text("\n".join(dict.fromkeys(p for p in outer if Path(p).is_dir())) + "\n")
    # one pip process installs all three (each pip start-up costs about a second of CPU)
    _pip(python, "install", "--no-deps", "--no-build-isolation", str(wheel), str(_write_tree(root / "dummy", DUMMY_TASKS)),
         str(_write_tree(root / "plugin", PLUGIN)))
    work = root / "elsewhere"  # not the checkout, not beside it
    work.mkdir()
    return {"python": python, "bin": env_dir / "bin", "work": work, "wheel": wheel}


def _run(venv, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    return subprocess.run([str(venv["bin"] / "ctxbench"), *args], cwd=venv["work"], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_wheel_ships_configs_and_imports_from_site_packages(venv):
    code = ("import ctxbench.harness, ctxbench.tasks, ctxbench.trainers, ctxbench.leaderboard, json;"
            "from ctxbench.harness.core.config import CONFIG_ROOT;"
            "print(json.dumps([ctxbench.harness.__file__, str(CONFIG_ROOT), sorted(p.name for p in CONFIG_ROOT.iterdir())]))")
    res = subprocess.run([str(venv["python"]), "-c", code], cwd=venv["work"], capture_output=True, text=True, check=True)
    where, config_root, kinds = json.loads(res.stdout)
    assert str(REPO) not in where and "site-packages" in where
    assert "site-packages" in config_root and {"suites", "trainers", "data", "studies", "deepspeed"} <= set(kinds)
    shipped = {p.relative_to(REPO / "configs").as_posix() for p in (REPO / "configs").rglob("*") if p.is_file()}
    installed = {p.relative_to(config_root).as_posix() for p in Path(config_root).rglob("*") if p.is_file()}
    assert shipped <= installed, sorted(shipped - installed)


def test_commands_work_outside_the_checkout(venv, data_dir):
    r = _run(venv, "tasks")
    assert r.returncode == 0 and "ruler/niah_single_1" in r.stdout and "demo/parrot" in r.stdout, r.stderr
    r = _run(venv, "suites")
    assert r.returncode == 0 and "ruler-quick" in r.stdout, r.stderr
    assert {"babilong", "niah-grid", "hqa-paper"} <= {line.split()[0] for line in r.stdout.splitlines() if line.strip()}
    r = _run(venv, "score", "--backend", "echo", "--suite", "ruler-quick", "--data-dir", str(data_dir), "--store", "runs")
    assert r.returncode == 0, r.stderr[-2000:]
    (record,) = (venv["work"] / "runs").glob("*/record.json")
    assert json.loads(record.read_text())["suite"] == "ruler-quick"
    r = _run(venv, "export", "lm-eval", "exported", "--suite", "ruler-quick")
    assert r.returncode == 0, r.stderr[-2000:]
    assert list((venv["work"] / "exported").glob("*.yaml"))


def test_a_user_suite_path_still_works(venv, data_dir):
    suite = venv["work"] / "mine.yaml"
    suite.write_text("name: mine\nlengths: [256]\nsamples: 1\ntasks: [ruler/niah_single_1]\n")
    r = _run(venv, "score", "--backend", "echo", "--suite", str(suite), "--data-dir", str(data_dir), "--store", "mine-runs")
    assert r.returncode == 0, r.stderr[-2000:]


def test_namespace_coexists_with_another_top_level_tasks_package(venv):
    code = "import tasks, ctxbench.tasks; print(tasks.OWNER, ctxbench.tasks.__name__)"
    res = subprocess.run([str(venv["python"]), "-c", code], cwd=venv["work"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["someone-elses-tasks", "ctxbench.tasks"]


def test_plugin_task_and_backend_score_through_the_cli(venv):
    suite = venv["work"] / "plugin.yaml"
    suite.write_text("name: plugin-suite\nlengths: [128]\nsamples: 3\ntasks: [demo/parrot]\n")
    r = _run(venv, "score", "--backend", "parrot", "--suite", str(suite), "--store", "plugin-runs")
    assert r.returncode == 0, r.stderr[-2000:]
    (samples,) = (venv["work"] / "plugin-runs").glob("*/samples.jsonl")
    rows = [json.loads(x) for x in samples.read_text().splitlines()]
    assert len(rows) == 3 and all(r["score"] == 1.0 for r in rows)


def test_shipped_configs_resolve_by_path_and_name_from_the_wheel(venv):
    """Issue 21 item 10: the README's config paths, typed outside the checkout, find the wheel's configs."""
    r = _run(venv, "study", "configs/studies/cpu-stdlib.yaml", "--check")
    assert r.returncode == 0 and "valid; 3 methods" in r.stdout, r.stderr[-2000:]
    r = _run(venv, "study", "cpu-trainers", "--check")  # its methods name configs/data/*.yaml
    assert r.returncode == 0, r.stderr[-2000:]
    r = _run(venv, "train", "cpt", "--config", "configs/trainers/cpt-tiny.yaml", "--max-steps", "0")
    assert r.returncode == 2 and "cpt-tiny.yaml: max_steps" in r.stderr, r.stderr[-2000:]  # found and read
    r = _run(venv, "board", "import", "configs/reported/hqa-table1.csv", "--store", "reported-runs")
    assert r.returncode == 0, r.stderr[-2000:]
