"""Distractor needles by the thousand (the needle haystack of niah_multikey_2/3): drawn with numpy, costed by table.

A line is the needle template with a key and a value, e.g. `One of the special magic numbers for {key} is:
{value}.`. Where the tokenizer is additive at the boundaries inside a line (checked once per tokenizer, see
core.additivity), a line's cost is the cost of the template's literal parts plus table look-ups: a word key as
" adjective" + "-noun", a 7-digit number as " ddd" + "dddd", a uuid as its digits, letter runs and dashes
(tasks/ruler/uuid_costs.py). So a 128K-token haystack of ~6,000 random lines is costed without tokenizing it.
Otherwise every line is tokenized.
"""

from __future__ import annotations

import string

import numpy as np

from ctxbench.harness.core.additivity import check
from ctxbench.harness.core.io import cached_npy
from ctxbench.harness.core.models import cache_dir, tokenizer_fingerprint
from ctxbench.tasks.haystacks import wonderwords_lists
from ctxbench.tasks.ruler import uuid_costs

DIGITS4 = [f"{i:04d}" for i in range(10_000)]


class Values:
    """Random keys or values of one type, as ids (rows of an int64 array), their text and their cost parts."""

    def __init__(self, kind: str):
        self.kind = kind
        if kind == "words":
            lists = wonderwords_lists()
            self.adj, self.noun = lists["adjective"], lists["noun"]

    def draw(self, nrng: np.random.Generator, m: int) -> np.ndarray:
        if self.kind == "numbers":
            return nrng.integers(10**6, 10**7, size=(m, 1))
        if self.kind == "words":
            return np.stack([nrng.integers(0, len(self.adj), m), nrng.integers(0, len(self.noun), m)], axis=1)
        return uuid_costs.draw(nrng, m)

    def text(self, ids: np.ndarray) -> list[str]:
        if self.kind == "numbers":
            return [str(v) for v in ids[:, 0].tolist()]
        if self.kind == "words":
            return [f"{self.adj[a]}-{self.noun[b]}" for a, b in ids.tolist()]
        return uuid_costs.texts(ids)

    def parts(self, row: list[int]) -> list[str]:
        """The pieces whose costs add up to the cost of " " + text (when the tokenizer is additive between them)."""
        if self.kind == "numbers":
            return [f" {row[0] // 10_000}", DIGITS4[row[0] % 10_000]]
        if self.kind == "words":
            return [" " + self.adj[row[0]], "-" + self.noun[row[1]]]
        return uuid_costs.pieces(self.text(np.asarray([row]))[0])

    def tables(self, ctx) -> list[np.ndarray]:
        """Per part, the cost of every possible piece (numbers, words; cached on disk per tokenizer)."""
        if self.kind == "numbers":
            groups = [[f" {i}" for i in range(100, 1000)], DIGITS4]
        else:
            groups = [[" " + w for w in self.adj], ["-" + w for w in self.noun]]
        fp = ctx.cached(("fingerprint",), lambda: tokenizer_fingerprint(ctx.tokenizer))

        def make(pieces=groups):
            return np.concatenate([ctx.piece_counts(list(g)) for g in pieces])

        flat = ctx.cached(("needle-part-tables", self.kind), lambda: cached_npy(
            cache_dir("haystacks") / f"needle-parts-{self.kind}-{fp[:16]}.npy", make, check=lambda a: a.shape == (sum(map(len, groups)),)))
        out, at = [], 0
        for g in groups:
            out.append(flat[at:at + len(g)])
            at += len(g)
        return out

    def costs(self, ctx, ids: np.ndarray) -> np.ndarray:
        if self.kind == "numbers":
            t = self.tables(ctx)
            return t[0][ids[:, 0] // 10_000 - 100] + t[1][ids[:, 0] % 10_000]
        if self.kind == "words":
            t = self.tables(ctx)
            return t[0][ids[:, 0]] + t[1][ids[:, 1]]
        return ctx.cached(("uuid-costs",), lambda: uuid_costs.UuidCosts(ctx))(ids)


class NeedleLines:
    """The lines of a needle haystack for one template and key/value types."""

    def __init__(self, template: str, type_v: str, key_type: str, value_type: str):
        self.template = template.replace("{type_v}", type_v)
        self.keys, self.values = Values(key_type), Values(value_type)
        # literal parts around {key} and {value}; each placeholder's leading space moves into its own piece
        self.parsed = [(lit, f) for lit, f, _, _ in string.Formatter().parse(self.template)]
        fields = sorted(f for _, f in self.parsed if f is not None)
        self.splittable = fields == ["key", "value"] and all(lit.endswith(" ") for lit, f in self.parsed if f is not None)

    def line(self, key: str, value: str) -> str:
        return self.template.format(key=key, value=value)

    def pool(self, ctx, nrng: np.random.Generator, size: int, taken: set[str]) -> tuple[list[str], np.ndarray]:
        """size lines with distinct keys not in taken, and the cost of each as "\\n" + line."""
        ids = self.keys.draw(nrng, size + 16)
        texts = self.keys.text(ids)
        keep = _first_occurrences(texts, taken)
        while len(keep) < size:  # rare: collisions used up the slack
            more = self.keys.draw(nrng, size - len(keep) + 16)
            ids, texts = np.vstack([ids, more]), texts + self.keys.text(more)
            keep = _first_occurrences(texts, taken)
        keep = keep[:size]
        key_ids, value_ids = ids[keep], self.values.draw(nrng, size)
        values = self.values.text(value_ids)
        lines = [self.line(texts[i], v) for i, v in zip(keep.tolist(), values)]
        if self.tabled(ctx):
            costs = self.literal_costs(ctx) + self.keys.costs(ctx, key_ids) + self.values.costs(ctx, value_ids)
        else:
            costs = ctx.piece_counts(["\n" + line for line in lines])
        return lines, np.asarray(costs, dtype=np.int64)

    def literal_pieces(self) -> list[str]:
        """The template's literals, the space before each placeholder cut off (it belongs to the placeholder's
        piece), the first one led by the line separator."""
        out = [lit[:-1] if f is not None else lit for lit, f in self.parsed]
        out[0] = "\n" + out[0]
        return out

    def literal_costs(self, ctx) -> float:
        return float(ctx.cached(("needle-literals", self.template), lambda: ctx.piece_counts([p for p in self.literal_pieces() if p]).sum()))

    def parts_sequence(self, key_row: list[int], value_row: list[int]) -> list[str]:
        """One line as the pieces its table cost adds up."""
        out = []
        for lit, (_, f) in zip(self.literal_pieces(), self.parsed):
            if lit:
                out.append(lit)
            if f == "key":
                out += self.keys.parts(key_row)
            elif f == "value":
                out += self.values.parts(value_row)
        return out

    def tabled(self, ctx) -> bool:
        """Whether line costs may come from the part tables: the template splits, and the tokenizer is additive
        between the parts (checked once per tokenizer on random lines)."""
        if not self.splittable:
            return False

        def probe() -> bool:
            r = np.random.default_rng(0)
            k, v = self.keys.draw(r, 256).tolist(), self.values.draw(r, 256).tolist()
            return check(ctx, {"needle line parts": [self.parts_sequence(a, b) for a, b in zip(k, v)]}).additive

        return ctx.cached(("needle-parts-additive", self.template, self.keys.kind, self.values.kind), probe)


def _first_occurrences(texts: list[str], taken: set[str]) -> np.ndarray:
    """Indices of the first occurrence of each text, in order, skipping texts in taken."""
    seen, keep = set(taken), []
    for i, t in enumerate(texts):
        if t not in seen:
            seen.add(t)
            keep.append(i)
    return np.asarray(keep, dtype=np.int64)
