"""What sequential scoring saves on RULER's protocol, and whether it reaches the paper protocol's verdicts.

The 17 models of RULER's Table 3 (Hsieh et al. 2024; ../shared/papers/ruler.md): their mean over the 13 tasks at
4K..128K. Each length's mean is spread over 13 tasks logit-normally (sd 1 on the logit scale, shifted so the
average is the table's), each sample drawn independently. The full protocol scores N=500 samples per task and
length (39,000 per model) and reads the effective length from the point estimates: the longest length at or above
85.6. The adaptive run scores the same samples as a prefix, round by round, with `--until effective-length`:
each length stops once settled (above or below 85.6, α=0.05 split over the 6 lengths) or at N, where it reads
the full protocol's point estimate. (Also stopping a length once a longer one is settled above saves < 0.5 points
more: the short lengths settle first anyway.)

    python benchmarks/sequential_savings.py --reps 200          # the published table (about a minute)
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import special, stats

from ctxbench.harness.core.stats.sequential import RULER_THRESHOLD, StopRule, first_settled

LENGTHS = ("4K", "8K", "16K", "32K", "64K", "128K")
TABLE3 = {  # RULER Table 3, % (mean of the 13 tasks)
    "Gemini-1.5-Pro": (96.7, 95.8, 96.0, 95.9, 95.9, 94.4),
    "GPT-4": (96.6, 96.3, 95.2, 93.2, 87.0, 81.2),
    "Llama3.1 (70B)": (96.5, 95.8, 95.4, 94.8, 88.4, 66.6),
    "Qwen2 (72B)": (96.9, 96.1, 94.9, 94.1, 79.8, 53.7),
    "Command-R-plus (104B)": (95.6, 95.2, 94.2, 92.0, 84.3, 63.1),
    "GLM4 (9B)": (94.7, 92.8, 92.1, 89.9, 86.7, 83.1),
    "Llama3.1 (8B)": (95.5, 93.8, 91.6, 87.4, 84.7, 77.0),
    "GradientAI/Llama3 (70B)": (95.1, 94.4, 90.8, 85.4, 80.9, 72.1),
    "Mixtral-8x22B": (95.6, 94.9, 93.4, 90.9, 84.7, 31.7),
    "Yi (34B)": (93.3, 92.2, 91.3, 87.5, 83.2, 77.3),
    "Phi3-medium (14B)": (93.3, 93.2, 91.1, 86.8, 78.6, 46.1),
    "Mistral-v0.2 (7B)": (93.6, 91.2, 87.2, 75.4, 49.0, 13.8),
    "LWM (7B)": (82.3, 78.4, 73.7, 69.1, 68.1, 65.0),
    "DBRX": (95.1, 93.8, 83.6, 63.1, 2.4, 0.0),
    "Together (7B)": (88.2, 81.1, 69.4, 63.0, 0.0, 0.0),
    "LongChat (7B)": (84.7, 79.9, 70.8, 59.3, 0.0, 0.0),
    "LongAlpaca (13B)": (60.6, 57.0, 56.6, 43.6, 0.0, 0.0),
}
TASKS, SAMPLES = 13, 500


def task_accuracies(mean: float, spread: float) -> np.ndarray:
    """13 task accuracies, logit-normal around the length's mean, shifted so their average is exactly it."""
    if mean <= 0 or mean >= 1:
        return np.full(TASKS, mean)
    z = stats.norm.ppf((np.arange(TASKS) + 0.5) / TASKS) * spread
    lo, hi = -30.0, 30.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if special.expit(special.logit(mean) + z + mid).mean() < mean else (lo, mid)
    return special.expit(special.logit(mean) + z + (lo + hi) / 2)


def effective_index(above: np.ndarray) -> np.ndarray:
    """The longest length judged above (index), -1 if none; above: (reps, lengths) booleans."""
    longest = above.shape[1] - 1 - np.argmax(above[:, ::-1], axis=1)
    return np.where(above.any(axis=1), longest, -1)


def simulate_model(profile: tuple[float, ...], reps: int, rng: np.random.Generator, spread: float) -> dict:
    rule = StopRule("effective-length", threshold=RULER_THRESHOLD, looks=len(profile))
    stops, decisions, full_above, true_above = [], [], [], []
    for percent in profile:
        accuracies = task_accuracies(percent / 100, spread)
        rounds = (rng.random((reps, TASKS, SAMPLES)) < accuracies[None, :, None]).mean(axis=1)
        stop, decision = first_settled(rule, rounds, per_round=TASKS)
        stops.append(stop)
        decisions.append(decision)
        full_above.append(rounds.mean(axis=1) >= RULER_THRESHOLD)
        true_above.append(np.full(reps, accuracies.mean() >= RULER_THRESHOLD))
    stops, decisions = np.array(stops).T, np.array(decisions).T
    full_above, true_above = np.array(full_above).T, np.array(true_above).T
    adaptive_above = np.where(decisions == "undecided", full_above, decisions == "above")
    adaptive = effective_index(adaptive_above)
    settled = decisions != "undecided"
    return {
        "samples": stops.sum(axis=1) / (SAMPLES * len(profile)),
        "match_full": adaptive == effective_index(full_above),
        "full_matches_table": effective_index(full_above) == effective_index(true_above),
        "wrong_settled": (settled & ((decisions == "above") != true_above)).any(axis=1),
    }


def name_length(index: int) -> str:
    return LENGTHS[index] if index >= 0 else "<4K"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=200, help="simulated runs per model")
    parser.add_argument("--spread", type=float, default=1.0, help="sd of task accuracies on the logit scale")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.time()
    print(f"{args.reps} runs per model, 13 tasks x 6 lengths x N={SAMPLES}, spread {args.spread}, alpha 0.05\n")
    print("| model | effective length (Table 3) | samples needed | same effective length as full N "
          "| full N gives Table 3's | wrong settled verdicts |")
    print("|---|---|---:|---:|---:|---:|")
    needed, matched = [], []
    for model, profile in TABLE3.items():
        result = simulate_model(profile, args.reps, rng, args.spread)
        truth = effective_index(np.array([[p / 100 >= RULER_THRESHOLD for p in profile]]))[0]
        needed.append(result["samples"].mean())
        matched.append(result["match_full"].mean())
        print(f"| {model} | {name_length(truth)} | {needed[-1]:.1%} | {matched[-1]:.1%} "
              f"| {result['full_matches_table'].mean():.1%} | {result['wrong_settled'].mean():.1%} |")
    worst = int(np.argmax(needed))
    print(f"\nsamples needed (of 39,000 per model): median {np.median(needed):.1%}, "
          f"worst {max(needed):.1%} ({list(TABLE3)[worst]})")
    print(f"same effective length as the full protocol: {np.mean(matched):.1%} of runs, "
          f"lowest model {min(matched):.1%}  ({time.time() - started:.0f} s)")


if __name__ == "__main__":
    main()
