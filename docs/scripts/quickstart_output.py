"""Run the README's first command for real and write what it printed into the docs' include files.

    python3 docs/scripts/quickstart_output.py [--data-dir ../shared/data] [--work DIR] [-- extra score flags]

Writes docs/includes/quickstart-score.txt (the table `ctxbench score` printed), quickstart-board.txt (what
`ctxbench board build` printed), quickstart-time.md (the measured wall time, with the machine it ran on) and, when a
headless Chromium is installed, docs/assets/board.png (a screenshot of the board's index.html). The pages include
these files, so the docs show a real run, never a hand-pasted one. Rerun it after a change to the printed table.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
INCLUDES = DOCS / "includes"


def run(cmd: list[str], cwd: Path) -> tuple[str, float]:
    """Run a command as a user would (80 columns, no colour) and return its stdout and wall seconds."""
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}
    start = time.monotonic()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return done.stdout, time.monotonic() - start


def machine() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{os.cpu_count()} CPU cores ({platform.machine()}), 1-minute load {load:.1f} at the start"


def screenshot(index: Path, png: Path) -> bool:
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if not browser:
        return False
    png.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1200,1300", f"--screenshot={png}", index.as_uri()],
                   capture_output=True, timeout=120, check=False)
    return png.exists()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default=str(DOCS.parent.parent / "shared" / "data"))
    parser.add_argument("--work", help="keep the store here (a rerun resumes it); default: a fresh temp dir")
    parser.add_argument("extra", nargs="*", help="extra flags for ctxbench score (e.g. --samples 1)")
    a = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tmp = a.work or scratch
        work = Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        where = machine()
        command = ["ctxbench", "score", "--model", "smollm2-135m", "--suite", "ruler-quick", "--data-dir", a.data_dir, *a.extra]
        timing = work / "quickstart-seconds.txt"  # a resumed run keeps the first, complete run's time
        if timing.exists():
            printed, _ = run(command, work)
            seconds, where = float(timing.read_text().split()[0]), timing.read_text().split(" ", 1)[1]
        else:
            printed, seconds = run(command, work)
            timing.write_text(f"{seconds} {where}")
        board, _ = run(["ctxbench", "board", "build"], work)
        shown = " ".join(["ctxbench", "score", "--model", "smollm2-135m", "--suite", "ruler-quick",
                          "--data-dir", "../shared/data", *a.extra])
        INCLUDES.mkdir(parents=True, exist_ok=True)
        (INCLUDES / "quickstart-score.txt").write_text(f"$ {shown}\n{printed.replace(tmp, '.')}")
        (INCLUDES / "quickstart-board.txt").write_text("$ ctxbench board build\n" + board.replace(tmp, "."))
        when = datetime.now(timezone.utc).strftime("%Y-%m-%d")
        (INCLUDES / "quickstart-time.md").write_text(
            f"This run took **{seconds / 60:.1f} minutes** of wall time on {where} (measured {when} by "
            f"`docs/scripts/quickstart_output.py`, model already converted).\n")
        shot = screenshot(work / "board" / "index.html", DOCS / "assets" / "board.png")
        print(f"wrote {INCLUDES}/quickstart-*.{{txt,md}}" + (" and docs/assets/board.png" if shot else "; no Chromium, no screenshot"))


if __name__ == "__main__":
    main()
