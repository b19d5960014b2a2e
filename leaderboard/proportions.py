"""Moved below the engine and the board: harness/core/stats/proportions.py (issue 33). Re-exported for the board's
modules that still import it from here (leaderboard/auc.py)."""

from ctxbench.harness.core.stats.proportions import (  # noqa: F401
    SHRINK,
    Interval,
    binomial_interval,
    clopper_pearson,
    cluster_codes,
    cluster_variance,
    floored_cluster_variance,
    hull,
    is_binary,
    matched_clopper_pearson,
    satterthwaite,
    shrunk_variances,
    t_interval,
)
