"""The sample viewer the board writes: one file per cell, links from index.html, untrusted text kept inert."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from ctxbench.harness.core.store import RunStore
from ctxbench.harness.core.types import RunRecord
from ctxbench.leaderboard.report import build_report
from ctxbench.leaderboard.store_frame import load_store, select_runs
from ctxbench.leaderboard.viewer import js_literal, sample_details

PLANT = "</script><img src=x onerror=\"document.body.setAttribute('data-pwned','1')\"><!--"
TASKS = ("niah/single", "kv/retrieval")


def _row(task: str, length: int, index: int, model: str, *, prompt: str = "") -> dict:
    gold = f"{7000 + index}"
    right = (index + (model == "beta")) % 3 != 0  # the two models miss different samples
    answer = f"The magic number is {gold}." if right else f"I think it is {index}."
    return {"id": f"{task}@{length}#{index}", "task": task, "length": length, "index": index, "score": float(right),
            "prompt_hash": f"h{index}", "error": None, "prediction": answer, "answers": [gold], "empty": False,
            "metric": "string_match_all", "depth": round((index % 3) * 50.0, 1), "prompt_tokens": length - 20,
            "generated_tokens": 9, "reasoning": f"{model} thinks about {gold}", "reasoning_tokens": 5,
            "prompt": prompt or f"Haystack text. The magic number is {gold}. More text. What is the magic number?"}


def make_board(root: Path, *, per_cell: int = 3, lengths=(512, 1024), plant: bool = True,
               prompts: dict[int, str] | None = None) -> Path:
    """Two models (alpha, beta) scored on two tasks at two lengths, from stored rows; the board built into root/board.
    ``prompts``: the stored prompt of the samples of these indices (else a short one)."""
    store_dir = root / "runs"
    for k, model in enumerate(("alpha", "beta")):
        store = RunStore(store_dir, f"run-{model}")
        rec = RunRecord(run_id=f"run-{model}", created=f"2026-01-0{k + 1}T00:00:00", suite="s", suite_config={},
                        model=f"/models/{model}", backend="echo", backend_args={}, tokenizer="t", tokenizer_fingerprint="tok",
                        template="chat", seed=42, truncation="refuse", versions={"ctxbench": "0.1.0"}, command=["ctxbench"],
                        label=model, model_fingerprint=f"dir:{model}", plan={t: {str(n): per_cell for n in lengths} for t in TASKS},
                        sessions=[{"started": "2026-01-01T00:00:00"}])
        store.dir.mkdir(parents=True, exist_ok=True)
        store.record_path.write_text(json.dumps(dataclasses.asdict(rec)))
        rows = [_row(t, n, i, model, prompt=(prompts or {}).get(i, "")) for t in TASKS for n in lengths for i in range(per_cell)]
        if plant:
            rows[0] = {**rows[0], "prediction": PLANT, "prompt": f"a prompt {PLANT} with a needle 7000"}
        store.append(rows)
    frames = load_store(store_dir)
    build_report(frames.scores, out_dir=root / "board", cells=frames.cells, runs=frames.runs, n_boot=50,
                 sample_details=sample_details(select_runs(store_dir)))
    return root / "board"


@pytest.fixture(scope="module")
def board(tmp_path_factory) -> Path:
    return make_board(tmp_path_factory.mktemp("viewer"))


def _cell_rows(board: Path, name: str, call: str = "ctxbenchCell") -> list:
    text = (board / "samples" / name).read_text()
    head, body = text.split("(", 1)
    assert head == call
    return json.loads(body.rsplit(");", 1)[0].split(",", 1)[1])


def _prompts(board: Path, name: str) -> list:
    """A cell's prompt views (``p<k>.js``), in its rows' order."""
    return _cell_rows(board, name, "ctxbenchPrompts")


def test_each_cell_gets_one_file_and_a_link_from_index_html(board):
    index = (board / "index.html").read_text()
    links = re.findall(r'<a class="cell" href="([^"]+)">', index)
    assert len(links) == 2 * 2 * 2  # models x tasks x lengths
    assert "samples.html#model=alpha&amp;task=niah%2Fsingle&amp;length=512" in links
    scores = re.findall(r'<a class="samples" href="([^"]+)">[0-9]', index)  # the main and per-task tables' scores
    assert "samples.html#model=beta&amp;length=1024" in scores  # a main-table score: the model at that length
    assert "samples.html#model=beta&amp;task=kv%2Fretrieval&amp;length=512" in scores  # a per-task score: its cell
    assert sorted(p.name for p in (board / "samples").glob("c*.js")) == sorted(f"c{k}.js" for k in range(8))
    assert (board / "samples.html").is_file() and (board / "samples" / "viewer.js").is_file()
    rows = _cell_rows(board, "c1.js")  # alpha, kv/retrieval, 1024 (cells sorted by model, task, length)
    assert [r["index"] for r in rows] == [0, 1, 2] and {r["model"] for r in rows} == {"alpha"}
    first = rows[1]
    assert first["id"] == "kv/retrieval@1024#1" and first["gold"] == ["7001"] and first["score"] == 1.0
    assert first["reasoning"] == "alpha thinks about 7001" and first["prompt_tokens"] == 1004 and first["depth"] == 50.0
    assert "prompt" not in first and "prompt_view" not in first  # prompts are a file apart, loaded when shown
    view = _prompts(board, "p1.js")[1]
    assert "magic number is 7001" in view["text"] and view["source"] == "stored" and view["chars"] == len(view["text"])
    index_js = (board / "samples" / "index.js").read_text()
    assert "Fraction of references found" in index_js  # the metric's one-line explanation


def test_a_planted_prompt_or_answer_is_escaped_everywhere(board):
    for path in (board / "samples").glob("[cp]*.js"):  # data: no markup character at all, only \u003c escapes
        assert not set("<>&") & set(path.read_text()), path
    for path in (board / "samples.html", board / "index.html", board / "samples" / "index.js"):
        assert "<img src=x" not in path.read_text() and "onerror=" not in path.read_text(), path
    planted = [r for f in (board / "samples").glob("c*.js") for r in _cell_rows(board, f.name) if r["answer"] == PLANT]
    prompts = [v["text"] for f in (board / "samples").glob("p*.js") for v in _prompts(board, f.name) if PLANT in v["text"]]
    assert len(planted) == 2 and len(prompts) == 2  # kept as text, to be shown as text
    assert "innerHTML" not in (board / "samples" / "viewer.js").read_text()


def test_js_literal_cannot_close_a_script_or_open_a_comment():
    text = js_literal({"a": "</script><!-- & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": "</script><!-- & \u2028"}


def test_a_board_without_details_still_links_its_samples(board, tmp_path):
    frames = load_store(board.parent / "runs")
    build_report(frames.scores, out_dir=tmp_path / "plain", cells=frames.cells, runs=frames.runs, n_boot=50)
    rows = _cell_rows(tmp_path / "plain", "c0.js")
    assert "prompt" not in rows[0] and "reasoning" not in rows[0] and rows[1]["answer"].startswith("The magic")
    assert _prompts(tmp_path / "plain", "p0.js") == [None] * len(rows)  # the viewer says the board has no prompt
    assert (tmp_path / "plain" / "samples.html").is_file() and 'class="cell"' in (tmp_path / "plain" / "index.html").read_text()
