"""The light tokenizer is read once per process while its files stay as they are, and read again when one changes
(harness/core/models.py: a study or a test suite scores many runs in one process)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ctxbench.harness.core.models import load_tokenizer, materialize, resolve


def test_one_load_per_directory_until_a_file_changes(tmp_path):
    source = Path(materialize(resolve("smollm2-135m")))
    copy = tmp_path / "tok"
    copy.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json"):
        shutil.copy(source / name, copy / name)
    first = load_tokenizer(str(copy), light=True)
    assert type(first).__name__ == "LightTokenizer"
    assert load_tokenizer(str(copy), light=True) is first
    config = json.loads((copy / "tokenizer_config.json").read_text())
    config["chat_template"] = "{% for m in messages %}<<{{ m['content'] }}>>{% endfor %}"
    (copy / "tokenizer_config.json").write_text(json.dumps(config))
    os.utime(copy / "tokenizer_config.json", ns=(1, 1))  # another time even on a coarse clock
    second = load_tokenizer(str(copy), light=True)
    assert second is not first
    assert second.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False) == "<<hi>>"
