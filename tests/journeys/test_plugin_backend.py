"""Journey (issue 33, the registry): a plugin's backend is as first-class as an in-tree one. The plugin example
(docs/examples/ctxbench-plugin-example) registers `example_constant` with its Args model (an execution-only `workers`)
and samples=True: `ctxbench backends` lists it; `ctxbench score` samples with it (--gen-kwargs); a resume that changes
only `workers` continues the same run; an unknown --backend-arg is refused in one line before anything is written."""

from __future__ import annotations

import json

import pytest

from tests.journeys.conftest import REPO, rows

EXAMPLE = REPO / "docs" / "examples" / "ctxbench-plugin-example"
SCORE = ("ctxbench score --suite example-secret --model smollm2-135m --backend example_constant --lengths 256 "
         "--samples 2 --gen-kwargs temperature=0.7,seed=1 --store runs")


@pytest.fixture
def example_env(tmp_path) -> dict[str, str]:
    """The plugin example as an installed distribution: its source on the path and a .dist-info naming its entry
    points, as pip writes them (no pip, no build files in docs/)."""
    site = tmp_path / "site"
    info = site / "ctxbench_plugin_example-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ctxbench-plugin-example\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[ctxbench.plugins]\nexample = ctxbench_plugin_example.plugin\n"
                                           "example_synthesis = ctxbench_plugin_example.synthesis\n")
    return {"PYTHONPATH": f"{site}:{EXAMPLE}"}


def test_backends_lists_the_plugin_backend_with_what_it_declared(user, example_env):
    r = user.run("ctxbench backends", env=example_env)
    assert r.code == 0, r.err
    line = next(x for x in r.out.splitlines() if x.startswith("example_constant"))
    assert "samples with --gen-kwargs" in line and "speed only: workers" in line, line
    assert "plugin ctxbench-plugin-example 0.1.0" in line, line
    one = user.run("ctxbench backends example_constant", env=example_env)
    assert one.code == 0, one.err
    workers = next(x for x in one.out.splitlines() if x.split()[:1] == ["workers"])
    assert "int" in workers and "1" in workers and "speed only" in workers, workers


def test_a_plugin_backend_samples_and_resumes_across_a_speed_only_change(user, example_env):
    first = user.run(f"{SCORE} --backend-arg workers=1", env=example_env)
    assert first.code == 0, first.err
    (run,) = (user.cwd / "runs").glob("*/record.json")
    scored = rows(run.parent)
    assert scored and all(json.loads(x)["prediction"] in ("amber", "") for x in scored)

    again = user.run(f"{SCORE} --backend-arg workers=3", env=example_env)
    assert again.code == 0, again.err
    assert [p.parent for p in (user.cwd / "runs").glob("*/record.json")] == [run.parent]  # the same run id
    assert rows(run.parent) == scored  # nothing scored twice
    record = json.loads(run.read_text())
    assert "workers" not in record.get("identity_args", record["backend_args"]), record


def test_an_unknown_plugin_backend_argument_is_one_line_before_anything_is_written(user, example_env):
    r = user.run(f"{SCORE} --backend-arg worker=3", env=example_env)
    assert r.code == 2, r.err
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1 and "worker" in lines[0] and "workers" in lines[0], r.err  # names it and the valid keys
    assert not (user.cwd / "runs").exists()
