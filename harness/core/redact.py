"""Credentials never reach a record, a log line or an error message.

A URL keeps its scheme, host and path but loses its user-info (`http://user:pass@host` -> `http://***@host`);
authorization headers and bearer/basic tokens that a server echoes back lose their value; and any secret the
caller knows (an API key, a URL password, its base64 Basic form) is replaced wherever it appears.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, urlsplit

MASK = "***"
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<info>[^/?#@\s]+)@")
_AUTH_FIELD = re.compile(
    r"(?i)(?P<key>\b(?:proxy-)?authorization|\bx-api-key|\bapi[-_]?key|\baccess[-_]token)"
    r"(?P<sep>[\"']?\s*[:=]\s*[\"']?)(?P<scheme>(?:bearer|basic|token)\s+)?(?P<value>[^\s\"',;}&]+)")
_TOKEN = re.compile(r"(?i)\b(?P<scheme>bearer|basic)\s+(?P<value>[A-Za-z0-9._~+/=-]{6,})")


def url_secrets(url: str) -> list[str]:
    """The password (and the Basic header value) carried by a URL's user-info, to mask wherever they appear."""
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return []
    if not parts.password and not parts.username:
        return []
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    return [s for s in (password, parts.password, basic, f"{parts.username}:{parts.password}") if s and len(s) >= 3]


def redact(text: Any, secrets: Iterable[str] = ()) -> str:
    """`text` with URL user-info, authorization values and the given secrets replaced by ***."""
    out = str(text)
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        out = out.replace(secret, MASK)
    out = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", out)
    out = _AUTH_FIELD.sub(lambda m: f"{m['key']}{m['sep']}{m['scheme'] or ''}{MASK}", out)
    return _TOKEN.sub(lambda m: f"{m['scheme']} {MASK}", out)


def redact_all(value: Any, secrets: Iterable[str] = ()) -> Any:
    """redact() applied to every string inside lists and dicts (a record's command line and backend args)."""
    secrets = list(secrets)
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {k: redact_all(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_all(v, secrets) for v in value]
    return value


_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_UNPRINTABLE_INLINE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: Any, *, keep_lines: bool = False) -> str:
    """`text` safe to show on a terminal, in a page or a table cell: control characters (ESC, BEL, a newline) and
    bidirectional overrides become visible escapes (`\\x1b`, `\\u202e`), so a label cannot clear a screen, retitle a
    window or reorder a table. Other text, CJK included, is kept. `keep_lines` keeps newlines and tabs."""
    pattern = _UNPRINTABLE_INLINE if keep_lines else _UNPRINTABLE
    return pattern.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))
