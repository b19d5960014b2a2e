"""`hqa_sft` as a study method (harness/studies): every stage synthesizes its conversations from the study's
training corpus (held-out documents left out through the corpus's exclude_ids), with the study's tokenizer and
data seed, into the method's own data directory; the method's options pick Table 7's composition.

The stages themselves (data YAML, seq_len, RoPE, steps) come from the study's `training` settings, as in
`ctxbench train hqa_sft`; the last stage trains at the study's seq_len, so every method ends at the same length.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ctxbench.harness.core.errors import ConfigError
from ctxbench.trainers.base import config_path


class HQAStudyData(BaseModel):
    """An hqa_sft method in a study: how its conversations are composed (the study sets documents, tokenizer, seed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    composition: dict[str, Any] = Field(default_factory=dict, description="Algorithm 2 / Table 7 keys over the data YAML's "
                                        "composition, e.g. {after: h, revisit: s, counts: fixed, summary: false}")
    data_args: dict[str, Any] = Field(default_factory=dict, description="more hqa data keys for every stage (e.g. "
                                      "{hierarchical_per_document: 3}); documents, tokenizer, seed and out_dir are the study's")
    samples: int | None = Field(None, ge=1, description="conversations per stage; default the study's budget_tokens // the "
                                "stage's seq_len (at least 1): conversations are at most seq_len tokens, so at most the budget")


STUDY_KEYS = ("documents", "tokenizer", "seed", "out_dir")  # set by the study, not by a method or a stage


def study_stages(settings: dict[str, Any], options: HQAStudyData, inputs) -> list[dict[str, Any]]:
    """The study's stages with each stage's data made from the study corpus into inputs.out_dir/<stage>."""
    from ctxbench.harness.core.config import read_yaml_mapping
    from ctxbench.trainers.hqa.data import load_data_config

    stages = settings.get("stages")
    if not isinstance(stages, list) or not stages or not all(isinstance(s, dict) for s in stages):
        raise ConfigError("training.stages: hqa_sft needs its stages ([{name, data, seq_len, rope, max_steps}]) in the "
                          "study's training settings (see configs/trainers/hqa-sft-tiny.yaml)")
    last = stages[-1].get("seq_len")
    if last != inputs.seq_len:
        raise ConfigError(f"training.stages: the last stage's seq_len ({last}) must equal the study's seq_len "
                          f"({inputs.seq_len}), so that every method ends at the same training length")
    clash = sorted(set(STUDY_KEYS) & (set(options.data_args) | {k for s in stages for k in s.get("data_args", {})}))
    if clash:
        raise ConfigError(f"data_args: {clash[0]} is set by the study; remove it")
    corpus = {"path": str(inputs.corpus["path"]), "format": "corpus", "corpus": dict(inputs.corpus)}
    out = []
    for s in stages:
        if not isinstance(s.get("data"), str) or not isinstance(s.get("seq_len"), int):
            raise ConfigError(f"training.stages: stage {s.get('name')!r} needs data (an hqa data YAML) and seq_len")
        path = str(config_path(s["data"], field="stages.data"))
        base = read_yaml_mapping(Path(path), field="stages.data", expect="hqa data settings") if Path(path).is_file() else {}
        args = {**s.get("data_args", {}), **options.data_args}
        composition = {**base.get("composition", {}), **args.get("composition", {}), **options.composition}
        args.update(documents=corpus, tokenizer=inputs.tokenizer, seed=inputs.seed, composition=composition,
                    out_dir=str(inputs.out_dir / str(s.get("name"))),
                    samples=options.samples or max(1, inputs.budget_tokens // s["seq_len"]))
        if Path(path).is_file():
            load_data_config(Path(path), **args)  # a bad key or value is one line now, before any work
        out.append({**s, "data": path, "data_args": args})
    return out


def corpus_documents(stages) -> frozenset[str]:
    """Every document the stages' conversations were made from (manifest meta: documents)."""
    from ctxbench.trainers.hqa.data import read_conversations

    return frozenset(d for t in stages for row in read_conversations(t.data.info["path"]) for d in row["meta"]["documents"])


def diagnostics(stages) -> dict[str, Any]:
    """Per stage: conversations, documents per conversation, tokens, answer tokens and the generator's drops."""
    from ctxbench.trainers.hqa.data import read_conversations, read_manifest

    out = {}
    for t in stages:
        info, rows = t.data.info, read_conversations(t.data.info["path"])
        per = [len(r["meta"]["documents"]) for r in rows]
        docs = [d for r in rows for d in r["meta"]["documents"]]
        m = read_manifest(info["path"]) or {}
        out[f"stage {t.config.stage}"] = {
            "sequences": info["conversations"], "docs_per_sequence": {"mean": sum(per) / max(1, len(per))},
            "duplicate_rate": 1 - len(set(docs)) / max(1, len(docs)), "tokens": info["tokens"],
            "answer_tokens": info["answer_tokens"], "generator_drops": m.get("drops", {})}
    return out
