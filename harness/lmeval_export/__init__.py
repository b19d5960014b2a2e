"""`ctxbench export lm-eval DIR`: our tasks as an lm-evaluation-harness task directory (use with --include_path).

One lm-eval task per (task, length), e.g. ``ctxbench_ruler_niah_single_1_4096``, so each length is its own
result (no placeholder metrics for lengths that were not run). Tasks are grouped per length
(``ctxbench_<suite>_<length>``: the unweighted mean of its tasks, as RULER averages) and per suite
(``ctxbench_<suite>``: the mean over lengths); a tag ``ctxbench_<task>`` selects every length of one task.
The YAMLs call ``ctxbench_utils.py`` (written beside them), which generates samples with ctxbench's own
generator and scores them with ctxbench's metrics; see harness/lmeval_export/tasklib.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

UTILS = '''"""lm-eval hooks of the tasks exported by `ctxbench export lm-eval`; needs ctxbench importable (pip install ctxbench).

Tokenizer (must be the evaluated model's): env CTXBENCH_TOKENIZER, else --model_args pretrained=/tokenizer=,
else --metadata '{"tokenizer": ...}', else the export default. Data (pg_essays/, squad/, hotpotqa/): env
CTXBENCH_DATA_DIR, else --metadata '{"data_dir": ...}', else the export default.
"""

from ctxbench.harness.lmeval_export.tasklib import dataset, process_results  # noqa: F401
'''


@dataclass(frozen=True)
class Exported:
    tasks: list[str]  # lm-eval task names
    groups: list[str]
    files: list[Path]


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").lower()


def task_name(display: str, length: int) -> str:
    return f"ctxbench_{slug(display)}_{length}"


def export_lm_eval(out_dir: str | Path, suite, *, tokenizer: str | None = None, data_dir: str | None = None,
                   template: str | None = None, verify: str | None = None) -> Exported:
    """Write the suite's tasks × lengths as lm-eval task YAMLs, groups and ctxbench_utils.py into out_dir."""
    from ctxbench.harness.core.config import build_task

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files, names = [], []
    suite_slug = slug(suite.name)
    per_length: dict[int, list[str]] = {}
    for spec in suite.tasks:
        task = build_task(spec)  # validates the args, and gives the generation budget
        if task.external:
            continue  # lm-eval's own tasks need no export
        for length in spec.lengths or suite.lengths:
            name = task_name(spec.display, length)
            cfg = _task_config(name, spec, task, suite, length, tokenizer=tokenizer, data_dir=data_dir, template=template,
                               verify=verify)
            files.append(_write_yaml(out / f"{name}.yaml", cfg, f"ctxbench {spec.display} at {length} tokens ({task.metric})"))
            names.append(name)
            per_length.setdefault(length, []).append(name)
    groups = []
    agg = [{"metric": "score", "aggregation": "mean", "weight_by_size": False}]
    for length, members in sorted(per_length.items()):
        if members:
            g = f"ctxbench_{suite_slug}_{length}"
            files.append(_write_yaml(out / f"_{g}.yaml", {"group": g, "group_alias": f"{suite.name} @ {length}", "task": members,
                                                            "aggregate_metric_list": agg, "metadata": {"version": 1}},
                                     f"mean of the task means at {length} tokens"))
            groups.append(g)
    top = f"ctxbench_{suite_slug}"
    files.append(_write_yaml(out / f"_{top}.yaml", {"group": top, "group_alias": suite.name, "task": list(groups),
                                                    "aggregate_metric_list": agg, "metadata": {"version": 1}},
                             "mean over lengths of the per-length means"))
    (out / "ctxbench_utils.py").write_text(UTILS)
    files.append(out / "ctxbench_utils.py")
    return Exported(tasks=names, groups=[top, *groups], files=files)


def _task_config(name: str, spec, task, suite, length: int, *, tokenizer: str | None, data_dir: str | None,
                 template: str | None, verify: str | None) -> dict:
    """One task at one length as an lm-eval task: its samples come from ctxbench_utils.dataset, scored by ctxbench."""
    return {
        "task": name,
        "task_alias": f"{spec.display} @ {length}",
        "tag": [f"ctxbench_{slug(spec.display)}"],
        "dataset_path": "",
        "dataset_name": None,
        "custom_dataset": "!function ctxbench_utils.dataset",
        "dataset_kwargs": {
            "ctxbench_task": spec.task,
            "ctxbench_name": spec.display,
            "ctxbench_args": dict(spec.args),
            "ctxbench_length": length,
            "ctxbench_samples": suite.samples,  # unless the task fixes its own count (as in the runner)
            "ctxbench_seed": suite.seed,
            "ctxbench_template": template or suite.template,
            "ctxbench_verify": verify or suite.verify,
            **({"ctxbench_tokenizer": tokenizer} if tokenizer else {}),
            **({"ctxbench_data_dir": str(data_dir)} if data_dir else {}),
        },
        "output_type": "generate_until",
        "test_split": "test",
        "num_fewshot": 0,
        "doc_to_text": "{{input}}",
        "doc_to_target": "{{answers}}",
        "process_results": "!function ctxbench_utils.process_results",
        "metric_list": [{"metric": "score", "aggregation": "mean", "higher_is_better": True}],
        "generation_kwargs": {"do_sample": False, "temperature": 0.0, "max_gen_toks": task.max_new_tokens, "until": []},
        "metadata": {"version": 1, "ctxbench_metric": task.metric},
    }


def _write_yaml(path: Path, cfg: dict, comment: str) -> Path:
    text = yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True, width=120)
    text = re.sub(r"'(!function [^']+)'", r"\1", text)  # safe_dump quotes the tag; lm-eval needs it bare
    path.write_text(f"# Written by `ctxbench export lm-eval`: {comment}.\n{text}")
    return path
