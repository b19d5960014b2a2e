"""The store row: one scored sample (or one generation of it), typed, written and read only through `Row`.

samples.jsonl holds one JSON object per line. Every writer (the generation loop, log-prob scoring, lm-eval's
samples) builds a `Row`; `RunStore.append` serialises it and `RunStore.rows` parses every line back through
`Row.from_json`, so a field added later is filled with its default in an older row (4eafb19's rows have no
`cluster`), and a consumer never needs to guess. The fields a mode adds (timing, thinking, a judge's verdict,
log-prob sums, lm-eval's, `repeat`) live in `extra` and are written beside the common ones, as before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ROW_VERSION = 3  # 1: rows up to 4eafb19 (no cluster); 2: `cluster` (samples sharing a haystack) and the typed Row;
# 3: the token account (cached_tokens, reasoning_tokens, token_source, gpu_seconds, cost_usd; docs/cost-and-scale.md)

# Where a row's token counts come from: the server's usage report, ctxbench's own count (the tokenizer, or a local
# backend's generate call), or "" in a row written before version 3 (its counts are not a token account: never cost 0)
TOKEN_SOURCES = ("server", "counted", "")


@dataclass(frozen=True)
class Row:
    """The fields every row has; `extra` holds those of one mode (written flat beside them)."""

    id: str  # task@length#index, with #rN for the r-th generation under --repeats
    task: str
    length: int
    index: int
    metric: str = ""
    score: float | None = None  # None: errored, or a loss task (perplexity) whose numbers are in extra
    category: str = ""
    prediction: str = ""
    answers: tuple[str, ...] = ()
    empty: bool = False
    error: str | None = None  # set: a rerun retries the sample
    depths: tuple[float, ...] = ()
    depth: float | None = None
    position: Any = None
    cluster: Any = None  # samples sharing a haystack or document (None: independent)
    prompt_hash: str = ""
    prompt_tokens: int = 0
    max_new_tokens: int = 0
    generated_tokens: int = 0
    truncated_tokens: int = 0
    # The token account (version 3). None: not recorded (an older row, or a backend that does not know), never 0.
    cached_tokens: int | None = None  # prompt tokens served from a prefix cache (server-reported, or a local KV reuse)
    reasoning_tokens: int | None = None  # generated tokens spent reasoning (part of generated_tokens)
    token_source: str = ""  # server | counted | "" (TOKEN_SOURCES): which counts the row's tokens are
    gpu_seconds: float | None = None  # a GPU backend's device time of the generate call x devices (its share)
    cost_usd: float | None = None  # the row's price under the run's price table (None: no price for the model)
    seconds: float = 0.0
    meta: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The line as stored: the common fields, then the mode's own."""
        out = {f.name: getattr(self, f.name) for f in FIELDS}
        out["answers"], out["depths"], out["meta"] = list(self.answers), list(self.depths), dict(self.meta)
        clash = set(self.extra) & set(out)
        if clash:
            raise ValueError(f"row {self.id}: extra fields {sorted(clash)} shadow the row's own")
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Row:
        """A stored line of any version: missing fields take their defaults, unknown ones go to extra."""
        missing = [n for n in REQUIRED if n not in raw]
        if missing:
            raise ValueError(f"row {raw.get('id', '?')}: missing {', '.join(missing)}")
        known = {f.name: raw[f.name] for f in FIELDS if f.name in raw}
        known["answers"] = tuple(known.get("answers") or ())
        known["depths"] = tuple(known.get("depths") or ())
        known["meta"] = dict(known.get("meta") or {})
        return cls(**known, extra={k: v for k, v in raw.items() if k not in NAMES})

    @staticmethod
    def upgrade(raw: Mapping[str, Any]) -> dict[str, Any]:
        """A stored line of any version as today's: the fields it lacks (an older version's) at their defaults.
        Lenient where from_json is strict: a line without its identity is passed on as it is (the reader that
        needs the identity refuses it, as before)."""
        return {**{k: _default(k) for k in NAMES - set(raw) - set(REQUIRED)}, **raw}


FIELDS = tuple(f for f in dataclasses.fields(Row) if f.name != "extra")
NAMES = frozenset(f.name for f in FIELDS)
def _default(name: str) -> Any:
    f = next(f for f in FIELDS if f.name == name)
    value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    return list(value) if isinstance(value, tuple) else value


REQUIRED = tuple(f.name for f in FIELDS if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
