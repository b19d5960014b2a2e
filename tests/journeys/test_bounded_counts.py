"""Journeys: a typo'd count is refused by arithmetic before anything grows (issue 32, High): one line naming the field
and the largest value that fits, exit 2, nothing written. The child runs under a 3 GB address-space cap, so a
regression (a list of a billion sample ids) fails fast with MemoryError instead of taking the machine down."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

import pytest

from ctxbench.harness.core.config import adhoc_suite
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.run.plan_bounds import Capacity, check_counts, check_generate

from .conftest import _argv, _env, default_signals

CAP_BYTES = 3 << 30


def _capped() -> None:
    default_signals()
    resource.setrlimit(resource.RLIMIT_AS, (CAP_BYTES, CAP_BYTES))


def run_capped(cwd: Path, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(_argv(command), cwd=cwd, env=_env(None), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, preexec_fn=_capped)


@pytest.mark.parametrize("command, field", [
    ("ctxbench score --backend echo --tasks ruler/niah_single_1 --samples 1000000000", "--samples"),
    ("ctxbench score --backend echo --tasks ruler/niah_single_1 --samples 99999999999999999999", "--samples"),
    ("ctxbench score --backend echo --tasks ruler/niah_single_1 --gen-kwargs temperature=0.7,seed=1 "
     "--repeats 1000000000", "--repeats"),
])
def test_huge_counts_are_refused_before_anything_grows(user, command, field):
    r = run_capped(user.cwd, command)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2, r.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: ") and "the largest that fits is" in lines[0], lines
    assert not (user.cwd / "runs").exists() and user.files() == set()


def test_the_largest_value_named_fits_and_one_more_does_not():
    """Arithmetic on the counts alone: the named largest value passes the same check, and one more is refused."""
    cap = Capacity(memory=10 << 20, store_disk=1 << 40, cache_disk=1 << 40)
    suite = adhoc_suite("ruler/niah_single_1", samples=10**20, lengths=[4096, 8192])
    with pytest.raises(ConfigError, match=r"^--samples: .* the largest that fits is ([\d,]+)$") as e:
        check_counts(suite, capacity=cap)
    most = int(str(e.value).rsplit(" ", 1)[1].replace(",", ""))
    assert most == (10 << 20) // (256 * 2)
    check_counts(adhoc_suite("ruler/niah_single_1", samples=most, lengths=[4096, 8192]), capacity=cap)
    with pytest.raises(ConfigError, match="^--samples: "):
        check_counts(adhoc_suite("ruler/niah_single_1", samples=most + 1, lengths=[4096, 8192]), capacity=cap)
    with pytest.raises(ConfigError, match=r"^--repeats: .* the largest that fits is 10$"):
        check_counts(adhoc_suite("ruler/niah_single_1", samples=2048, lengths=[4096, 8192]), repeats=11, capacity=cap)


def test_too_many_lengths_name_lengths():
    cap = Capacity(memory=256 * 10, store_disk=1 << 40, cache_disk=1 << 40)
    with pytest.raises(ConfigError, match=r"^--lengths: 11 task-length cells .* about 10 cells$"):
        check_counts(adhoc_suite("ruler/niah_single_1", samples=1, lengths=[64 + i for i in range(11)]), capacity=cap)


def test_cache_disk_bounds_the_samples():
    """The sample cache holds every prompt (~5 bytes a token): a small disk refuses what memory would hold."""
    cap = Capacity(memory=1 << 40, store_disk=1 << 40, cache_disk=5 * 4096 * 100)
    with pytest.raises(ConfigError, match=r"the largest that fits is 100$"):
        check_counts(adhoc_suite("ruler/niah_single_1", samples=101, lengths=[4096]), capacity=cap)


def test_generate_is_bounded_by_memory():
    with pytest.raises(ConfigError, match=r"^--samples: 1,000,000,000 prompts"):
        check_generate(10**9, 4096, Capacity(memory=1 << 30, store_disk=0, cache_disk=0))
