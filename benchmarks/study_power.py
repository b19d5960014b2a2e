"""The power a study report states beside a verdict against one fixed run (leaderboard/study_power.py), checked by
simulation: studies of 3 seeds against one untrained run (3 cells x 30 samples, leaderboard.studies.simulate_arms)
with an effect planted.

    python benchmarks/study_power.py [--reps 400]

For each design it prints how often 3 seeds detect the planted effect, the stated detectable difference (median over
studies) and how often a study at that difference detects it (the statement's target: 80%), and the seeds the report
suggests for the planted effect with the power they reach (each study's suggestion simulated at its own seed count).
"""

from __future__ import annotations

import argparse

from ctxbench.leaderboard.study_power import check

DESIGNS = {  # name: (simulate_arms arguments, planted effect)
    "seed-dominated": ({"sd_seed": 0.05, "sd_sample": 0.05, "sd_noise": 0.05}, 0.06),
    "balanced": ({"sd_seed": 0.05, "sd_sample": 0.1, "sd_noise": 0.1}, 0.1),
    "binary scores (issue 31's +6.8)": ({"binary": True}, 0.068),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=400, help="simulated studies per design")
    reps = ap.parse_args().reps
    print(f"| design | planted | detected, 3 seeds | stated detectable (median) | detected there | suggested seeds "
          f"(quartiles) | power at the suggestion |  ({reps} studies each)")
    for name, (design, effect) in DESIGNS.items():
        r = check(design, effect=effect, reps=reps, seed=11)
        seeds = "–".join("over 100" if q >= 10 ** 6 else f"{q:.0f}" for q in r["suggested_seeds"])
        reached = "—" if r["suggestions_checked"] == 0 else \
            f"{r['power_at_suggested']:.3f} ({r['suggestions_checked']:.0%} of suggestions run)"
        print(f"| {name} | {100 * effect:.1f} | {r['detected_with_3']:.3f} | {100 * r['stated_mdd']:.1f} | "
              f"{r['detected_at_stated_mdd']:.3f} | {seeds} | {reached} |")


if __name__ == "__main__":
    main()
