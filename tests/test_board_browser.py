"""The report of a real run, opened in headless Chromium: it renders, and planted scripts stay inert."""

import json
import re
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.integration
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PLANT = "<script>document.body.setAttribute('data-pwned','1')</script>"
SUITE = """name: browser
lengths: [512, 1024]
samples: 1
tasks:
  - task: niah/single
    args: {depths: 3}
  - task: kv/retrieval
    args: {positions: 2}
"""


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (scripts/setup.sh test installs it)")
def test_report_renders_and_planted_script_does_not_run(tmp_path, ctxbench, data_dir, monkeypatch):
    """The run, the import and the board are built through the CLI's main() in this process (the `ctxbench` fixture):
    only the browser needs a process of its own."""
    monkeypatch.chdir(tmp_path)
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    store = tmp_path / "runs"
    code, _, err = ctxbench("score", "--suite", str(suite), "--store", str(store), "--data-dir", str(data_dir), "--backend", "echo")
    assert code == 0, err[-2000:]
    (samples,) = store.glob("*/samples.jsonl")
    rows = [json.loads(x) for x in samples.read_text().splitlines()]
    rows[0]["prediction"] = PLANT  # a model output that tries to run code in the report
    samples.write_text("".join(json.dumps(x) + "\n" for x in rows))
    reported = tmp_path / "paper.csv"
    reported.write_text(f"model,task,length,score\n\"{PLANT}\",avg,512,90\n\"{PLANT}\",avg,1024,80\n")
    assert ctxbench("board", "import", str(reported), "--store", str(store))[0] == 0
    board = tmp_path / "board"
    code, _, err = ctxbench("board", "build", "--store", str(store), "--out", str(board))
    assert code == 0, err[-2000:]

    html = (board / "index.html").read_text()
    assert PLANT not in html and "&lt;script&gt;" in html
    assert PLANT not in (board / "leaderboard.md").read_text()
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
         "--enable-logging=stderr", "--v=0", "--dump-dom", (board / "index.html").as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert not re.search(r"<body[^>]*data-pwned", dom.stdout)  # the planted script did not execute
    assert "Uncaught" not in dom.stderr
    assert dom.stdout.count("<table") >= 3
    assert re.search(r"<img[^>]+src=\"data:image/(png|svg)", dom.stdout)  # plots inline
    assert "heatmap" in dom.stdout.lower() or "depth" in dom.stdout.lower()
    shot = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         f"--user-data-dir={tmp_path / 'profile2'}", f"--screenshot={tmp_path / 'shot.png'}", "--window-size=1280,2400",
         (board / "index.html").as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.returncode == 0 and (tmp_path / "shot.png").stat().st_size > 10_000
