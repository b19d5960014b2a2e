"""Journey (issue 36, first "Done when"): score two models on a small suite, build the board, open it in Chromium,
click from a cell to its samples, filter to the wrong answers, diff the two models on one sample."""

from __future__ import annotations

import json

import pytest

from tests.test_viewer_browser import CHROMIUM, Browser

from .conftest import User

SCORE = "ctxbench score --backend echo --suite ruler-quick --tasks ruler/niah_single_1 --lengths 512 --samples 8"


@pytest.mark.slow  # ~20 s: two scoring runs, a board and Chromium; tests/test_viewer_browser.py runs the clicks by default
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (scripts/setup.sh test installs it)")
def test_score_two_models_build_click_a_cell_filter_wrong_and_diff(user: User, data_dir, tmp_path):
    # the echo backend answers right with this probability, drawn per sample id: what weak gets right, strong gets too
    for label, accuracy in (("strong", 0.9), ("weak", 0.3)):
        r = user.run(f"{SCORE} --label {label} --backend-arg accuracy={accuracy}")
        assert r.code == 0, r.err[-2000:]
    r = user.run("ctxbench board build")
    assert r.code == 0, r.err[-2000:]
    stored = {json.loads(x)["id"]: json.loads(x)["score"] for d in (user.cwd / "runs").glob("*weak*")
              for x in (d / "samples.jsonl").read_text().splitlines()}
    wrong = sorted(sid for sid, score in stored.items() if score == 0)
    assert wrong and len(wrong) < len(stored), stored  # the filter has something to drop and something to keep

    browser = Browser(tmp_path / "profile")
    try:
        browser.open((user.cwd / "board" / "index.html").as_uri())
        browser.js("document.querySelector('a.cell[href*=\"model=weak\"]').click()")
        browser.until("location.pathname.endsWith('samples.html') && document.querySelectorAll('.card').length === 8")
        # each prompt regenerated from the run's suite and seed, its hash the stored one, the needle marked in it
        browser.until("document.querySelectorAll('.card .prompt-slot details').length === 8")
        summaries = browser.js("[...document.querySelectorAll('.card .prompt-slot summary')].map(s => s.textContent)")
        assert all(", regenerated, hash " in s for s in summaries), summaries
        gold = browser.js("[...document.querySelectorAll('.card .prompt-slot mark.needle mark.gold')].map(m => m.textContent)")
        assert len(gold) == 8 and all(g.isdigit() for g in gold)
        browser.js("var s = document.querySelector('select[name=score]'); s.value = 'wrong'; s.dispatchEvent(new Event('change'))")
        browser.until(f"document.querySelectorAll('.card').length === {len(wrong)}")
        assert sorted(browser.js("[...document.querySelectorAll('.card')].map(c => c.dataset.id)")) == wrong
        assert set(browser.js("[...document.querySelectorAll('.card')].map(c => c.dataset.model)")) == {"weak"}
        browser.js("document.querySelector('.card button.diff').click()")
        browser.until("!!document.querySelector('#diff table')")
        rows = browser.js("[...document.querySelectorAll('#diff tr')].map(r => [...r.children].map(c => c.textContent))")
        assert rows[0] == ["", "weak", "strong"] and rows[1][0] == "score" and rows[1][1] == "0"
        assert browser.errors == []
    finally:
        browser.close()
