"""Issue 31, "Echo runs are filed as the real model": a backend that produces no model output (echo) never shares a
model's identity, label or board row, in a store written today or by an older ctxbench (echo under the real weights'
fingerprint and the model's name)."""

from __future__ import annotations

import dataclasses
import json

from ctxbench.harness.core.store import RunStore, check_identity
from ctxbench.harness.core.types import RunRecord, board_name, run_fingerprint
from ctxbench.leaderboard.store_frame import load_store

GGUF = "gguf:b179c9523d0e6a0f"  # SmolLM2-135M's GGUF, as a record of either backend named it before the fix


def make_run(root, run_id, *, backend, fp=GGUF, label="smollm2-135m", scores=(1.0, 1.0)):
    store = RunStore(root, run_id)
    rec = RunRecord(run_id=run_id, created="2026-01-01T00:00:00", suite="s", suite_config={}, model="smollm2-135m",
                    backend=backend, backend_args={}, tokenizer="t", tokenizer_fingerprint="tok", template="chat",
                    seed=42, truncation="refuse", versions={"ctxbench": "0.1.0"}, command=["ctxbench"], label=label,
                    model_fingerprint=fp, plan={"t": {"512": len(scores)}}, sessions=[{"started": "2026-01-01"}])
    store.dir.mkdir(parents=True, exist_ok=True)
    store.record_path.write_text(json.dumps(dataclasses.asdict(rec)))
    store.append([{"id": f"t@512#{i}", "task": "t", "length": 512, "index": i, "score": s, "prompt_hash": f"p{i}",
                   "prediction": "", "answers": ["x"]} for i, s in enumerate(scores)])
    return store


def test_an_old_echo_run_beside_the_real_model_is_its_own_board_row(tmp_path):
    make_run(tmp_path, "real", backend="hf", scores=(1.0, 1.0))
    make_run(tmp_path, "echo-old", backend="echo", scores=(0.0, 0.0))  # stored before the fix: the real fingerprint
    frames = load_store(tmp_path)
    means = frames.scores.groupby("model")["score"].mean().to_dict()
    assert means == {"smollm2-135m": 1.0, "echo(smollm2-135m)": 0.0}
    assert not any("more than one run" in n for n in frames.notes), frames.notes  # nothing was merged
    assert set(frames.runs["fingerprint"]) == {GGUF, f"echo:{GGUF}"}


def test_an_echo_run_with_its_own_label_keeps_it_and_still_never_merges(tmp_path):
    make_run(tmp_path, "real", backend="hf", scores=(1.0, 1.0))
    make_run(tmp_path, "echo", backend="echo", fp=f"echo:{GGUF}", label="pipeline-check", scores=(0.0, 0.0))
    models = set(load_store(tmp_path).scores["model"])
    assert models == {"smollm2-135m", "pipeline-check"}


def test_an_old_echo_run_still_resumes_under_its_new_fingerprint(tmp_path):
    store = make_run(tmp_path, "echo-old", backend="echo")
    check_identity(store, {"backend": "echo", "model_fingerprint": f"echo:{GGUF}"})  # no refusal


def test_names_and_fingerprints_of_model_free_backends():
    assert run_fingerprint("echo", GGUF) == f"echo:{GGUF}" == run_fingerprint("echo", f"echo:{GGUF}")
    assert run_fingerprint("hf", GGUF) == GGUF
    assert board_name("", "echo", "smollm2-135m") == board_name("smollm2-135m", "echo", "smollm2-135m") == "echo(smollm2-135m)"
    assert board_name("smollm2-135m", "hf", "smollm2-135m") == "smollm2-135m"


def test_the_echo_backend_files_its_runs_under_echo():
    from ctxbench.harness.backends.echo import EchoBackend
    from ctxbench.harness.core.models import weights_fingerprint
    from ctxbench.harness.run.planning import model_fingerprint

    backend = EchoBackend(model="smollm2-135m")
    assert model_fingerprint(backend, "smollm2-135m") == "echo:" + weights_fingerprint("smollm2-135m")
