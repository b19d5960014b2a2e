"""Report files: contents, escaping of untrusted strings, self-containment, atomicity."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ctxbench.harness.core import io as io_module
from ctxbench.harness.core.io import atomic_write
from ctxbench.leaderboard.render import md_escape
from ctxbench.leaderboard.report import build_report

EVIL = "<script>alert(1)</script>"
LENGTHS = (4096, 8192, 16384)


def scores(*, with_grid: bool = True, with_kv: bool = True) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for model, base in (("Good", 0.95), (EVIL, 0.8)):
        for length in LENGTHS:
            p = base - 0.05 * LENGTHS.index(length)
            for task, category in (
                ("ruler/niah_single_1", "retrieval"),
                ("ruler/vt", "multi-hop tracing"),
            ):
                rows += [
                    dict(
                        model=model,
                        run_id=f"run-{model}",
                        task=task,
                        category=category,
                        length=length,
                        index=i,
                        score=float(rng.random() < p),
                    )
                    for i in range(20)
                ]
            if with_grid:
                rows += [
                    dict(
                        model=model,
                        run_id="g",
                        task="niah/grid",
                        category="retrieval",
                        length=length,
                        depth=depth,
                        index=int(depth) * 10 + i,
                        score=float(rng.random() < p),
                    )
                    for depth in (0.0, 50.0, 100.0)
                    for i in range(4)
                ]
            if with_kv:
                rows += [
                    dict(
                        model=model,
                        run_id="kv",
                        task="kv/lookup",
                        length=length,
                        position=pos,
                        index=pos * 10 + i,
                        score=float(rng.random() < p),
                    )
                    for pos in range(3)
                    for i in range(4)
                ]
    reported = [
        dict(
            model="Paper [v1]",
            task="avg",
            length=length,
            score=s,
            source="reported",
            claimed_length=131072,
        )
        for length, s in zip(LENGTHS, (0.9, 0.87, 0.8), strict=True)
    ]
    return pd.concat([pd.DataFrame(rows), pd.DataFrame(reported)], ignore_index=True)


EXAMPLES = [
    dict(
        model=EVIL,
        task="ruler/vt",
        length=4096,
        index=0,
        score=0.0,
        prediction="<script>alert('pwned')</script>\n| col | `code` **bold**",
        reference=["X1", "X2"],
    )
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    report = build_report(
        scores(),
        out_dir=tmp_path_factory.mktemp("report"),
        comparisons=[("Good", EVIL)],
        examples=EXAMPLES,
        n_boot=200,
    )
    return report, report.html.read_text(), report.markdown.read_text()


def test_writes_all_files_and_no_temporaries(built) -> None:
    report, _, _ = built
    assert sorted(p.name for p in report.html.parent.iterdir()) == [
        "index.html",
        "leaderboard.md",
        "results.csv",
        "results.json",
        "samples",  # the sample viewer (leaderboard/viewer.py)
        "samples.html",
        "summary",
    ]
    assert (report.html.stat().st_mode & 0o777) == 0o644
    written = sorted(str(p.relative_to(report.html.parent)) for p in report.html.parent.rglob("*") if p.is_file())
    assert not [w for w in written if ".tmp" in w]
    # RULER's summary.csv per model and length (the reported model has no per-task samples, so none)
    assert sum(w.endswith("summary.csv") for w in written) == 2 * len(LENGTHS)


def test_untrusted_strings_are_inert(built) -> None:
    _, html, md = built
    for text in (html, md):
        assert "<script" not in text.lower()
        assert "alert(1)" in text  # the name is still shown, just escaped
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    # The example sits in a collapsed section and keeps its line break in <pre>.
    details = html[html.index("<details><summary>Example predictions") :]
    assert "<pre>&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;\n| col |" in details
    assert r"Paper \[v1\] †" in md


def test_html_is_self_contained(built) -> None:
    _, html, _ = built
    assert not re.search(r"https?:|//[a-z0-9.-]+\.[a-z]{2,}|<link|@import|url\(", html, re.I)
    srcs = re.findall(r'\ssrc="([^"]*)"', html)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)
    # length curves + one heatmap per model for niah/grid + KV position curve + forest plot
    assert len(srcs) == 1 + 2 + 1 + 1


def test_markdown_main_table(built) -> None:
    _, _, md = built
    header = next(line for line in md.splitlines() if line.startswith("| Model | Claimed"))
    assert header == (
        "| Model | Claimed | Effective | Effective (CI lower) | 4K | 8K | 16K "
        "| Avg | wAvg (inc) | wAvg (dec) | Tasks |"
    )
    good = next(line for line in md.splitlines() if line.startswith("| Good |"))
    assert "n=" in good.split(" | ")[4]  # every score cell shows its n
    paper = next(line for line in md.splitlines() if line.startswith(r"| Paper \[v1\]"))
    # reported: 90 > 85.6, 87 > 85.6, 80 fails -> 8K; no CIs, so no lower bound.
    assert paper.split(" | ")[1:7] == ["128K", "8K", "—", "90.0", "87.0", "80.0"]
    assert "## Paired comparison: Good vs &lt;script&gt;" in md
    assert "## By category" in md


def test_results_json_and_csv(built) -> None:
    report, _, _ = built
    data = json.loads(report.json.read_text(), parse_constant=lambda c: pytest.fail(c))
    assert data["threshold"] == 85.6 and data["scale"] == "percent"
    models = {m["model"]: m for m in data["models"]}
    assert set(models) == {"Good", EVIL, "Paper [v1]"}
    assert models["Paper [v1]"]["effective_length"] == 8192
    assert models["Paper [v1]"]["avg"] == pytest.approx((90 + 87 + 80) / 3)
    assert data["comparisons"][0]["n_unmatched_a"] == 0
    csv = pd.read_csv(report.csv)
    avg = csv[csv["task"] == "avg"]
    assert len(avg) == 3 * len(LENGTHS)
    assert avg.loc[avg["model"] == "Paper [v1]", "score"].tolist() == pytest.approx([90, 87, 80])
    cells = csv[csv["task"] != "avg"]
    assert len(cells) == 2 * 4 * len(LENGTHS)  # two measured models x four tasks x lengths
    assert (cells["n"] > 0).all() and (cells["status"] == "complete").all() and (cells["n"] == cells["planned"]).all()


def test_heatmap_only_for_niah_tasks_with_several_depths(tmp_path: Path) -> None:
    df = scores(with_kv=False)
    one_depth = df["task"] == "niah/grid"
    df.loc[one_depth, "depth"] = 50.0
    moved = df[one_depth].assign(task="other/grid", depth=df.loc[one_depth, "index"] % 3 * 50.0)
    report = build_report(pd.concat([df, moved]), out_dir=tmp_path, n_boot=50)
    html = report.html.read_text()
    assert "Needle depth" not in html and "gold position" not in html
    assert html.count('src="data:image/png') == 1


def test_threshold_by_reference(tmp_path: Path) -> None:
    report = build_report(
        scores(with_grid=False, with_kv=False),
        out_dir=tmp_path,
        n_boot=50,
        threshold="model=Paper [v1]@8K",
    )
    assert json.loads(report.json.read_text())["threshold"] == pytest.approx(87.0)


def test_md_escape() -> None:
    assert md_escape("a|b*c_d[e]`f`<g>&h\ni") == r"a\|b\*c\_d\[e\]\`f\`&lt;g&gt;&amp;h i"


def test_atomic_write_keeps_old_file_on_failure(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "results.json"
    atomic_write(target, "old")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(io_module.os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write(target, "new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["results.json"]


def test_the_header_says_how_many_runs_a_weights_format_covers():
    """A GGUF run beside a plain checkpoint: the header must not read as if every run were GGUF."""
    from ctxbench.leaderboard.exports import _weights_summary

    assert _weights_summary(["GGUF Q4_1", "GGUF Q4_1"]) == "GGUF Q4_1"
    assert _weights_summary(["GGUF Q4_1", "", "GGUF Q4_1"]) == "GGUF Q4_1 (2 of 3 runs)"
    assert _weights_summary(["", ""]) == "?"
