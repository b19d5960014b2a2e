"""The 12 RULER v2 tasks by their official names (NeMo-Skills nemo_skills/dataset/ruler2/prepare.py), each a generator
family with the arguments prepare.py passes it. Kept out of the package's __init__, as tasks/ruler/presets.py is."""

from __future__ import annotations

from ctxbench.harness.core.registry import register
from ctxbench.tasks.ruler2 import metrics  # noqa: F401 - registers the official metrics the tasks name
from ctxbench.tasks.ruler2.documents import Ruler2Documents
from ctxbench.tasks.ruler2.niah import Ruler2Niah
from ctxbench.tasks.ruler2.questions import Ruler2Questions

PRESETS: dict[str, tuple[type, dict]] = {
    "mk_niah_basic": (Ruler2Niah, dict(num_values=1)),
    "mk_niah_easy": (Ruler2Questions, dict(task_type="retrieve", algo_type="single", num_order=0, fewshot=0, tokens_to_generate=512)),
    "mk_niah_medium": (Ruler2Questions, dict(task_type="solve", algo_type="2steps", num_order=0, fewshot=5, tokens_to_generate=1024)),
    "mk_niah_hard": (Ruler2Questions, dict(task_type="solve", algo_type="single", num_order=0, fewshot=5, tokens_to_generate=1024)),
    "mv_niah_basic": (Ruler2Niah, dict(num_values=4)),
    "mv_niah_easy": (Ruler2Questions, dict(task_type="niah", algo_type="single", num_order=4, fewshot=0, tokens_to_generate=1024)),
    "mv_niah_medium": (Ruler2Questions, dict(task_type="retrieve", algo_type="2steps", num_order=4, fewshot=0, tokens_to_generate=1024)),
    "mv_niah_hard": (Ruler2Questions, dict(task_type="retrieve", algo_type="single", num_order=4, fewshot=0, tokens_to_generate=512)),
    "qa_basic": (Ruler2Documents, dict(query="doc", tokens_to_generate=128)),
    "qa_easy": (Ruler2Documents, dict(query="question", tokens_to_generate=128)),
    "qa_medium": (Ruler2Documents, dict(query="2steps", tokens_to_generate=1024)),
    "qa_hard": (Ruler2Documents, dict(query="single", tokens_to_generate=256)),
}


def _register(name: str, cls: type, defaults: dict) -> None:
    def factory(**overrides):
        return cls(f"ruler2/{name}", cls.Args(**{**defaults, **overrides}))

    factory.task_class = cls  # type: ignore[attr-defined]
    factory.defaults = defaults  # type: ignore[attr-defined]
    register("task", f"ruler2/{name}", args=cls.Args, version=1)(factory)  # 1: the prompt fills the length


for _name, (_cls, _defaults) in PRESETS.items():
    _register(_name, _cls, _defaults)
