"""The 13 RULER presets by name (ruler/niah_single_1 ...), each a family (niah, vt, cwe, fwe, qa) with fixed defaults.

Kept out of the package's __init__, so importing one family (ctxbench.tasks.kv.task imports niah) loads only that family,
and no module of the package imports its own package back (the registry imports this module on the first task lookup)."""

from __future__ import annotations

from ctxbench.harness.core.registry import register
from ctxbench.tasks.ruler.cwe import CommonWords
from ctxbench.tasks.ruler.fwe import FrequentWords
from ctxbench.tasks.ruler.niah import Niah
from ctxbench.tasks.ruler.qa import QA
from ctxbench.tasks.ruler.vt import VariableTracking

PRESETS: dict[str, tuple[type, dict]] = {
    "niah_single_1": (Niah, dict(haystack="noise", key_type="words", value_type="numbers")),
    "niah_single_2": (Niah, dict(haystack="essay", key_type="words", value_type="numbers")),
    "niah_single_3": (Niah, dict(haystack="essay", key_type="words", value_type="uuids")),
    "niah_multikey_1": (Niah, dict(haystack="essay", key_type="words", value_type="numbers", num_keys=4)),
    "niah_multikey_2": (Niah, dict(haystack="needle", key_type="words", value_type="numbers")),
    "niah_multikey_3": (Niah, dict(haystack="needle", key_type="uuids", value_type="uuids")),
    "niah_multivalue": (Niah, dict(haystack="essay", key_type="words", value_type="numbers", num_values=4)),
    "niah_multiquery": (Niah, dict(haystack="essay", key_type="words", value_type="numbers", num_queries=4)),
    "vt": (VariableTracking, dict(haystack="noise", num_chains=1, num_hops=4)),
    "cwe": (CommonWords, dict(freq_cw=30, freq_ucw=3, num_cw=10)),
    "fwe": (FrequentWords, dict(alpha=2.0)),
    "qa_1": (QA, dict(dataset="squad")),
    "qa_2": (QA, dict(dataset="hotpotqa")),
}


def _register(name: str, cls: type, defaults: dict) -> None:
    def factory(**overrides):
        return cls(f"ruler/{name}", cls.Args(**{**defaults, **overrides}))

    factory.task_class = cls  # type: ignore[attr-defined]
    factory.defaults = defaults  # type: ignore[attr-defined]
    register("task", f"ruler/{name}", args=cls.Args, effective_length="ruler")(factory)


for _name, (_cls, _defaults) in PRESETS.items():
    _register(_name, _cls, _defaults)
