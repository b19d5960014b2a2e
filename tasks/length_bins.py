"""Fixed-item sets on the length axis: an official item is scored in the length bin its real size falls in.

MRCR, LongBench v2 and BABILong ship fixed texts, not generators. Cutting them to a length changes the item, so a
binned task scores each item whole, at the bin of its size under the SCORED model's tokenizer: the rendered prompt
(chat template included) plus the answer budget, the room it takes in the context. Length L holds the items whose
size lies in (L/2, L], OpenAI MRCR's bins ((4096, 8192], (8192, 16384] ... (524288, 1048576]; the first of them,
at 8192, is closed below as MRCR's is, so the bin at 4096 stops at 4095: an item of exactly 4096 tokens is MRCR's).
The bins are fixed, never moved by a suite's other lengths, so an item's bin is part of its identity; the bins of
powers of two partition the token axis, and a binned task refuses a set of lengths two of whose bins overlap
(`check_disjoint`: lengths less than a factor of 2 apart, such as 3000 and 4096). A suite selects bins with its
lengths, 128K and past it included; a sample's `length` is its bin and `prompt_tokens` its real size. Items keep
their official order within a bin.

Cheap: only what a selected bin needs is tokenised. A few items near the bin calibrate tokens per character, and an
item whose character count puts it clearly outside the bin (by a factor of SLACK either way) is never tokenised;
the exact count decides every item that is. Counts are kept per item in the run's GenContext (one tokenizer and
template), so the bins of one run tokenise an item at most once.
"""

from __future__ import annotations

from collections.abc import Callable

from ctxbench.harness.core.context import GenContext

FIRST_CLOSED = 8192  # MRCR's first bin, [4096, 8192], includes its lower edge
CALIBRATION = 3  # items tokenised to measure tokens per character before the prefilter
SLACK = 1.5  # how far an item's tokens per character may stray from the calibration's and still be tokenised
GUESS = 0.25  # tokens per character before any is measured (English text under a BPE tokenizer)


def bin_edges(length: int) -> tuple[int, int]:
    """(lowest, highest) size in tokens of the items scored at `length`, both included: (L/2, L], but MRCR's first
    bin [4096, 8192] takes its lower edge from the bin below it."""
    low = length // 2
    return (low if length == FIRST_CLOSED else low + 1), (length - 1 if 2 * length == FIRST_CLOSED else length)


def check_disjoint(lengths, what: str) -> None:
    """Refuse lengths whose bins overlap (an item would be scored at both), in one line naming the first pair."""
    from ctxbench.harness.core.errors import ConfigError

    ordered = sorted(set(lengths))
    for below, above in zip(ordered, ordered[1:]):
        if bin_edges(above)[0] <= bin_edges(below)[1]:
            (lo1, hi1), (lo2, hi2) = bin_edges(below), bin_edges(above)
            raise ConfigError(f"lengths: {below} and {above} overlap as length bins of {what} ({lo1}-{hi1} and "
                              f"{lo2}-{hi2} tokens), so an item would be scored at both; give lengths at least a factor "
                              "of 2 apart (e.g. 4k,8k,16k)")


def in_bin(size: int, length: int) -> bool:
    low, high = bin_edges(length)
    return low <= size <= high


def items_in_bin(ctx: GenContext, key: tuple, length: int, chars: list[int], size: Callable[[int], int]) -> list[int]:
    """Indices (official order) of the items whose size, size(i) tokens, lies in length's bin; chars[i] is item i's
    character count (the prefilter's only input). `key` names the item set in ctx's memo (task, args, data)."""
    sizes: dict[int, int] = ctx.memo.setdefault(("length-bins", key), {})
    asked: set[int] = ctx.memo.setdefault(("length-bins-asked", key), set())
    check_disjoint(asked | {length}, str(key[0]))  # the run's other bins of this item set
    asked.add(length)
    low, high = bin_edges(length)

    def measured(i: int) -> int:
        if i not in sizes:
            sizes[i] = size(i)
        return sizes[i]

    target = (low + high) / 2 / GUESS
    for i in sorted(range(len(chars)), key=lambda j: abs(chars[j] - target))[:CALIBRATION]:
        measured(i)
    ratios = [sizes[i] / max(chars[i], 1) for i in sizes]
    lo_ratio, hi_ratio = min(ratios, default=GUESS) / SLACK, max(ratios, default=GUESS) * SLACK
    return [i for i, n in enumerate(chars)
            if (i in sizes or (n * lo_ratio <= high and n * hi_ratio >= low)) and low <= measured(i) <= high]


def bin_item(ctx: GenContext, key: tuple, length: int, index: int, chars: list[int], size: Callable[[int], int],
             what: str) -> int:
    """The official index of sample `index` of length's bin; a ConfigError when the bin has fewer items."""
    from ctxbench.harness.core.errors import ConfigError

    found = items_in_bin(ctx, key, length, chars, size)
    if not 0 <= index < len(found):
        low, high = bin_edges(length)
        raise ConfigError(f"{what}: sample {index} is out of range; the bin of length {length} ({low}-{high} tokens "
                          f"under this tokenizer) holds {len(found)} items (lower the suite's samples)")
    return found[index]
