"""Does a tokenizer count a concatenation as the sum of its pieces? Checked once per tokenizer and probe set.

The fast generation path trusts piece counts: a prompt's tokens = the tokens of its fixed part (measured on
the sample's own short prompt) + the exact token counts of its haystack pieces. That is exact when the
tokenizer is additive at every boundary the prompt contains: count(a + b) == count(a) + count(b).
Byte-level BPE with a pre-tokenizer and SentencePiece with whitespace splitting usually are, at word, line and
document boundaries; a BPE whose merges cross word boundaries is not.

A task gives, per kind of boundary it uses (word, needle, line, document, list item, template edges), sequences
of real pieces in the order they meet in a prompt. Each sequence is counted whole and piece by piece, and each
adjacent pair of pieces too (so that errors in opposite directions cannot cancel). One mismatch refuses the fast
path for that task on that tokenizer. Results are cached on disk by tokenizer fingerprint and a hash of the
probes, so the check runs once per tokenizer.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ctxbench.harness.core.io import atomic_write_json
from ctxbench.harness.core.models import cache_dir, tokenizer_fingerprint

PROBE_VERSION = 1


@dataclass(frozen=True)
class Additivity:
    """The verdict for one task's probes: additive at every probed boundary, and per-kind details."""

    additive: bool
    kinds: dict[str, dict[str, Any]] = field(default_factory=dict)  # kind -> sequences, boundaries, failures, example
    reason: str = ""  # why the fast path is refused without probing (e.g. a template the layout cannot split)

    def failed_kinds(self) -> list[str]:
        return [k for k, v in self.kinds.items() if v["failures"]]


def refused(reason: str) -> Additivity:
    return Additivity(False, {}, reason)


BLOCK_TEXTS = 65536  # strings (pieces, pairs, wholes) counted per block


def check(ctx, probes: dict[str, list[list[Any]]]) -> Additivity:
    """Count every probe sequence whole, by pieces and by adjacent pairs. Each kind's verdict is cached on disk by
    tokenizer fingerprint and a hash of its sequences, so kinds that tasks share (the essay) are checked once."""
    fp = ctx.cached(("fingerprint",), lambda: tokenizer_fingerprint(ctx.tokenizer))
    kinds = {kind: _cached_kind(ctx, fp, kind, seqs) for kind, seqs in probes.items()}
    return Additivity(all(not v["failures"] for v in kinds.values()) and bool(kinds), kinds)


def _cached_kind(ctx, fp: str, kind: str, sequences: list[list[Any]]) -> dict[str, Any]:
    digest = hashlib.sha256(json.dumps([PROBE_VERSION, fp, sequences]).encode()).hexdigest()[:20]
    memo = ctx.cached(("additivity-kinds",), dict)
    if digest in memo:
        return memo[digest]
    path = cache_dir("additivity") / f"{digest}.json"
    try:
        memo[digest] = json.loads(path.read_text())["result"]
        return memo[digest]
    except (OSError, ValueError, KeyError):
        pass  # not checked yet (or a corrupt entry): check now
    memo[digest] = result = _check_kind(ctx, sequences)
    atomic_write_json(path, {"kind": kind, "tokenizer": fp, "result": result})
    return result


def _check_kind(ctx, sequences: list[list[Any]]) -> dict[str, Any]:
    """A piece is a string (its cost: its stand-alone count) or [left, text, right] (its cost: measured in place,
    count(left + text + right) - count(left) - count(right), as a task that measures costs between separators does).

    Sequences are checked in blocks of about BLOCK_TEXTS strings: the essay kind alone is ~10^6 pieces, and holding
    every piece, pair and plan at once cost ~400 MB of peak memory."""
    failures, example, boundaries = 0, None, 0
    block: list[list[Any]] = []
    size = 0
    for k, seq in enumerate(sequences):
        block.append(seq)
        size += 3 * len(seq) + 1
        if size >= BLOCK_TEXTS or k == len(sequences) - 1:
            f, ex, b = _check_block(ctx, block)
            failures, boundaries, example = failures + f, boundaries + b, example or ex
            block, size = [], 0
    return {"sequences": len(sequences), "boundaries": boundaries, "failures": failures, "example": example}


def _check_block(ctx, sequences: list[list[Any]]) -> tuple[int, dict | None, int]:
    """(failures, the first failure's example, boundaries) of these sequences, counted in one batched call."""
    texts: list[str] = []
    plans = []
    for seq in sequences:
        pieces = []
        for p in seq:
            if isinstance(p, str):
                pieces.append((p, [(len(texts), 1)]))
                texts.append(p)
            else:
                left, text, right = p
                pieces.append((text, [(len(texts), 1), (len(texts) + 1, -1), (len(texts) + 2, -1)]))
                texts.extend([left + text + right, left, right])
        whole = len(texts)
        texts.append("".join(t for t, _ in pieces))
        pairs = []  # adjacent stand-alone pieces, so that errors of opposite sign cannot cancel
        for (a, ta), (b, tb) in zip(pieces, pieces[1:]):
            if len(ta) == 1 and len(tb) == 1:
                pairs.append((ta[0][0], tb[0][0], len(texts)))
                texts.append(a + b)
        plans.append((pieces, whole, pairs))
    counts = ctx.piece_counts(texts) if texts else np.zeros(0, dtype=np.int64)
    failures, example, boundaries = 0, None, 0
    for seq, (pieces, whole, pairs) in zip(sequences, plans):
        costs = [sum(sign * int(counts[i]) for i, sign in terms) for _, terms in pieces]
        boundaries += max(len(pieces) - 1, 0)
        bad = [(i, j) for i, j, ij in pairs if counts[ij] != counts[i] + counts[j]]
        if int(counts[whole]) != sum(costs) or bad:
            failures += 1
            if example is None:
                i, j = bad[0] if bad else (None, None)
                example = {"left": texts[i][-60:] if bad else "", "right": texts[j][:60] if bad else "",
                           "whole": int(counts[whole]), "sum": sum(costs)}
    return failures, example, boundaries
