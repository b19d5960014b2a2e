"""`path: stdlib:[pkg,...]` corpora: a copy of the interpreter's own standard-library .py files.

Code that every machine has, so CPU studies and tests need no download; copied once (atomically) because the
stdlib directory also holds site-packages, which must never be read as training data.
"""

from __future__ import annotations

import hashlib
import shutil
import sysconfig
from pathlib import Path
from typing import Any

from filelock import FileLock

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.io import atomic_dir

STDLIB_SKIP = {"site-packages", "dist-packages", "test", "tests", "idlelib", "tkinter", "turtledemo", "lib2to3", "ensurepip",
               "pydoc_data", "__pycache__", "venv", "__phello__"}


def resolve_corpus(corpus: dict[str, Any], root: Path) -> dict[str, Any]:
    """Expand 'stdlib:[pkg,...]' into a copy of those standard-library .py files (the stdlib dir also holds
    site-packages, so it is never read in place); any other path is used as given."""
    path = str(corpus.get("path", ""))
    if not path.startswith("stdlib:"):
        return corpus
    src = Path(sysconfig.get_paths()["stdlib"])
    wanted = [p.strip() for p in path.removeprefix("stdlib:").split(",") if p.strip()]
    tag = hashlib.sha256(f"{src}:{','.join(wanted)}".encode()).hexdigest()[:8]
    dest = root / "corpus" / f"stdlib-{tag}"
    missing = [w for w in wanted if not (src / w).exists()]
    if missing:  # before the lock file and its directory exist: a refusal writes nothing
        raise ConfigError(f"corpus.path: no standard-library package {missing[0]!r} in {src}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(dest) + ".lock"):  # two commands started at once (a study and a training) copy it once
        if not (dest / ".complete").exists():
            with atomic_dir(dest) as tmp:
                _copy_stdlib(src, wanted, tmp, path)
            (dest / ".complete").write_text(str(src))
    # as given (relative to the working directory when root is): an absolute path would enter the packing's config
    # hash, and the same packing copied or run in another directory would no longer be the same
    return {**corpus, "path": str(dest), "format": corpus.get("format", "repo")}


def _copy_stdlib(src: Path, wanted: list[str], tmp: Path, path: str) -> None:
    tops = [src / w for w in wanted] if wanted else sorted(src.iterdir())
    copied = 0
    for top in tops:
        if top.name in STDLIB_SKIP or top.name.startswith(("config-", ".")):
            continue
        for f in [top] if top.is_file() else sorted(top.rglob("*.py")):
            rel = f.relative_to(src)
            if f.suffix != ".py" or any(part in STDLIB_SKIP for part in rel.parts):
                continue
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, tmp / rel)
            copied += 1
    if not copied:
        raise ConfigError(f"corpus.path: {path!r} selects no .py files in {src}")
