"""Text and token costs of thousands of uuids at once, without tokenizing them (niah_multikey_3's haystack).

With the usual pre-tokenizers a uuid's text splits into runs of letters (a-f), digits and dashes that no token
crosses, and many tokenizers also split digits one by one. Where the additivity check confirms that for a
tokenizer (on the pieces `pieces()` gives), the cost of " " + uuid is a sum of table look-ups: each digit, each
run of up to 6 letters (a table of all 55,986 such runs, with and without the leading space), and the dashes;
longer letter runs (a few per hundred uuids) are counted once and remembered.
"""

from __future__ import annotations

import itertools
import re

import numpy as np

from ctxbench.harness.core.io import cached_npy
from ctxbench.harness.core.models import cache_dir, tokenizer_fingerprint

PIECES = re.compile(r"[0-9]|[a-f]+|-")
HEX_BYTES = np.frombuffer("".join(f"{i:04x}" for i in range(1 << 16)).encode(), dtype=np.uint8).reshape(-1, 4)
DASH_AFTER = (8, 12, 16, 20)  # nibble positions before which the text has a dash
MAX_RUN = 6
RUNS = ["".join(p) for k in range(1, MAX_RUN + 1) for p in itertools.product("abcdef", repeat=k)]
OFFSET = np.concatenate([[0, 0], np.cumsum([6**k for k in range(1, MAX_RUN + 1)])])  # OFFSET[k]: first run of length k


def draw(nrng: np.random.Generator, m: int) -> np.ndarray:
    """m random uuid4s as rows of eight 16-bit groups (version 4, RFC 4122 variant, as uuid.UUID(version=4))."""
    g = nrng.integers(0, 1 << 16, size=(m, 8))
    g[:, 3] = (g[:, 3] & 0x0FFF) | 0x4000
    g[:, 4] = (g[:, 4] & 0x3FFF) | 0x8000
    return g


def texts(ids: np.ndarray) -> list[str]:
    chars = HEX_BYTES[ids].reshape(len(ids), 32)
    dash = np.full((len(ids), 1), ord("-"), dtype=np.uint8)
    parts = [chars[:, :8], dash, chars[:, 8:12], dash, chars[:, 12:16], dash, chars[:, 16:20], dash, chars[:, 20:]]
    return np.ascontiguousarray(np.concatenate(parts, axis=1)).view("S36").ravel().astype("U36").tolist()


def pieces(text: str) -> list[str]:
    """The pieces whose costs `UuidCosts` adds for " " + text: digits one by one, letter runs, dashes."""
    out = PIECES.findall(text)
    return [" " + out[0], *out[1:]]


class UuidCosts:
    """The cost of " " + uuid for rows of `draw()`, by table (valid where `pieces()` is additive)."""

    def __init__(self, ctx):
        fp = ctx.cached(("fingerprint",), lambda: tokenizer_fingerprint(ctx.tokenizer))
        digits = [str(d) for d in range(10)]
        groups = [digits, [" " + d for d in digits], RUNS, [" " + r for r in RUNS], ["-"]]

        def make():
            return np.concatenate([ctx.piece_counts(g) for g in groups])

        flat = cached_npy(cache_dir("haystacks") / f"uuid-pieces-{fp[:16]}.npy", make, check=lambda a: a.shape == (sum(map(len, groups)),))
        cuts = np.cumsum([0] + [len(g) for g in groups])
        self.digit, self.digit_sp, self.run, self.run_sp = (flat[cuts[i]:cuts[i + 1]] for i in range(4))
        self.dash = int(flat[-1])
        self.ctx = ctx
        self.memo: dict[str, int] = {}  # letter runs longer than MAX_RUN

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        m = len(ids)
        nib = ((ids[:, :, None] >> np.array([12, 8, 4, 0])) & 15).reshape(m, 32)
        letter = nib >= 10
        first = np.zeros(32, dtype=bool)
        first[0] = True
        digits = np.where(first, self.digit_sp[np.minimum(nib, 9)], self.digit[np.minimum(nib, 9)])
        total = np.where(letter, 0, digits).sum(axis=1) + len(DASH_AFTER) * self.dash
        # letter runs: a run starts at a letter after a non-letter, after a dash, or at the start
        before = np.zeros_like(letter)
        before[:, 1:] = letter[:, :-1]
        before[:, list(DASH_AFTER)] = False
        flat_letter, flat_start = letter.ravel(), (letter & ~before).ravel()
        starts = np.flatnonzero(flat_start)
        if not len(starts):
            return total
        rid = (np.cumsum(flat_start) - 1)[flat_letter]
        lengths = np.bincount(rid, minlength=len(starts))
        at = np.flatnonzero(flat_letter) - starts[rid]  # offset of each letter in its run
        weights = (nib.ravel()[flat_letter] - 10) * 6.0 ** (lengths[rid] - 1 - at)
        value = np.bincount(rid, weights=weights, minlength=len(starts))
        lead = starts % 32 == 0
        short = lengths <= MAX_RUN
        idx = OFFSET[np.minimum(lengths, MAX_RUN)] + np.where(short, value, 0).astype(np.int64)
        cost = np.where(lead, self.run_sp[idx], self.run[idx])
        for r in np.flatnonzero(~short):  # rare: runs of 7+ letters
            row, col = divmod(int(starts[r]), 32)
            run = (" " if col == 0 else "") + "".join("abcdef"[x - 10] for x in nib[row, col:col + lengths[r]])
            if run not in self.memo:
                self.memo[run] = int(self.ctx.piece_counts([run])[0])
            cost[r] = self.memo[run]
        return total + np.bincount(starts // 32, weights=cost, minlength=m).astype(np.int64)
