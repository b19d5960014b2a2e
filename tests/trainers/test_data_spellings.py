"""`data hqa` and `data logo` are spellings of `data pack --method hqa|logo` (issue 33 §4): one code path, so the same
refusals, the same files and the same summary, whichever a user types."""

from __future__ import annotations

import hashlib

import yaml


def _digests(out):
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(out.iterdir())
            if f.is_file() and f.name not in ("manifest.json",) and not f.name.startswith(".")}


def test_data_logo_and_data_pack_method_logo_write_and_say_the_same(tmp_path, logo_config, ctxbench):
    config = tmp_path / "logo.yaml"
    config.write_text(yaml.safe_dump(logo_config(tmp_path / "unused", max_samples=6)))
    spelled = ctxbench("data", "logo", "--config", str(config), "--out", str(tmp_path / "a"))
    packed = ctxbench("data", "pack", "--method", "logo", "--config", str(config), "--out", str(tmp_path / "b"))
    assert spelled[0] == packed[0] == 0, spelled[2] + packed[2]
    assert "logo: " in spelled[1] and "generator calls: " in spelled[1]  # the method's own summary, not a generic line
    assert spelled[1].replace(str(tmp_path / "a"), "OUT") == packed[1].replace(str(tmp_path / "b"), "OUT")
    assert _digests(tmp_path / "a") == _digests(tmp_path / "b") and "generations.jsonl" in _digests(tmp_path / "a")


def test_data_hqa_and_data_pack_method_hqa_refuse_the_same(tmp_path, data_dir, ctxbench):
    good = {"documents": {"path": str(data_dir / "squad" / "dev-v2.0.json"), "max_documents": 2}, "tokenizer": "smollm2-135m",
            "small_tokens": 128, "medium_tokens": 384, "target_tokens": 2048, "samples": 2, "out_dir": "unused",
            "generator": {"model": "smollm2-135m", "backend": "echo"}}
    cases = {"missing.yaml": ({k: v for k, v in good.items() if k != "target_tokens"}, "target_tokens: required key"),
             "backend_arg.yaml": ({**good, "generator": {**good["generator"], "backend_args": {"no_such_arg": 1}}},
                                  "no_such_arg")}
    for name, (raw, hint) in cases.items():
        config = tmp_path / name
        config.write_text(yaml.safe_dump(raw))
        spelled = ctxbench("data", "hqa", "--config", str(config), "--out", str(tmp_path / "a"))
        packed = ctxbench("data", "pack", "--method", "hqa", "--config", str(config), "--out", str(tmp_path / "b"))
        assert spelled[0] == packed[0] == 2 and hint in spelled[2] and spelled[2] == packed[2], spelled[2]
        assert len(spelled[2].strip().splitlines()) == 1
        assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
