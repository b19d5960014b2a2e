"""The docs build's viewer screenshot (docs/scripts/viewer_screenshot.py, a mkdocs hook): made in Chromium where it is
installed, a CI build without Chromium fails loudly, a local one gets a placeholder."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def hook(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("viewer_screenshot", REPO / "docs" / "scripts" / "viewer_screenshot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("CTXBENCH_CACHE", str(tmp_path / "cache"))
    return module


def test_mkdocs_runs_the_hook_and_publishing_embeds_its_picture():
    assert "hooks:\n  - docs/scripts/viewer_screenshot.py\n" in (REPO / "mkdocs.yml").read_text()
    assert "](assets/viewer.png)" in (REPO / "docs" / "publishing.md").read_text()


def test_without_chromium_ci_fails_and_a_local_build_gets_a_placeholder(hook, monkeypatch):
    from mkdocs.exceptions import PluginError

    monkeypatch.setattr(hook, "chromium", lambda: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(PluginError, match="Chromium is not installed, and CI=true needs the real screenshot"):
        hook.on_files([], config=None)
    monkeypatch.setenv("CI", "")
    png = hook.screenshot(ci=False)
    assert png.startswith(b"\x89PNG") and len(png) > 1_000


def test_the_picture_is_cached_by_the_code_it_shows(hook, monkeypatch, tmp_path):
    made = []

    def fake_shoot(uri, png, browser, profile):
        made.append(uri)
        png.write_bytes(b"\x89PNG shot")

    monkeypatch.setattr(hook, "chromium", lambda: "/usr/bin/chromium")
    monkeypatch.setattr(hook, "build_board", lambda work: "file:///board/samples.html#model=weak")
    monkeypatch.setattr(hook, "shoot", fake_shoot)
    assert hook.screenshot(ci=True) == hook.screenshot(ci=True) == b"\x89PNG shot"
    assert made == ["file:///board/samples.html#model=weak"]  # the second build read the cache
    monkeypatch.setattr(hook, "source_key", lambda: "changed")
    hook.screenshot(ci=True)
    assert len(made) == 2  # a change to the viewer's code makes a new picture


@pytest.mark.slow  # ~30 s: two echo runs, a board and Chromium (the docs build does exactly this)
@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="mkdocs not installed")
def test_the_real_screenshot_shows_the_viewer(hook, tmp_path):
    if hook.chromium() is None:
        pytest.skip("Debian's chromium is not installed (scripts/setup.sh test installs it)")
    png = hook.screenshot(ci=True)
    assert png.startswith(b"\x89PNG") and len(png) > 50_000
