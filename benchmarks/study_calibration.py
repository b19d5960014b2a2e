"""Calibration of the study statistics (issue 12 §6) on simulated studies, as figures for a closing note:
the false-positive rate of the hierarchical comparison under null designs (nominal 0.05), and how often the
interval excludes 0 when an effect is planted at the size the report states as detectable at 80% power.

    python benchmarks/study_calibration.py [--reps 1000]

The designs (leaderboard/calibration.py) are those of tests/leaderboard/test_studies.py (3 cells x 30 samples, 3 seeds), which asserts
FPR within 0.03-0.07 and detection within 0.80 +/- 0.07; this prints the numbers themselves.
"""

from __future__ import annotations

import argparse
import math

from ctxbench.leaderboard import studies as st
from ctxbench.leaderboard.calibration import NULLS, POWER, N, design_se, effect_at_power, rejections


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000, help="simulated studies per design")
    reps = ap.parse_args().reps
    print(f"null designs ({reps} simulated studies each, 3 cells x {N} samples): false-positive rate at nominal 0.05")
    for name, design in NULLS.items():
        fpr, _ = rejections(reps, seed=123, **design)
        half = 1.96 * math.sqrt(0.05 * 0.95 / reps)
        print(f"  {name:<28} {fpr:.3f}   (binomial 95% band around 0.05: {0.05 - half:.3f}-{0.05 + half:.3f})")
    print(f"planted effect at the stated 80% power ({reps} studies each): share whose interval excludes 0 (lo > 0)")
    for name, design in POWER.items():
        se, df = design_se(seeds=3, **design)
        effect = effect_at_power(se, df, 0.8)
        _, detected = rejections(reps, seed=7, effect=effect, **design)
        print(f"  {name:<28} effect {effect:.4f} (SE {se:.4f}, df {df:.1f}): detected {detected:.3f}  "
              f"(report's power_of: {st.power_of(effect, se, df):.3f})")


if __name__ == "__main__":
    main()
