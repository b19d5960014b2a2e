"""A plugin's backend, task, metric and synthesis method are one module plus their registrations (issue 33): with no
other edit they are listed by `ctxbench backends`, `ctxbench tasks`, `ctxbench data methods` and the `--backend` help,
and the generated reference pages show the task and the method (the backend page documents ctxbench's own backends;
`ctxbench backends` lists a plugin's). The plugin is "installed" as a hand-written dist-info on PYTHONPATH (an entry
point is all ctxbench reads), so no pip and no network; one subprocess, for a registry that starts empty."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PLUGIN = '''
from pydantic import BaseModel, ConfigDict, Field

from ctxbench.harness.core.registry import register
from ctxbench.tasks.base import Task, TaskArgs


class ZebraArgs(TaskArgs):
    tokens_to_generate: int = Field(4, ge=1, description="answer budget")


class Zebra(Task):
    Args = ZebraArgs
    category = "retrieval"
    metric = "zz/exact"
    summary = "say the word zebra"

    def generate(self, *, length, index, seed, ctx):
        raise NotImplementedError


@register("task", "zz/zebra", args=ZebraArgs)
def zebra(**args):
    return Zebra("zz/zebra", ZebraArgs(**args))


@register("metric", "zz/exact")
def exact(prediction, references):
    return float("zebra" in prediction.lower())


class ParrotArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    lanes: int = Field(1, ge=1, description="answers at once", json_schema_extra={"execution": True})


@register("backend", "zz_parrot", args=ParrotArgs, model_free=True)
def parrot(*, model, truncation="refuse", **kwargs):
    raise NotImplementedError


class LinesConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    out_dir: str = Field(..., description="where the lines go", json_schema_extra={"execution": True})
    lines: int = Field(2, description="how many lines")


def _synthesis():
    from ctxbench.trainers.data.synthesis import Identity, content_hash, register_synthesis

    @register_synthesis("zz_lines", LinesConfig, identity=lambda cfg, **_: Identity(content_hash(cfg.lines), "", ""),
                        produces="text", trainer="cpt")
    def lines(cfg, ident, **_):
        raise NotImplementedError


_synthesis()
'''

PROBE = '''
import json, runpy, sys
from pathlib import Path
from typer.testing import CliRunner
from ctxbench.harness.cli import app, _load_commands

_load_commands()
said = {" ".join(a): CliRunner().invoke(app, a, terminal_width=200).output
        for a in (["backends"], ["tasks", "zz/*"], ["data", "methods"], ["score", "--help"])}
sys.argv = ["gen_reference.py", sys.argv[1]]
runpy.run_path(REFERENCE, run_name="__main__")
'''


def test_a_plugins_entries_are_listed_and_documented_with_no_other_edit(tmp_path: Path):
    site = tmp_path / "site"
    (site / "zzplug").mkdir(parents=True)
    (site / "zzplug" / "__init__.py").write_text("")
    (site / "zzplug" / "entries.py").write_text(PLUGIN)
    info = site / "zzplug-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: zzplug\nVersion: 0.0.1\n")
    (info / "entry_points.txt").write_text("[ctxbench.plugins]\nzz = zzplug.entries\n")
    probe = tmp_path / "probe.py"
    probe.write_text(textwrap.dedent(PROBE).replace("REFERENCE", repr(str(REPO / "docs/scripts/gen_reference.py")))
                     + "print(json.dumps(said))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")])),
           "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    done = subprocess.run([sys.executable, str(probe), str(tmp_path / "ref")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    parrot = next(line for line in said["backends"].splitlines() if line.startswith("zz_parrot "))
    assert "greedy only" in parrot and "speed only: lanes" in parrot and "model-free" in parrot
    assert parrot.endswith("plugin zzplug 0.0.1")
    assert "zz/zebra" in said["tasks zz/*"] and "say the word zebra" in said["tasks zz/*"]
    assert "zz_lines" in said["data methods"] and "produces text" in said["data methods"]
    assert "zz_parrot" in said["score --help"]
    pages = {p.name: p.read_text() for p in (tmp_path / "ref" / "reference").glob("*.md")}
    assert "`zz/zebra`" in pages["tasks.md"] and "zz/exact" in pages["tasks.md"]
    assert "zz_lines" in pages["configs.md"]
    assert "zz_parrot" not in pages["backends.md"]  # the reference documents ctxbench's own backends
