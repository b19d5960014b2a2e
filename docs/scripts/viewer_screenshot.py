"""The publishing page's screenshot of the sample viewer, made by the docs build (a mkdocs hook, mkdocs.yml `hooks:`).

At every build it scores two echo "models" on a few RULER samples, builds their board and screenshots the viewer in
headless Chromium (two models' wrong answers, one sample diffed, its prompt with the needle marked), and adds the PNG
to the site as assets/viewer.png: nothing binary is committed, so the picture never shows an older viewer. The PNG is
cached by the content of the code it shows (leaderboard/, this file), so a rebuild without changes is instant.

Without Chromium a CI build (CI=true) fails, saying how to install it; a local build gets a placeholder image that
says why. Run by hand: ``python3 docs/scripts/viewer_screenshot.py OUT.png``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parents[2]
SITE_PATH = "assets/viewer.png"
SCORE = ["score", "--backend", "echo", "--suite", "ruler-quick", "--tasks", "ruler/niah_single_1", "--lengths", "512",
         "--samples", "6"]
WINDOW = "1280,1500"
log = logging.getLogger("mkdocs.hooks.viewer_screenshot")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _cli(args: list[str], cwd: Path) -> None:
    """One ctxbench command, as a user types it; a failure is a bug in what the screenshot shows: raised."""
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "ctxbench.harness.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)
    if done.returncode:
        raise RuntimeError(f"ctxbench {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-1000:]}")


def build_board(work: Path) -> str:
    """Score two echo models (right 90% and 30% of the time), build the board; the viewer's address showing the weak
    model's wrong answers with one of them diffed against the strong model."""
    for label, accuracy in (("strong", 0.9), ("weak", 0.3)):
        _cli([*SCORE, "--label", label, "--backend-arg", f"accuracy={accuracy}"], work)
    _cli(["board", "build"], work)
    (weak,) = (work / "runs").glob("weak-*")
    rows = [json.loads(x) for x in (weak / "samples.jsonl").read_text().splitlines()]
    wrong = sorted(r["id"] for r in rows if r["score"] == 0)
    view = {"model": "weak", "score": "wrong", **({"diff": wrong[0], "a": "weak", "b": "strong"} if wrong else {})}
    fragment = "&".join(f"{k}={quote(v, safe='')}" for k, v in view.items())
    return (work / "board" / "samples.html").as_uri() + "#" + fragment


def shoot(uri: str, png: Path, browser: str, profile: Path) -> None:
    """A headless Chromium screenshot; virtual time lets the lazily loaded cell and prompt scripts run first."""
    done = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--virtual-time-budget=10000", f"--window-size={WINDOW}",
         f"--screenshot={png}", uri], capture_output=True, text=True, timeout=180)
    if not png.is_file() or png.stat().st_size < 10_000:
        raise RuntimeError(f"chromium made no screenshot of the viewer (exit {done.returncode}): {done.stderr[-1000:]}")


def placeholder(reason: str) -> bytes:
    """A PNG that says why the screenshot is missing (a local build without Chromium)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(8, 1.2), dpi=100)
    fig.text(0.02, 0.5, f"Screenshot of the sample viewer not made here:\n{reason}", va="center", fontsize=11)
    out = io.BytesIO()
    fig.savefig(out, format="png")
    plt.close(fig)
    return out.getvalue()


def source_key() -> str:
    """What the screenshot depends on in this repository: the leaderboard's code and this script."""
    digest = hashlib.sha256()
    for path in sorted([*(REPO / "leaderboard").rglob("*.py"), Path(__file__)]):
        digest.update(path.relative_to(REPO).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def screenshot(ci: bool) -> bytes:
    """The viewer's PNG (cached by source_key), or the placeholder; in CI a missing Chromium is an error."""
    from ctxbench.harness.core.models import cache_dir

    browser = chromium()
    if browser is None:
        if ci:
            raise RuntimeError("viewer screenshot: Chromium is not installed, and CI=true needs the real screenshot; "
                               "install it (`bash scripts/setup.sh test`, or apt-get install chromium)")
        log.info("viewer screenshot: no Chromium here, so docs/publishing.md shows a placeholder")
        return placeholder("Chromium is not installed (bash scripts/setup.sh test installs it; CI builds require it).")
    cached = cache_dir("docs") / f"viewer-{source_key()}.png"
    if not cached.is_file():
        with tempfile.TemporaryDirectory(prefix="ctxbench-viewer-shot-") as tmp:
            work = Path(tmp)
            png = work / "viewer.png"
            shoot(build_board(work), png, browser, work / "profile")
            for old in cached.parent.glob("viewer-*.png"):  # pictures of code that changed since
                old.unlink(missing_ok=True)
            shutil.copyfile(png, cached)
    return cached.read_bytes()


def on_files(files, config):
    """mkdocs hook: add the screenshot to the site's files, so the page's image link resolves under --strict."""
    from mkdocs.exceptions import PluginError
    from mkdocs.structure.files import File

    try:
        content = screenshot(ci=os.environ.get("CI", "").lower() in ("true", "1"))
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        raise PluginError(str(e)) from None
    files.append(File.generated(config, SITE_PATH, content=content))
    return files


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 docs/scripts/viewer_screenshot.py OUT.png")
    Path(sys.argv[1]).write_bytes(screenshot(ci=os.environ.get("CI", "").lower() in ("true", "1")))
