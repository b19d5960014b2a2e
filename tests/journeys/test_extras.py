"""Issue 21 item 7: a command that needs an extra the user has not installed says which, in one line, exit 2,
before anything is written. The user's Python is made to lack a module by a sitecustomize that puts None in
sys.modules (what `import` and importlib see for a module that is not installed); the CLI is the real one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HIDE = """import os, sys
for _name in os.environ.get("CTXBENCH_TEST_HIDE", "").split(","):
    if _name:
        sys.modules[_name] = None
"""


@pytest.fixture()
def without(tmp_path: Path):
    """env that hides the given modules from the user's Python."""
    site = tmp_path / "hide"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HIDE)

    def env(*modules: str) -> dict[str, str]:
        path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
        return {"PYTHONPATH": path, "CTXBENCH_TEST_HIDE": ",".join(modules)}

    return env


def refused_in_one_line(r, expected: str) -> None:
    assert r.code == 2, r.err[-2000:]
    assert r.err.strip().splitlines() == [r.last_err_line] and expected in r.last_err_line, r.err[-2000:]


def test_lmeval_without_its_extra_writes_no_run(user, without):
    r = user.run("ctxbench lmeval --tasks arc_easy --limit 2", env=without("lm_eval"))
    refused_in_one_line(r, "ctxbench lmeval needs the lmeval extra (no module lm_eval): pip install 'ctxbench[lmeval]'")
    assert user.files() == set()


def test_score_without_torch_says_install_torch_first(user, without):
    r = user.run("ctxbench score --suite ruler-quick", env=without("torch"))
    refused_in_one_line(r, "backend hf needs torch, which no extra installs: pip install torch==2.13.0 first")
    assert "ctxbench[hf]" in r.last_err_line and user.files() == set()


def test_openai_backend_without_the_serve_extra(user, without):
    r = user.run("ctxbench score --backend openai --suite ruler-quick", env=without("httpx"))
    refused_in_one_line(r, "backend openai needs the serve extra (no module httpx): pip install 'ctxbench[serve]'")
    assert user.files() == set()


def test_train_and_data_pack_name_their_extra(user, without):
    r = user.run("ctxbench train cpt --config cpt-tiny", env=without("accelerate"))
    refused_in_one_line(r, "ctxbench train cpt needs the train extra (no module accelerate): pip install 'ctxbench[train]'")
    r = user.run("ctxbench data pack --config standard --out packed/x", env=without("transformers"))
    refused_in_one_line(r, "ctxbench data pack needs the train extra (no module transformers)")
    assert user.files() == set()


def test_every_data_method_names_the_train_extra(user, without, data_dir):
    """hqa and logo, run by `data pack --method` or their own commands, say which extra (train) before anything is read
    or written: not the tokenizer loader's hf extra from deep inside the run."""
    hide = {**without("transformers"), "CTXBENCH_DATA_DIR": str(data_dir)}
    for command, expected in (("data pack --method hqa --config hqa-tiny --out d/hqa", "ctxbench data pack --method hqa"),
                              ("data pack --method logo --config logo-tiny --out d/logo", "ctxbench data pack --method logo"),
                              ("data hqa --config hqa-tiny --out d/hqa", "ctxbench data hqa")):
        r = user.run(f"ctxbench {command}", env=hide)
        refused_in_one_line(r, f"{expected} needs the train extra (no module transformers): pip install 'ctxbench[train]'")
    assert user.files() == set()


def test_dense_retrieval_names_the_synth_extra(user, without):
    cfg = user.cwd / "dense.yaml"
    cfg.write_text("corpus: {path: ., format: repo}\nmethod: knn\nseq_len: 256\nbudget_tokens: 1000\n"
                   "tokenizer: smollm2-135m\nout_dir: packed/knn\n")
    r = user.run("ctxbench data pack --config dense.yaml", env=without("faiss"))
    refused_in_one_line(r, "method knn (dense retriever, embedder minilm) needs the synth extra (no module faiss)")
    assert user.files() == {"dense.yaml"}


def test_every_backend_hint_has_one_style(monkeypatch):
    """vllm, lmeval and openai hints come from the one check (vllm is not installed on CPU machines)."""
    import sys

    from ctxbench.harness.core import registry
    from ctxbench.harness.core.errors import ConfigError

    for backend, module, line in (("vllm", "vllm", "backend vllm needs the vllm extra (no module vllm): "
                                   "pip install 'ctxbench[vllm]' (CUDA GPUs only)"),
                                  ("lmeval:hf", "lm_eval", "backend lmeval needs the lmeval extra (no module lm_eval): "
                                   "pip install 'ctxbench[lmeval]'")):
        monkeypatch.setitem(sys.modules, module, None)
        with pytest.raises(ConfigError) as e:
            registry.get("backend", backend)(model="smollm2-135m")
        assert str(e.value) == line


def test_a_suite_with_an_lmeval_task_writes_no_run(user, without):
    (user.cwd / "s.yaml").write_text("name: lm\nlengths: [0]\nsamples: 1\n"
                                     "tasks: [{task: lmeval/custom, args: {tasks: [arc_easy], limit: 2}}]\n")
    r = user.run("ctxbench score --suite s.yaml --backend echo", env=without("lm_eval"))
    refused_in_one_line(r, "task lmeval/custom needs the lmeval extra (no module lm_eval): pip install 'ctxbench[lmeval]'")
    assert user.files() == {"s.yaml"}


def test_a_plain_install_scoring_with_echo_names_the_hf_extra(user, without):
    """`pip install ctxbench` alone: even the echo backend needs a tokenizer, which transformers loads."""
    r = user.run("ctxbench score --backend echo --suite ruler-quick", env=without("torch", "transformers"))
    refused_in_one_line(r, "loading a tokenizer needs the hf extra (no module transformers): pip install 'ctxbench[hf]'")
    assert user.files() == set()
