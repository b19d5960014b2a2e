"""Printing a score table does not import scipy.stats (its import is about a second of every `ctxbench score`), and
the special functions used instead give scipy.stats' quantiles (to the last bit or two)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest


def test_the_score_table_path_leaves_scipy_stats_unimported():
    code = ("import sys, ctxbench.harness.summary, ctxbench.harness.cli_score, ctxbench.leaderboard.aggregate; "
            "print('scipy.stats' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


def test_intervals_equal_the_scipy_stats_quantiles():
    from scipy import stats

    from ctxbench.harness.core.stats.proportions import _df_factor, clopper_pearson, t_interval

    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 40, 333.5):
        for k in (0, 0.5, 1, n / 3, n - 1, n):
            if not 0 <= k <= n:
                continue
            lo, hi = clopper_pearson(k, n, level=0.9)
            assert lo == pytest.approx(0.0 if k <= 0 else stats.beta.ppf(0.05, k, n - k + 1), rel=1e-12, abs=0)
            assert hi == pytest.approx(1.0 if k >= n else stats.beta.ppf(0.95, k + 1, n - k), rel=1e-12, abs=0)
    for df in rng.uniform(1, 300, 50):
        iv = t_interval(0.5, 0.01, df, 0.95, 10, "m")
        assert iv.hi == pytest.approx(min(1.0, 0.5 + stats.t.ppf(0.975, df) * 0.1), rel=1e-12)
        assert _df_factor(df, 0.95) == pytest.approx((stats.norm.ppf(0.975) / stats.t.ppf(0.975, df)) ** 2, rel=1e-12)
