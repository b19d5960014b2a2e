"""The sample viewer in headless Chromium: a cell's link opens its samples, filters narrow them, two models diff.

Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe: no port, no websocket library), so
the test clicks a real link and changes a real <select>, as a reader does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

from tests.leaderboard.test_viewer import make_board

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (scripts/setup.sh test installs it)")


class Browser:
    """A headless Chromium page over the DevTools pipe (fd 3: commands in, fd 4: replies out, NUL-separated JSON)."""

    def __init__(self, profile):
        to_child, self._to_chrome = os.pipe()
        self._from_chrome, from_child = os.pipe()

        def fds():  # the pipe ends onto fds 3 and 4, even where one of them was already 3 or 4
            high = os.dup(to_child), os.dup(from_child)
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}", "--remote-debugging-pipe",
             "about:blank"], preexec_fn=fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_child)
        os.close(from_child)
        self._buf, self._id, self.errors = b"", 0, []
        page = next(t for t in self.send("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self.send("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
        self.send("Runtime.enable", session=True)

    def send(self, method, session=False, **params):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params, **({"sessionId": self.session} if session else {})}
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self._buf:
                chunk = os.read(self._from_chrome, 1 << 16)
                assert chunk, "chromium closed the DevTools pipe"
                self._buf += chunk
            line, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(line)
            if reply.get("method") == "Runtime.exceptionThrown":
                self.errors.append(reply["params"]["exceptionDetails"])
            if reply.get("id") == self._id:
                assert "error" not in reply, reply
                return reply["result"]

    def js(self, expression):
        result = self.send("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def until(self, expression, tries=200):
        """Poll the page until `expression` is truthy (a count of tries, never a clock, decides failure)."""
        for _ in range(tries):
            value = self.js(expression)
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"never true in the page: {expression}")

    def open(self, uri):
        self.send("Page.navigate", session=True, url=uri)
        self.until("document.readyState === 'complete'")

    def close(self):
        self.proc.kill()
        self.proc.wait(timeout=30)
        os.close(self._to_chrome)
        os.close(self._from_chrome)


@pytest.fixture
def browser(tmp_path):
    b = Browser(tmp_path / "profile")
    yield b
    b.close()


def _choose(browser, name, value):
    browser.js(f"var s = document.querySelector('select[name={name}]'); s.value = {json.dumps(value)};"
               "s.dispatchEvent(new Event('change'))")


def test_cell_to_samples_to_wrong_answers_to_a_diff(tmp_path, browser):
    board = make_board(tmp_path)
    browser.open((board / "index.html").as_uri())
    assert browser.js("document.querySelectorAll('a.cell').length") == 8
    browser.js("document.querySelector('a.cell[href*=\"model=alpha\"][href*=\"task=niah\"][href$=\"length=512\"]').click()")
    browser.until("location.pathname.endsWith('samples.html') && document.querySelectorAll('.card').length === 3")
    assert browser.js("[...document.querySelectorAll('.card')].map(c => c.dataset.id)") == [
        "niah/single@512#0", "niah/single@512#1", "niah/single@512#2"]
    assert not browser.js("document.body.hasAttribute('data-pwned')")  # the planted answer and prompt stayed text
    assert "onerror=" in browser.js("document.querySelector('.card pre.answer').textContent")
    browser.until("!!document.querySelector('.card .prompt-slot details')")  # the cell's prompts, loaded when shown
    assert browser.js("document.querySelector('.card .prompt-slot mark.gold').textContent") == "7000"  # the gold, in the prompt

    _choose(browser, "score", "wrong")
    browser.until("document.querySelectorAll('.card').length === 1")
    assert browser.js("document.querySelector('.card').dataset.id") == "niah/single@512#0"
    _choose(browser, "model", "beta")
    browser.until("document.querySelector('.card') && document.querySelector('.card').dataset.model === 'beta'")
    assert browser.js("[...document.querySelectorAll('.card')].map(c => c.dataset.id)") == ["niah/single@512#2"]

    browser.js("document.querySelector('.card button.diff').click()")
    browser.until("!!document.querySelector('#diff table')")
    assert browser.js("document.querySelector('#diff h2').textContent") == "diff on niah/single@512#2"
    cells = browser.js("[...document.querySelectorAll('#diff tr')].map(r => [...r.children].map(c => c.textContent))")
    assert cells[0] == ["", "beta", "alpha"] and cells[1] == ["score", "0", "1"]
    marks = "[...document.querySelectorAll('#diff mark.ins')].map(m => m.textContent)"
    assert browser.js(marks) == ["The", "magic", "number", "7002."]  # a word diff of the two answers
    assert browser.errors == []


FILLER = "The grass is green. The sky is blue. " * 130  # 4,810 characters either side of the needle
LONG = f"{FILLER}The magic number is 7000.{FILLER}Someone said: I think it is 0. Not 17000. What is the magic number?"


def test_a_long_prompt_opens_as_excerpts_with_the_needle_gold_and_answer_marked_and_expands(tmp_path, browser):
    board = make_board(tmp_path, plant=False, prompts={0: LONG})
    browser.open((board / "samples.html").as_uri() + "#model=alpha&task=niah%2Fsingle&length=512")
    browser.until("document.querySelectorAll('.card .prompt-slot details').length === 3")
    first = "document.querySelector('.card[data-id=\"niah/single@512#0\"] .prompt-slot')"
    assert browser.js(f"{first}.querySelector('summary').textContent").startswith(f"prompt ({len(LONG)} characters, stored")
    assert browser.js(f"{first}.querySelector('mark.needle').textContent") == "The magic number is 7000."
    assert browser.js(f"{first}.querySelector('mark.needle mark.gold').textContent") == "7000"
    assert browser.js(f"{first}.querySelectorAll('mark.gold').length") == 1  # whole words: not the 7000 in 17000
    assert browser.js(f"{first}.querySelector('mark.answer').textContent") == "I think it is 0."
    collapsed = browser.js(f"{first}.querySelector('pre.prompt').textContent")  # head, tail, the text around the marks
    assert browser.js(f"{first}.querySelectorAll('.gap').length") == 2 and len(collapsed) < 4_000
    assert collapsed.startswith(LONG[:600]) and collapsed.endswith(LONG[-1200:])
    browser.js(f"{first}.querySelector('button.expand').click()")
    assert browser.js(f"{first}.querySelector('pre.prompt').textContent") == LONG  # the whole prompt, a click away
    assert browser.js(f"{first}.querySelectorAll('.gap').length") == 0
    browser.js(f"{first}.querySelector('button.expand').click()")
    assert browser.js(f"{first}.querySelector('pre.prompt').textContent") == collapsed  # and folded again
    short = "document.querySelector('.card[data-id=\"niah/single@512#1\"] .prompt-slot')"
    assert browser.js(f"{short}.querySelector('pre.prompt').textContent").startswith("Haystack text.")  # whole, no button
    assert browser.js(f"{short}.querySelector('button.expand')") is None
    assert browser.errors == []


@pytest.mark.slow
def test_a_board_of_ten_thousand_samples_opens_one_cell_and_refuses_to_load_all(tmp_path, browser):
    board = make_board(tmp_path, per_cell=1250, plant=False)  # 2 models x 2 tasks x 2 lengths x 1250 = 10,000 samples
    browser.open((board / "samples.html").as_uri())
    browser.until("document.getElementById('status').textContent.includes('pick a model')")
    assert browser.js("document.querySelectorAll('.card').length") == 0
    assert browser.js("document.querySelectorAll('script[src*=\"/c\"]').length") == 0  # no cell loaded yet
    browser.open((board / "samples.html").as_uri() + "#model=beta&task=kv%2Fretrieval&length=1024&score=wrong")
    count = int(browser.until("document.getElementById('status').dataset.count"))
    assert count == sum(1 for i in range(1250) if (i + 1) % 3 == 0)
    assert browser.js("document.querySelectorAll('.card').length") == 100  # one page of cards, "show more" for the rest
    assert browser.js("document.querySelectorAll('script[src*=\"/c\"]').length") == 1  # only that cell's file
    browser.until("document.querySelectorAll('.card .prompt-slot details').length === 100")
    loaded = "[...document.querySelectorAll('script[src*=\"/{}\"]')].map(s => s.src.split('/').pop())"
    assert browser.js(loaded.format("p")) == ["p5.js"] == [f"p{c[1:]}" for c in browser.js(loaded.format("c"))]  # and
    # only that cell's prompts (cells sorted by model, task, length: beta, kv/retrieval, 1024 is the 6th)
    assert browser.errors == []
