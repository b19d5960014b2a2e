"""LongBench Pro's task list and length levels, as the official evaluator names them.

The 25 secondary tasks (the unit the official code scores: each has one metric) with their official names and
metrics (modules/evaluation.py's task_metric_config), and the six official length levels (the dataset's
`token_length`, measured by the authors under the Qwen tokenizer) with the ctxbench length each one is scored at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The official level names and the ctxbench length of each: "8k" is 8192 tokens ... "256k" is 262144 (k = 1024, the
# powers of two the official levels are named after; the suite's lengths are these six).
LEVELS: dict[str, int] = {"8k": 8192, "16k": 16384, "32k": 32768, "64k": 65536, "128k": 131072, "256k": 262144}
LEVEL_OF_LENGTH: dict[int, str] = {v: k for k, v in LEVELS.items()}


@dataclass(frozen=True)
class SecondaryTask:
    """One official secondary task: its name as in the data's `secondary_task`, its metric and its ctxbench slug."""

    official: str  # e.g. "T1.1 Global Cohesive Retrieval"
    metric: str  # NDCG, Pairwise_Accuracy, Accuracy, F1_Score, SubEM or Summary

    @property
    def code(self) -> str:
        return self.official.split(" ", 1)[0]  # "T1.1"

    @property
    def slug(self) -> str:
        words = re.sub(r"[^a-z0-9]+", "-", self.official.split(" ", 1)[1].lower()).strip("-")
        return words

    @property
    def task_name(self) -> str:
        return f"longbenchpro/{self.slug}"


_METRICS = (
    ("T1.1 Global Cohesive Retrieval", "NDCG"),
    ("T1.2 Key-Snippet Retrieval", "NDCG"),
    ("T2.1 Global Timeline Reconstruction", "Pairwise_Accuracy"),
    ("T2.2 Local Causal Chain Sorting", "Pairwise_Accuracy"),
    ("T3.1 Multi-Doc Integration QA", "Accuracy"),
    ("T3.2 Single-Hop Fact QA", "Accuracy"),
    ("T4.1 Global-Coverage Constrained Summary", "Summary"),
    ("T4.2 Query-Focused Summary", "Summary"),
    ("T5.1 Full-Sentence Citation Alignment", "F1_Score"),
    ("T5.2 Key-Statement Citation Alignment", "F1_Score"),
    ("T6.1 Large-Scale Document Clustering", "SubEM"),
    ("T6.2 Targeted Subset Cluster Identification", "F1_Score"),
    ("T6.3 Global Frequency Analysis", "Pairwise_Accuracy"),
    ("T7.1 Global Conflict & Inconsistency Localization", "F1_Score"),
    ("T7.2 Targeted Rule or Condition Violation Detection", "F1_Score"),
    ("T7.3 Comprehensive Error & Anomaly Sweep", "F1_Score"),
    ("T8.1 Structured Multi-Source Consistency Verification", "SubEM"),
    ("T8.2 Single-Source Targeted Aggregation", "SubEM"),
    ("T8.3 Long-Context Procedural State Tracking", "SubEM"),
    ("T9.1 Dependency-Aware Multi-Version Impact Analysis", "F1_Score"),
    ("T9.2 Localized Interface Change Detection", "F1_Score"),
    ("T10.1 Large-Scale In-Context Rule Induction", "SubEM"),
    ("T10.2 Targeted Example-Based Rule Induction", "SubEM"),
    ("T11.1 Long-Range Entity & Commitment Tracking", "Accuracy"),
    ("T11.2 Short-Range Reference Resolution & State Query", "Accuracy"),
)
TASKS: tuple[SecondaryTask, ...] = tuple(SecondaryTask(name, metric) for name, metric in _METRICS)
BY_SLUG: dict[str, SecondaryTask] = {t.slug: t for t in TASKS}
