"""Token lengths as people write them: 4096, "4K", "128k", "1M" (K = 1024, as RULER), and back."""

from __future__ import annotations

import math
import numbers
import re

_LENGTH_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")
_UNITS = {"": 1, "k": 1024, "m": 1024**2}


def parse_length(text: object) -> int:
    """Parse ``4096``, ``"4K"``, ``"128k"`` or ``"1M"`` into tokens (K = 1024, as RULER)."""
    if isinstance(text, numbers.Integral) and not isinstance(text, bool):  # numpy integers register here too
        return int(text)
    if isinstance(text, numbers.Real) and float(text).is_integer():
        return int(text)
    match = _LENGTH_RE.match(str(text))
    if not match:
        raise ValueError(f"not a length: {text!r}")
    value = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if not value.is_integer():
        raise ValueError(f"not a whole number of tokens: {text!r}")
    return int(value)


def format_length(tokens: float | int | None) -> str:
    """Display a token count the way papers do: 4096 -> "4K", 1048576 -> "1M"."""
    if tokens is None or type(tokens).__name__ == "NAType" or (isinstance(tokens, numbers.Real) and math.isnan(tokens)):
        return "—"
    tokens = int(tokens)
    for unit, size in (("M", 1024**2), ("K", 1024)):
        if tokens >= size and tokens % size == 0:
            return f"{tokens // size}{unit}"
    return str(tokens)
