"""Request ordering for prefix caches: the measure, and that our order beats random on a NIAH depth grid."""

import random

from ctxbench.harness.backends.ordering import common_prefix, prefix_order, shared_prefix_fraction, split_balanced


def test_common_prefix_and_fraction_by_hand():
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2 and common_prefix([1, 2], [1, 2, 3]) == 2 and common_prefix([], [1]) == 0
    seqs = [[1, 2, 3, 4], [9, 9, 9, 9], [1, 2, 3, 5]]
    assert shared_prefix_fraction(seqs, [0, 1, 2], block_size=1) == 0.0
    assert shared_prefix_fraction(seqs, [0, 2, 1], block_size=1) == 3 / 12
    assert shared_prefix_fraction(seqs, [0, 1, 2], window=2, block_size=1) == 3 / 12  # a bigger cache remembers it
    assert shared_prefix_fraction(seqs, [0, 2, 1], block_size=2) == 2 / 12  # only whole blocks count
    assert shared_prefix_fraction([[7, 7], [7, 7]], block_size=1) == 1 / 4  # the last token is always computed
    assert prefix_order(seqs) == [0, 2, 1] and prefix_order(["b", "a", "ab"]) == [1, 2, 0]


def test_split_balanced_keeps_runs_contiguous():
    order = [3, 0, 2, 1, 4]
    parts = split_balanced(order, [10, 10, 10, 10, 10], 2)
    assert sum(parts, []) == order and [len(p) for p in parts] == [3, 2]
    assert split_balanced(order, [1] * 5, 1) == [order]


def test_prefix_order_beats_random_on_a_depth_grid(gen_ctx, smol_tokenizer):
    from ctxbench.harness.core import datasets
    from ctxbench.harness.core.config import TaskSpec, build_task

    task = build_task(TaskSpec(task="niah/single", args={"depths": 11}))
    samples = [s for length in (512, 1024) for s in datasets.generate(task, length=length, indices=range(11), seed=42, ctx=gen_ctx)]
    ids = [smol_tokenizer(s.prompt, add_special_tokens=s.add_special_tokens)["input_ids"] for s in samples]
    ours = shared_prefix_fraction(ids, prefix_order(ids))
    randoms = []
    for seed in range(20):
        perm = list(range(len(ids)))
        random.Random(seed).shuffle(perm)
        randoms.append(shared_prefix_fraction(ids, perm))
    assert ours > max(randoms) and ours > 1.3 * sum(randoms) / len(randoms), (ours, randoms)
    runner = sorted(range(len(samples)), key=lambda i: (samples[i].max_new_tokens, -samples[i].length, samples[i].prompt))
    assert ours >= shared_prefix_fraction(ids, runner)  # at least as good as the runner's own sort
