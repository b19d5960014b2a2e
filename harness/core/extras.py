"""One extras check: a command or backend that needs an optional install says which, in one line (a ConfigError,
exit 2), before anything is written. Modules are looked up, not imported, so the check costs nothing when they are
there (importing peft or sentence-transformers takes seconds)."""

from __future__ import annotations

import importlib.util
import sys

from ctxbench.harness.core.errors import ConfigError

TORCH_PIN = "torch==2.13.0"  # the README's install: the CPU wheel first, so no extra pulls the CUDA build

# extra (pyproject's optional-dependencies) -> the modules whose absence means the extra is not installed
EXTRAS: dict[str, tuple[str, ...]] = {
    "hf": ("torch", "transformers"),
    "serve": ("httpx", "transformers"),
    "lmeval": ("lm_eval",),
    "vllm": ("vllm",),
    "train": ("torch", "transformers", "accelerate"),
    "synth": ("faiss", "sentence_transformers"),
    "realdata": ("datasets",),
    "logo": ("spacy",),
    "deepspeed": ("deepspeed",),
}


def missing_module(modules: tuple[str, ...]) -> str | None:
    """The first of `modules` that cannot be imported (not installed, or hidden), else None."""
    for name in modules:
        if sys.modules.get(name) is not None:  # imported already (or stood in for: a module object, spec or not)
            continue
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except (ImportError, ValueError):
            return name
    return None


def extra_error(extra: str, *, for_: str, missing: str | None = None, note: str = "") -> ConfigError:
    """The one line for a missing extra; torch gets its own hint, because no extra installs it."""
    if missing == "torch":
        return ConfigError(f"{for_} needs torch, which no extra installs: pip install {TORCH_PIN} first (the CPU wheel, "
                           f"as in the README), then pip install 'ctxbench[{extra}]'")
    why = f" (no module {missing})" if missing else ""
    return ConfigError(f"{for_} needs the {extra} extra{why}: pip install 'ctxbench[{extra}]'{note}")


def require_extra(extra: str, *, for_: str, modules: tuple[str, ...] | None = None, note: str = "") -> None:
    """Refuse `for_` (e.g. "ctxbench lmeval", "backend hf") in one line when the `extra`'s modules are missing."""
    missing = missing_module(EXTRAS[extra] if modules is None else modules)
    if missing is not None:
        raise extra_error(extra, for_=for_, missing=missing, note=note)
