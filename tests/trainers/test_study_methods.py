"""Studies take any trainer: CPT packing beside a stub trainer of another data kind (padded question-answer
conversations with answer-only labels), through the study_data interface; the held-out documents stay out of both,
and a trainer whose data leaks one is stopped before training."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field

from ctxbench.harness.core import registry
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.studies import load_study, run_study
from ctxbench.trainers.base import DataBundle, TrainerConfig
from ctxbench.trainers.loop import HFTrainer


class StubQAOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    examples: int = Field(6, ge=1, description="conversations to make")
    leak: bool = Field(False, description="read the corpus without its exclusions (a buggy trainer)")


class StubQAData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str = Field(description="conversations file (made from the corpus on first use)")
    corpus: dict[str, Any] = Field(description="corpus keys")
    examples: int = Field(description="conversations to make")
    max_tokens: int = Field(description="longest conversation in tokens")
    leak: bool = Field(False, description="ignore exclude_ids")


class StubQAConfig(TrainerConfig):
    data: StubQAData = Field(description="the conversations")


class StubQATrainer(HFTrainer):
    """'What does this file start with?' -> its first line: a conversation data kind, padded, labels on the answer."""

    name: ClassVar[str] = "stub_qa"
    config_cls = StubQAConfig
    study_data_cls = StubQAOptions

    @classmethod
    def study_data_config(cls, options: StubQAOptions, inputs) -> dict[str, Any]:
        return {"path": str(inputs.out_dir / "conversations.jsonl"), "corpus": inputs.corpus, "examples": options.examples,
                "max_tokens": inputs.seq_len, "leak": options.leak}

    def conversations(self) -> list[dict[str, str]]:
        from ctxbench.trainers.data.corpus import open_corpus

        d = self.config.data
        path = Path(d.path)
        if not path.exists():
            rows = []
            for doc in open_corpus(d.corpus).documents(exclude=not d.leak):
                lines = [x for x in doc.text.splitlines() if x.strip()]
                if len(lines) > 3:
                    rows.append({"id": doc.doc_id, "question": "What does this file start with?\n" + "\n".join(lines[1:6]),
                                 "answer": lines[0]})
                if len(rows) == d.examples:
                    break
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return [json.loads(line) for line in path.read_text().splitlines()]

    def prepare_data(self) -> DataBundle:
        tok, rows = self.tokenizer, self.conversations()
        examples = []
        for r in rows:
            q = tok(r["question"] + "\n", add_special_tokens=False)["input_ids"]
            a = tok(r["answer"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            ids = (q + a)[: self.config.data.max_tokens]
            examples.append({"input_ids": ids, "labels": ([-100] * len(q) + a)[: len(ids)]})
        blob = hashlib.sha256(Path(self.config.data.path).read_bytes()).hexdigest()[:16]
        return DataBundle(examples, None, blob, self.config.data.max_tokens, self.config.data.max_tokens,
                          {"examples": len(examples), "non_padding_tokens": sum(len(e["input_ids"]) for e in examples)})

    def data_collator(self):
        import torch

        pad = self.tokenizer.pad_token_id

        def collate(rows):
            width = max(len(r["input_ids"]) for r in rows)
            ids = torch.tensor([r["input_ids"] + [pad] * (width - len(r["input_ids"])) for r in rows])
            mask = torch.tensor([[1] * len(r["input_ids"]) + [0] * (width - len(r["input_ids"])) for r in rows])
            labels = torch.tensor([r["labels"] + [-100] * (width - len(r["labels"])) for r in rows])
            return {"input_ids": ids, "attention_mask": mask, "labels": labels}

        return collate

    def corpus_documents(self) -> frozenset[str] | None:
        return frozenset(r["id"] for r in self.conversations())

    def data_diagnostics(self) -> dict[str, Any] | None:
        return {"conversations": {"sequences": len(self.data.train)}}


registry.register("trainer", "stub_qa")(StubQATrainer)

RAW = {"name": "mixed", "corpus": {"path": "stdlib:json,email", "max_doc_tokens": 128},
       "methods": [{"name": "packed", "data": {"method": "standard", "eval_sequences": 2}},
                   {"name": "qa", "trainer": "stub_qa", "data": {"examples": 4}}],
       "reference": "packed", "seeds": [0], "budget_tokens": 128 * 8, "seq_len": 128,
       "base_model": {"config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                                 "num_key_value_heads": 1, "tie_word_embeddings": True}},
       "training": {"max_steps": 2, "per_device_batch_size": 2, "learning_rate": 1e-3, "save_steps": 2, "threads": 1},
       "perplexity": {"lengths": [128], "documents": 3},
       "eval": {"suite": {"name": "e", "lengths": [256], "samples": 1,
                          "tasks": [{"task": "niah/single", "args": {"depths": [50], "tokens_to_generate": 4}}]},
                "backend_args": {"dtype": "float32", "threads": 1}}}


def write(tmp_path: Path, raw: dict) -> Path:
    p = tmp_path / "study.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


def test_a_packing_and_a_conversation_trainer_in_one_study(tmp_path, data_dir):
    from rich.console import Console

    study = load_study(write(tmp_path, {**RAW, "out_dir": str(tmp_path / "s")}))
    result = run_study(study, data_dir=data_dir, console=Console(file=io.StringIO()))
    packed, qa = result.trained
    manifest = json.loads((qa.checkpoint / "ctxbench_manifest.json").read_text())
    assert manifest["trainer"] == "stub_qa" and packed.tokens == 2 * 2 * 128
    heldout = {json.loads(line)["id"] for line in (next((tmp_path / "s" / "heldout").iterdir()) / "heldout.jsonl").open()}
    qa_rows = [json.loads(line) for line in next((tmp_path / "s" / "data" / "qa").iterdir()).joinpath("conversations.jsonl").open()]
    assert len(heldout) == 3 and len(qa_rows) == 4 and not heldout & {r["id"] for r in qa_rows}
    # token accounting excludes padding: the two steps saw 4 conversations of unequal length, padded per batch
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(qa.checkpoint)
    lengths = [min(128, len(tok(r["question"] + "\n", add_special_tokens=False)["input_ids"]) +
                   len(tok(r["answer"], add_special_tokens=False)["input_ids"]) + 1) for r in qa_rows]
    assert qa.tokens == sum(lengths) and len(set(lengths)) > 1
    res = json.loads(result.json.read_text())
    assert {(c["measure"], c["a"], c["b"]) for c in res["comparisons"]} == {
        (m, a, b) for m in ("task score", "ppl/heldout-full") for a, b in (("packed", "untrained"), ("qa", "untrained"),
                                                                            ("qa", "packed"))}
    assert "conversations" in result.summary.read_text()


def test_a_trainer_whose_data_holds_a_heldout_document_is_stopped_before_training(tmp_path, data_dir):
    raw = {**RAW, "out_dir": str(tmp_path / "s"), "methods": [RAW["methods"][0], {"name": "qa", "trainer": "stub_qa",
                                                                                   "data": {"examples": 500, "leak": True}}]}
    with pytest.raises(ConfigError, match=r"methods.qa: its training data holds \d+ held-out documents"):
        run_study(load_study(write(tmp_path, raw)), data_dir=data_dir)
    assert not list((tmp_path / "s" / "train").glob("train-stub_qa-*/model/*.safetensors"))


def test_a_trainer_without_the_interface_is_refused_when_the_study_loads(tmp_path):
    class Plain(HFTrainer):
        name = "plain_stub"

    registry.register("trainer", "plain_stub")(Plain)
    raw = {**RAW, "methods": [RAW["methods"][0], {"name": "p", "trainer": "plain_stub"}]}
    with pytest.raises(ConfigError, match="trainer 'plain_stub' cannot be a study method yet"):
        load_study(write(tmp_path, raw))
