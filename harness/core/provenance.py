"""What a record needs to say where a number came from: package versions and the ctxbench commit."""

from __future__ import annotations

import functools
import platform
import subprocess
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

# What every run and training depends on (tokenizers, data, training); each backend declares its own beside these
# (register("backend", NAME, distributions=(...))), a plugin's too.
CORE_DISTRIBUTIONS = ("ctxbench", "torch", "transformers", "tokenizers", "wonderwords", "numpy", "trl", "peft", "datasets")


def distributions() -> tuple[str, ...]:
    """The distributions whose versions a record names: the core ones, then every registered backend's declared ones."""
    from ctxbench.harness.core import registry

    declared = [d for name in registry.names("backend") for d in registry.backend_traits(name).distributions]
    return tuple(dict.fromkeys([*CORE_DISTRIBUTIONS, *declared]))


def version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str]:
    """Python and the installed versions of the packages that can change a result."""
    out = {"python": platform.python_version()}
    for dist in distributions():
        v = version(dist)
        if v:
            out[dist] = v
    commit = git_commit()
    if commit:
        out["ctxbench_commit"] = commit
    return out


def plugins_used(entries: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    """The plugin distributions (name and version) behind the registry entries (kind, name) a run used, so a
    record says which third-party code produced its numbers."""
    from ctxbench.harness.core import registry

    out = []
    for kind, name in sorted(set(entries)):
        origin = registry.origin(kind, name)
        if origin is not None:
            out.append({"kind": kind, "name": name, "distribution": origin.distribution, "version": origin.version})
    return out


@functools.cache
def git_commit() -> str | None:
    """The commit of a ctxbench checkout (editable install), with '+dirty' for local changes; None for a wheel."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}+dirty" if sha and dirty else (sha or None)
