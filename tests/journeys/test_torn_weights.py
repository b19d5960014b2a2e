"""Journey: a training killed inside its final save, and the model directory it leaves (issue 21 item 20).

The final model is saved into a staging directory and published file by file, config.json and the manifest last,
so a kill leaves no directory that looks like a model over torn weights; and a torn weights file met when scoring
is refused with one line naming it, not a traceback.
The scoring runs in process (`user_in_process`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import User


def test_scoring_a_torn_weights_file_names_it(user_in_process: User, tiny_copy: Path):
    weights = tiny_copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    r = user_in_process.run(f"ctxbench score --model {tiny_copy} --suite ruler-quick --tasks ruler/niah_single_1 --lengths 512 "
                            "--samples 1 --backend-arg threads=1")  # threads: no half-second probe of the busy cores
    assert r.code == 2, r.err[-3000:]
    assert "Traceback" not in r.err
    assert r.last_err_line.startswith("error: ") and str(weights) in r.last_err_line
    assert not (user_in_process.cwd / "runs").exists()


def _staged(tmp_path: Path) -> Path:
    staging = tmp_path / "model" / ".final.tmp"
    staging.mkdir(parents=True)
    for name in ("model.safetensors", "tokenizer.json", "config.json", "ctxbench_manifest.json"):
        (staging / name).write_text(name)
    (staging / "adapter").mkdir()
    (staging / "adapter" / "adapter_model.safetensors").write_text("a")
    return staging


def test_publishing_moves_config_and_manifest_last(tmp_path: Path, monkeypatch):
    import os

    from ctxbench.trainers.loop import publish_model

    staging = _staged(tmp_path)
    out = staging.parent
    (out / "adapter").mkdir()  # an older adapter directory is replaced
    moved: list[str] = []

    def replace(src, dst):
        if Path(src).name == "config.json":
            raise KeyboardInterrupt  # killed just before config.json
        moved.append(Path(src).name)
        return real(src, dst)

    real = os.replace
    monkeypatch.setattr("ctxbench.harness.core.io.os.replace", replace)
    with pytest.raises(KeyboardInterrupt):
        publish_model(staging, out)
    assert "model.safetensors" in moved and not (out / "config.json").exists()  # nothing looks like a model
    monkeypatch.setattr("ctxbench.harness.core.io.os.replace", real)
    publish_model(staging, out)
    assert (out / "config.json").read_text() == "config.json" and (out / "adapter" / "adapter_model.safetensors").exists()
    assert not staging.exists()
