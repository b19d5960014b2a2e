"""In CI a test that needs ../shared/data or a `transformers serve` fails instead of skipping (CTXBENCH_REQUIRE_DATA=1,
CTXBENCH_REQUIRE_SERVE=1, set by scripts/test.sh under CI=true where CI provides them): a skipped test passes a run."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import missing


@pytest.mark.parametrize("variable", ["CTXBENCH_REQUIRE_DATA", "CTXBENCH_REQUIRE_SERVE"])
def test_a_missing_resource_skips_unless_required(variable, monkeypatch):
    monkeypatch.delenv(variable, raising=False)
    with pytest.raises(pytest.skip.Exception, match="no data here"):
        missing("no data here", variable)
    monkeypatch.setenv(variable, "1")
    with pytest.raises(pytest.fail.Exception, match=f"no data here \\({variable}=1 requires it\\)"):
        missing("no data here", variable)


def _ci_env(repo_root, tmp_path, **env) -> dict[str, str]:
    """The variables scripts/ci_env.sh exports, sourced as scripts/test.sh sources it."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("CTXBENCH_REQUIRE") and k != "CI"}
    out = subprocess.run(["bash", "-c", "source scripts/ci_env.sh && env"], cwd=repo_root, env={**base, **env},
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if line.startswith("CTXBENCH_REQUIRE"))


def test_ci_requires_the_server_always_and_the_data_where_it_is_there(repo_root, tmp_path):
    data = tmp_path / "data"
    assert _ci_env(repo_root, tmp_path, CI="true", CTXBENCH_DATA_DIR=str(data)) == {"CTXBENCH_REQUIRE_SERVE": "1"}
    (data / "pg_essays").mkdir(parents=True)
    assert _ci_env(repo_root, tmp_path, CI="true", CTXBENCH_DATA_DIR=str(data)) == {
        "CTXBENCH_REQUIRE_SERVE": "1", "CTXBENCH_REQUIRE_DATA": "1"}
    assert _ci_env(repo_root, tmp_path, CTXBENCH_DATA_DIR=str(data)) == {}  # not CI: a developer's run skips
    assert _ci_env(repo_root, tmp_path, CI="true", CTXBENCH_DATA_DIR=str(data), CTXBENCH_REQUIRE_SERVE="0")[
        "CTXBENCH_REQUIRE_SERVE"] == "0"


def test_the_test_script_sources_it_and_runs_two_workers(repo_root):
    script = (repo_root / "scripts" / "test.sh").read_text()
    assert "source scripts/ci_env.sh" in script
    assert '-n "${CTXBENCH_TEST_WORKERS:-2}" --dist loadgroup' in script
