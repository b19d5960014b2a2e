"""One identity rule (issue 33): every field is result-changing or execution-only where it is declared, and the scoring
run id, the generator fingerprint, the judge cache key and the training config hash all derive from that one
classification (harness/core/identity.py). Ids that stores already hold do not move."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field

from ctxbench.harness.core import registry
from ctxbench.harness.core.config import Suite, TaskSpec, build_task
from ctxbench.harness.core.identity import (
    DEFAULT_EXECUTION_ARGS,
    EXECUTION,
    backend_args_model,
    content_hash,
    execution_fields,
    is_execution,
)
from ctxbench.harness.core.types import Generation
from ctxbench.harness.run.planning import RunPlan
from ctxbench.trainers.data.generator import GeneratorConfig, fingerprint, legacy_fingerprint
from ctxbench.trainers.hqa.data import HQADataConfig

SCHEMA2 = Path(__file__).parent / "journeys" / "data" / "schema2-store"  # a run as 4eafb19 stored it
SUITE = Suite(name="j", lengths=[512], samples=3, tasks=["ruler/niah_single_1", "kv/retrieval"])
SERVED = "served/never-local-xyz"  # a served model name: fingerprinted by its name, nothing is read

# The speed-only arguments the issue names, with two values each that a backend taking them accepts.
SPEED = {"concurrency": (8, 32), "tensor_parallel_size": (4, 8), "batch_size": (1, 16), "threads": (1, 4),
         "device": ("cpu", "cuda")}
# One result-changing argument per registered backend (a newly registered backend must add its own here).
RESULT_ARG = {"echo": ("accuracy", 0.5), "hf": ("dtype", "float32"), "vllm": ("dtype", "float16"),
              "openai": ("api", "chat"), "lmeval": ("context_length", 2048)}
# Field names that only ever change speed or place: wherever a model declares one, it must be marked execution-only.
SPEED_NAMES = {"concurrency", "threads", "batch_size", "device", "tensor_parallel_size", "pipeline_parallel_size",
               "data_parallel_size", "dataloader_workers", "timeout", "connect_timeout", "gpu_memory_utilization",
               "store", "output_dir", "out_dir", "cache_dir"}


def plan(backend: str, args: dict, **kw) -> RunPlan:
    return RunPlan(suite=kw.pop("suite", SUITE), model=kw.pop("model", "smollm2-135m"), backend=backend,
                   backend_args=args, out_dir=Path("/nonexistent-store"), **kw)


def generator(backend: str, args: dict, **kw) -> GeneratorConfig:
    return GeneratorConfig(model=kw.pop("model", SERVED), backend=backend, backend_args=args, **kw)


def judge_key(backend_args: dict, prompt: str = "Is it right?", **args) -> str:
    return build_task(TaskSpec(task="judge/qa", args={"backend_args": backend_args, **args})).cache_key(prompt)


def args_of(backend: str) -> type[BaseModel]:
    """The backend's Args model, as it declared it when it registered (`register("backend", NAME, args=...)`)."""
    model = backend_args_model(backend)
    assert model is not None, f"backend {backend} declares no args= when it registers"
    return model


def in_tree_args() -> list[type[BaseModel]]:
    return list(dict.fromkeys(args_of(n) for n in registered_backends()))


def registered_backends() -> list[str]:
    """ctxbench's own backends (not a plugin's, not one a test registered)."""
    def module(fn) -> str:
        return getattr(getattr(fn, "func", fn), "__module__", "")

    return [n for n, fn in registry.entries("backend").items()
            if registry.origin("backend", n) is None and module(fn).startswith("ctxbench.harness.backends")]


# --- ids that stores hold ---------------------------------------------------------------------------------------------
# Recorded with the code before the rule (commit 40e700d): the same suite, model and arguments give the same ids.
PINNED_RUN_IDS = {
    "echo": ({"batch_size": 4, "delay": 0.0, "context_length": 4096}, "smollm2-135m-j-38d8d122"),
    "hf": ({"dtype": "float32", "threads": 2, "device": "cpu", "batch_size": 1, "rope_scaling": "yarn:2"},
           "smollm2-135m-j-167d4bee"),
    "vllm": ({"tensor_parallel_size": 4, "max_model_len": 8192, "kv_cache_dtype": "fp8", "seed": 1}, "smollm2-135m-j-d0637a53"),
    "openai": ({"base_url": "http://x/v1", "concurrency": 8, "api": "chat", "extra_body": {"a": 1}}, "smollm2-135m-j-9a875fd0"),
    "lmeval:hf": ({"batch_size": 4, "device": "cpu", "chunk_size": 8, "max_length": 2048}, "smollm2-135m-j-4ac13135"),
}


@pytest.mark.parametrize("backend", sorted(PINNED_RUN_IDS))
def test_a_run_id_recorded_before_the_rule_is_unchanged(backend):
    args, run_id = PINNED_RUN_IDS[backend]
    assert plan(backend, args).run_id() == run_id


def test_fingerprints_and_hashes_recorded_before_the_rule_are_unchanged():
    assert fingerprint(generator("hf", {"dtype": "float32", "threads": 1, "batch_size": 2}, batch_size=4)) == "ee3b80cddca17a54"
    assert fingerprint(generator("openai", {"base_url": "http://x/v1"}, batch_size=4)) == "0358473b81250f1f"
    assert fingerprint(generator("vllm", {"max_model_len": 4096}, batch_size=4)) == "94ba38e0230d9998"
    hqa = HQADataConfig(documents={"path": "docs.jsonl"}, tokenizer="smollm2-135m", target_tokens=4096, samples=2,
                        generator={"model": "served/x", "backend": "openai",
                                   "backend_args": {"base_url": "http://x/v1", "timeout": 30}},
                        out_dir="/tmp/o", small_tokens=64, medium_tokens=128)
    assert hqa.config_hash() == "9253d18445fe1648"
    from ctxbench.trainers.base import TrainerConfig

    trained = TrainerConfig(base_model="smollm2-135m", threads=3, label="x", learning_rate=1e-4)
    assert trained.config_hash() == "8190a50a7a6683c6"
    assert judge_key({}) == "6a4faf336bd565626d221e20da0a728f19a530e2a985b33ce73c89693cdabca5"


def test_a_stored_run_resumes_under_its_id_with_other_speed_arguments(tmp_path):
    """The schema-2 fixture (4eafb19's store): the same suite and model with another batch size and delay find it."""
    shutil.copytree(SCHEMA2, tmp_path / "runs")
    (run,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    rec = json.loads((run / "record.json").read_text())
    again = RunPlan(suite=Suite(**rec["suite_config"]), model=rec["model"], backend="echo",
                    backend_args={"batch_size": 16, "delay": 0.5}, out_dir=tmp_path / "runs")
    assert again.run_id() == rec["run_id"] == run.name
    other = RunPlan(suite=Suite(**rec["suite_config"]).model_copy(update={"seed": 7}), model=rec["model"],
                    backend="echo", backend_args={"batch_size": 16}, out_dir=tmp_path / "runs")
    assert other.run_id() != rec["run_id"]  # what changes a result is another run


# --- the rule over every registered backend ----------------------------------------------------------------------------
def test_every_registered_backend_has_args_and_a_result_changing_example():
    for name in registered_backends():
        assert args_of(name) is not None, name
        assert name.split(":", 1)[0] in RESULT_ARG, f"add a result-changing argument of backend {name} to RESULT_ARG"


@pytest.mark.parametrize("backend", registered_backends())
def test_speed_arguments_leave_every_identity_unchanged(backend):
    """concurrency, tensor_parallel_size, batch_size, threads, device (where the backend takes them) change neither the
    scoring run id nor the generator fingerprint; the judge's own backend arguments never reach its cache key."""
    fields = args_of(backend).model_fields
    taken = [k for k in SPEED if k in fields]
    assert taken or backend.startswith("lmeval"), backend  # lmeval passes them through to lm-eval
    for key in taken or ["batch_size", "device"]:
        a, b = ({key: v} for v in SPEED[key])
        assert plan(backend, a).run_id() == plan(backend, b).run_id(), key
        assert plan(backend, a).execution_args() == a
        assert fingerprint(generator(backend, a)) == fingerprint(generator(backend, b)), key
        assert judge_key(a) == judge_key(b), key


@pytest.mark.parametrize("backend", registered_backends())
def test_weights_template_sampling_and_output_shape_change_every_identity(backend):
    key, value = RESULT_ARG[backend.split(":", 1)[0]]
    base = plan(backend, {}).run_id()
    assert plan(backend, {key: value}).run_id() != base
    assert plan(backend, {}, model="smollm2-360m").run_id() != base
    assert plan(backend, {}, suite=SUITE.model_copy(update={"template": "chat"})).run_id() != base
    assert plan(backend, {}, generation=Generation(gen_kwargs=(("seed", 1), ("temperature", 0.7)))).run_id() != base
    g = fingerprint(generator(backend, {}))
    assert fingerprint(generator(backend, {key: value})) != g
    assert fingerprint(generator(backend, {}, model="served/another")) != g
    assert fingerprint(generator(backend, {}, template="auto")) != g
    assert fingerprint(generator(backend, {}, max_new_tokens=64)) != g
    assert fingerprint(generator(backend, {}, batch_size=64)) == g


def test_judge_key_changes_with_the_judge_its_sampling_and_its_output_budget():
    base = judge_key({})
    assert judge_key({}, model="gpt-4o-mini") != base
    assert judge_key({}, temperature=0.0) != base and judge_key({}, seed=1) != base
    assert judge_key({}, max_tokens=4096) != base and judge_key({}, prompt="Is it wrong?") != base
    assert judge_key({"concurrency": 64, "timeout": 5}, base_url="http://127.0.0.1:9/v1", api_key_env="") == base


def test_concurrency_and_tensor_parallel_no_longer_split_the_generator_cache():
    """The bug: concurrency 8 vs 32 (openai) or tensor_parallel_size 4 vs 8 (vllm) gave two fingerprints, so every
    cached synthesis reply was paid for again. The older fingerprint is still named, for replies cached under it."""
    assert fingerprint(generator("openai", {"concurrency": 8})) == fingerprint(generator("openai", {"concurrency": 32}))
    assert fingerprint(generator("vllm", {"tensor_parallel_size": 4})) == fingerprint(generator("vllm", {"tensor_parallel_size": 8}))
    old = legacy_fingerprint(generator("openai", {"concurrency": 8}))
    assert old and old != fingerprint(generator("openai", {"concurrency": 8}))
    assert legacy_fingerprint(generator("hf", {"dtype": "float32", "threads": 1})) is None  # nothing moved there


# --- the classification itself ------------------------------------------------------------------------------------------
def config_models() -> list[type[BaseModel]]:
    from ctxbench.tasks.judge.task import JudgeArgs, QAJudgeArgs
    from ctxbench.trainers.data.pack_config import SynthesisConfig
    from ctxbench.trainers.logo.data import LogoDataConfig

    trainers = [cls.config_cls for cls in registry.entries("trainer").values()]
    return [*in_tree_args(), *trainers, GeneratorConfig, HQADataConfig, LogoDataConfig, SynthesisConfig, JudgeArgs, QAJudgeArgs]


@pytest.mark.parametrize("model", config_models(), ids=lambda m: m.__name__)
def test_every_field_is_classified_where_it_is_declared(model):
    """Each field is execution-only (marked) or result-changing (the documented default); a field whose name only ever
    means speed or place is marked."""
    for name, field in model.model_fields.items():
        extra = field.json_schema_extra
        assert extra is None or callable(extra) or extra.get("execution", False) in (True, False), (model, name)
        if name in SPEED_NAMES:
            assert is_execution(field), f"{model.__name__}.{name}: mark it json_schema_extra=EXECUTION"


def test_the_default_for_an_undeclared_backend_is_what_every_backend_had():
    """A backend registered without Args keeps the list all backends shared before (its stored runs keep their ids)."""
    in_tree = frozenset().union(*(execution_fields(m) for m in in_tree_args() if m.model_config.get("extra") != "allow"))
    later = {"batch_api", "batch_poll_interval", "batched_decode", "prefix_reuse", "cache_control"}  # declared after the list froze: a plugin's ids must not move
    assert (in_tree - later) | {"chunk_size"} == DEFAULT_EXECUTION_ARGS


def test_a_plugin_backend_declares_its_own_execution_fields(monkeypatch):
    class PluginArgs(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        answer: str = Field("42", description="what it answers")
        workers: int = Field(1, description="processes", json_schema_extra=EXECUTION)

    monkeypatch.setattr(registry, "_REGISTRY", {**registry._REGISTRY, "backend": dict(registry._REGISTRY["backend"])})
    monkeypatch.setattr(registry, "_INFO", dict(registry._INFO))
    registry.register("backend", "identity-plugin", args=PluginArgs)(lambda **kw: None)
    assert plan("identity-plugin", {"workers": 1}).run_id() == plan("identity-plugin", {"workers": 8}).run_id()
    assert plan("identity-plugin", {"answer": "1"}).run_id() != plan("identity-plugin", {"answer": "2"}).run_id()
    assert fingerprint(generator("identity-plugin", {"workers": 1})) == fingerprint(generator("identity-plugin", {"workers": 8}))
    registry.register("backend", "identity-plugin-bare")(lambda **kw: None)  # declares nothing: the shared default
    assert plan("identity-plugin-bare", {"threads": 1}).run_id() == plan("identity-plugin-bare", {"threads": 2}).run_id()


def test_content_hash_is_the_canonical_json_ids_were_hashed_in():
    import hashlib

    obj = {"b": [1, "é"], "a": {"y": 1, "x": None}}
    full = hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()
    assert content_hash(obj, None) == full and content_hash(obj, 8) == full[:8] and content_hash(obj) == full[:16]


def test_the_judge_declares_where_and_how_fast_it_is_reached_execution_only():
    from ctxbench.tasks.judge.task import JudgeArgs

    assert execution_fields(JudgeArgs) == {"base_url", "api_key_env", "backend_args"}


class _Answering:
    """A backend stand-in that counts what it is asked (every reply 'new')."""

    batch_size = 8

    def __init__(self):
        self.asked = 0

    def generate(self, requests):
        from ctxbench.harness.core.types import Prediction

        self.asked += len(requests)
        return [Prediction(r.sample_id, "new", 3, 1, 0.0) for r in requests]


class _Renderer:
    def render(self, text, prefix=""):
        from types import SimpleNamespace

        return SimpleNamespace(text=text, add_special_tokens=False, user=text, prefix=prefix)

    def count(self, rendered):
        return 3


@pytest.mark.parametrize("shared_file", [False, True])
def test_replies_cached_under_the_older_fingerprint_are_found_not_paid_again(tmp_path, shared_file):
    """A cache an older ctxbench wrote for a config with concurrency in its fingerprint answers the same calls today."""
    from ctxbench.trainers.data.generator import GeneratorClient, call_key

    cfg = generator("openai", {"base_url": "http://x/v1", "concurrency": 8})
    old = legacy_fingerprint(cfg)
    where = {"cache_file": tmp_path / "generations.jsonl"} if shared_file else {"cache_dir": tmp_path}
    old_file = tmp_path / ("generations.jsonl" if shared_file else f"{old}.jsonl")
    old_file.write_text(json.dumps({"key": call_key(old, "task one", ""), "text": "paid before", "prompt_tokens": 3,
                                    "generated_tokens": 2, "finished": True, "truncated_tokens": 0}) + "\n")
    client = GeneratorClient(cfg, **where)
    client._backend, client._renderer = _Answering(), _Renderer()
    assert client.complete(["task one", "task two"]) == ["paid before", "new"]
    assert client._backend.asked == 1 and client.counts["cached"] == 1
    again = GeneratorClient(cfg, **where)  # now under today's key: read without the older file's help
    assert again.cache.get(again.key("task one"))["text"] == "paid before"


def test_a_synthesis_out_dir_written_under_the_older_rule_keeps_its_identity(tmp_path):
    """hqa data an older ctxbench wrote for a generator with concurrency in its fingerprint is reused or resumed, not
    refused as 'another config and generator'; a fresh out_dir gets today's identity."""
    from ctxbench.trainers.data.synthesis import SCHEMA, Identity, check_out_dir
    from ctxbench.trainers.hqa.data import hqa_identity

    (tmp_path / "docs.jsonl").write_text(json.dumps({"text": "a document"}) + "\n")
    raw = {"documents": {"path": str(tmp_path / "docs.jsonl"), "format": "jsonl"}, "tokenizer": "smollm2-135m",
           "target_tokens": 4096, "samples": 2, "small_tokens": 64, "medium_tokens": 128,
           "generator": {"model": SERVED, "backend": "openai", "backend_args": {"base_url": "http://x/v1", "concurrency": 8}}}
    fresh = hqa_identity(HQADataConfig(**raw, out_dir=str(tmp_path / "new")))
    cfg = HQADataConfig(**raw, out_dir=str(tmp_path / "old"))
    older = Identity(cfg.legacy_config_hash(), fresh.inputs, legacy_fingerprint(cfg.generator))
    assert older.hash != fresh.hash and older.config != fresh.config and older.generator != fresh.generator
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "manifest.json").write_text(json.dumps({"schema": SCHEMA, "identity": older.as_dict()}))
    assert hqa_identity(cfg) == older and check_out_dir(cfg.out_dir, older) is not None
    faster = HQADataConfig(**{**raw, "generator": {**raw["generator"], "backend_args": {"base_url": "http://x/v1",
                                                                                          "concurrency": 32}}},
                           out_dir=str(tmp_path / "new"))
    assert hqa_identity(faster) == fresh  # today: concurrency is no part of it
