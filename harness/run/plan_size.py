"""How big a score plan is, before any sample is built: an upper bound on lengths, and a memory and time estimate.

A typo'd length (`lengths: [1000000000]`, meant 1000k) must not run a shared machine out of memory: lengths above
CTXBENCH_MAX_LENGTH (default 1M tokens) are refused, and so is a plan whose prompts would not fit the memory
available now. The estimate covers ctxbench's own prompts only (text held per chunk, plus the peak of fitting one
sample); the model's weights and KV cache come on top.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from ctxbench.harness.core.errors import ConfigError

MAX_LENGTH_ENV = "CTXBENCH_MAX_LENGTH"
DEFAULT_MAX_LENGTH = 1 << 20
CHUNK_TOKENS = 1 << 23  # prompt tokens in flight per chunk (~32 MB of text): bounds memory, feeds vLLM large batches
MAX_CHUNK = 1024
TEXT_BYTES_PER_TOKEN = 5  # a held prompt: ~4 characters per token, as a Python str
FIT_BYTES_PER_TOKEN = 448  # fitting one sample: its text, the tokenizer's encoding, token ids and counts at once
# (measured 414 B/token at 1M tokens over the run's baseline, benchmarks/plan_memory.py; it was 64, ~6x low)
BUILD_TOKENS_PER_SECOND = 1_000_000  # prompt tokens built per second (cached haystacks; order of magnitude)


def chunk_size(length: int, batch_size: int) -> int:
    """Samples generated and held at once at one length (the run loop's chunk)."""
    return max(batch_size, min(MAX_CHUNK, CHUNK_TOKENS // max(length, 1)))


@dataclass(frozen=True)
class Estimate:
    samples: int
    tokens: int  # prompt tokens the plan builds (lengths times samples)
    peak_bytes: int  # the largest chunk's prompts held, plus fitting one sample of that length

    @property
    def build_seconds(self) -> float:
        return self.tokens / BUILD_TOKENS_PER_SECOND

    def line(self) -> str:
        return (f"plan: {self.samples} samples, {_count(self.tokens)} prompt tokens; prompts need ~{_bytes(self.peak_bytes)} "
                f"of memory (the model's own on top) and {_duration(self.build_seconds)} to build")

    def check_memory(self) -> None:
        free = available_memory()
        if free and self.peak_bytes > free:
            raise ConfigError(f"lengths: the prompts need ~{_bytes(self.peak_bytes)} of memory, more than the "
                              f"{_bytes(free)} available; use shorter lengths ({self.line()})")


def estimate(cells: Iterable[tuple[int, int]], batch_size: int) -> Estimate:
    """(length, samples) per cell -> the plan's size."""
    samples = tokens = peak = 0
    for length, n in cells:
        samples += n
        tokens += length * n
        if n:
            held = min(n, chunk_size(length, batch_size)) * length * TEXT_BYTES_PER_TOKEN
            peak = max(peak, held + length * FIT_BYTES_PER_TOKEN)
    return Estimate(samples, tokens, peak)


def max_length() -> int:
    raw = os.environ.get(MAX_LENGTH_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_LENGTH
    try:
        value = int(float(raw))
    except ValueError:
        raise ConfigError(f"{MAX_LENGTH_ENV}: expected a number of tokens, got {raw!r}") from None
    if value < 64:
        raise ConfigError(f"{MAX_LENGTH_ENV}: must be at least 64 tokens, got {raw!r}")
    return value


def check_size(suite, *, batch_size: int) -> None:
    """Before anything loads: lengths over the bound (with the estimate, at the suite's sample count), then memory."""
    cells = [(length, suite.samples) for spec in suite.tasks for length in (spec.lengths or suite.lengths) if length]
    size = estimate(cells, max(1, batch_size))
    bound = max_length()
    over = sorted({length for length, _ in cells if length > bound})
    if over:
        raise ConfigError(f"lengths: {', '.join(map(str, over))} is over {bound} tokens, the longest ctxbench plans "
                          f"unless {MAX_LENGTH_ENV} allows more (a typo?); {size.line()}")
    size.check_memory()


def available_memory() -> int:
    """Bytes of memory available now (Linux MemAvailable), or 0 where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def _bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}"
        n /= 1000
    return f"{n:,.0f} TB"


def _count(n: float) -> str:
    for unit in ("", "K", "M"):
        if n < 1000:
            return f"{n:.0f}{unit}"
        n /= 1000
    return f"{n:,.1f}G"


def _duration(seconds: float) -> str:
    if seconds < 1:
        return "under 1 s"
    if seconds < 60:
        return f"~{seconds:.0f} s"
    if seconds < 3600:
        return f"~{seconds / 60:.0f} min"
    return f"~{seconds / 3600:.1f} h"
