"""Journey 8 (option values): a device this torch cannot use, or a misspelt dtype or template, is refused with one line
that lists the valid values, before any weights load and before anything is written. The model named here does not
exist: the option is refused first, so nothing was loaded (or downloaded) to find out. Every refusal here runs in
process (`user_in_process`); the two that show a model is not converted point CTXBENCH_CACHE at an empty directory
(read at each use), so a conversion before the refusal leaves a model there and fails them."""

from __future__ import annotations

import pytest


def _one_line_and_nothing_written(user, r) -> None:
    assert r.code == 2, r.err[-2000:]
    assert r.err.strip().count("\n") == 0, r.err
    assert not (user.cwd / "runs").exists()


def test_cuda_on_a_cpu_only_torch(user_in_process):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    r = user_in_process.run("ctxbench score --model ./no-such-model --device cuda --tasks kv/retrieval --lengths 1024 --samples 1")
    _one_line_and_nothing_written(user_in_process, r)
    assert "device" in r.err and "CPU-only" in r.err and "use cpu" in r.err


def test_lmeval_checks_the_device_too(user_in_process):
    """`ctxbench lmeval` has no --device; the same check covers its --backend-arg device=cuda."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    r = user_in_process.run("ctxbench lmeval --model ./no-such-model --tasks arc_easy --backend-arg device=cuda")
    _one_line_and_nothing_written(user_in_process, r)
    assert "device" in r.err and "CPU-only" in r.err


def test_misspelt_dtype_and_template(user_in_process):
    r = user_in_process.run("ctxbench score --model ./no-such-model --dtype float33 --tasks kv/retrieval --lengths 1024 --samples 1")
    _one_line_and_nothing_written(user_in_process, r)
    assert "float33" in r.err and "bfloat16" in r.err and "float32" in r.err
    t = user_in_process.run("ctxbench score --model ./no-such-model --template chatt --tasks kv/retrieval --lengths 1024 --samples 1 --backend echo")
    _one_line_and_nothing_written(user_in_process, t)
    assert "chatt" in t.err and "chat" in t.err and "plain" in t.err and "vicuna" in t.err


def test_a_cuda_index_beyond_the_machines_gpus(monkeypatch):
    """The same check on a GPU machine (faked here: one GPU): cuda:0 passes, cuda:1 is one line."""
    torch = pytest.importorskip("torch")
    from ctxbench.harness.backends.args import check_backend_args
    from ctxbench.harness.core.errors import ConfigError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    check_backend_args("hf", {"device": "cuda:0"})
    with pytest.raises(ConfigError, match=r"backend_args.device: cuda:1: this machine has 1 CUDA device\(s\), cuda:0 to cuda:0"):
        check_backend_args("hf", {"device": "cuda:1"})


@pytest.mark.parametrize("model", ["smollm2-135m", "./no-such-model"])
def test_length_zero_is_refused_before_the_model_is_converted(user_in_process, tmp_path, model):
    """Issue 32's seam: `--lengths 0` converted the GGUF model (transformers' dtype notice, a DeepSpeed warning) before
    refusing. The suite alone refuses it: one line, nothing else printed, nothing converted into an empty cache."""
    user = user_in_process
    cache = tmp_path / "cache"
    r = user.run(f"ctxbench score --backend echo --model {model} --suite ruler-quick --lengths 0",
                 env={"CTXBENCH_CACHE": str(cache)})
    _one_line_and_nothing_written(user, r)
    assert r.err.startswith("error: tasks.0: ruler/niah_single_1 needs a length of at least 64 tokens") and not r.out
    assert not (cache / "models").exists() or not any((cache / "models").iterdir())


def test_a_length_over_an_alias_context_is_refused_before_conversion(user_in_process, tmp_path):
    """The alias's context (8192 for smollm2-135m) is known without converting its GGUF: the refusal comes first."""
    user = user_in_process
    cache = tmp_path / "cache"
    r = user.run("ctxbench score --model smollm2-135m --suite ruler-quick --lengths 65536",
                 env={"CTXBENCH_CACHE": str(cache)})
    _one_line_and_nothing_written(user, r)
    assert "exceed the model's context of 8192 tokens" in r.err
    assert not (cache / "models").exists() or not any((cache / "models").iterdir())
