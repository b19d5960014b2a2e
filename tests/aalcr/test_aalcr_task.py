"""The aalcr task: official questions scored whole at the bin of their real size, a document set's questions one
cluster, the release zip read like the extracted folder, the judge's settings as task arguments, and bad data
refused in one line naming data_path."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.prompting import PromptRenderer
from ctxbench.harness.core.types import Sample
from ctxbench.tasks.length_bins import in_bin

FIXTURE = Path(__file__).parent / "data"


@pytest.fixture()
def ctx(smol_tokenizer, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=FIXTURE)


def task(**args):
    return registry.get("task", "aalcr")(**{"api_key_env": "", **args})


def bin_samples(t, length, ctx) -> list[Sample]:
    return [t.generate(length=length, index=j, seed=0, ctx=ctx) for j in range(t.samples_at(length, ctx))]


def test_questions_land_whole_in_their_bin_with_their_set_as_cluster(ctx):
    t = task()
    t.prepare(ctx)
    assert {n: t.samples_at(n, ctx) for n in (1024, 2048, 4096, 8192, 16384)} == {1024: 0, 2048: 2, 4096: 2, 8192: 2, 16384: 0}
    sets = {2048: "Company_Documents/1", 4096: "Legal/2", 8192: "Academia/3"}
    rows = []
    for length, key in sets.items():
        for s in bin_samples(t, length, ctx):
            assert in_bin(s.meta["size"], length) and s.prompt_tokens + s.max_new_tokens == s.meta["size"]
            assert s.meta["cluster"] == f"aalcr:{key}" and s.turns == () and "END QUESTION" in s.prompt
            rows.append(s.meta["row"])
    assert rows == list(range(6))  # official order, every question in exactly one bin
    assert task(limit=1).samples_per_length() == 1


def test_release_zip_reads_as_the_extracted_folder(ctx, tmp_path):
    root = tmp_path / "copy"
    (root / "extracted_text").mkdir(parents=True)
    shutil.copy(FIXTURE / "aalcr" / "AA-LCR_Dataset.csv", root)
    with zipfile.ZipFile(root / "extracted_text" / "AA-LCR_extracted-text.zip", "w") as z:
        for p in sorted((FIXTURE / "aalcr" / "lcr").rglob("*.txt")):
            z.write(p, p.relative_to(FIXTURE / "aalcr").as_posix())
    zipped, folder = task(data_path=str(root)), task()
    for length in (2048, 4096, 8192):
        assert [s.prompt for s in bin_samples(zipped, length, ctx)] == [s.prompt for s in bin_samples(folder, length, ctx)]
    assert [p.name for p in zipped.data_files(ctx)] == ["AA-LCR_Dataset.csv", "AA-LCR_extracted-text.zip"]


def test_judge_settings_are_arguments_and_the_url_comes_from_the_environment(monkeypatch):
    t = task(model="my-checker", temperature=0.2, verdict="exact")
    assert t.settings == {"temperature": 0.2, "top_p": 0.95, "seed": 0, "max_tokens": 256} and t.version == "my-checker"
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert task().args.base_url == "https://api.openai.com/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert task().args.base_url == "http://127.0.0.1:9/v1" and task(base_url="http://h/v1").args.base_url == "http://h/v1"
    assert t.paid_calls[0] == 1


def test_exact_verdict_and_flags(ctx):
    s = task().generate(length=2048, index=0, seed=0, ctx=ctx)
    prefix, exact = task(), task(verdict="exact")
    assert prefix.combine([prefix.accept(0, "CORRECTNESS: INCORRECT", s)], s) == (1.0, {}, [
        "verdict 'CORRECTNESS: INCORRECT' is not CORRECT or INCORRECT"])
    assert exact.combine([exact.accept(0, "CORRECTNESS: INCORRECT", s)], s)[0] == 0.0
    assert prefix.score_row("   ", s)[:1] == (0.0,) and "skipped" in prefix.score_row("", s)[1]["judge"]


def test_bad_data_is_one_line_naming_data_path(ctx, tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="data_path: .* is not a directory"):
        task(data_path=str(tmp_path / "nowhere")).prepare(ctx)
    with pytest.raises(ConfigError, match="data_path: .* has no AA-LCR_Dataset.csv"):
        task(data_path=str(tmp_path)).prepare(ctx)
    (tmp_path / "AA-LCR_Dataset.csv").write_text("question_id,question\n1,q\n")
    with pytest.raises(ConfigError, match="data_path: .* has AA-LCR_Dataset.csv but no documents"):
        task(data_path=str(tmp_path)).prepare(ctx)
    (tmp_path / "lcr").mkdir()
    with pytest.raises(ConfigError, match="lacks the columns document_category, document_set_id, answer"):
        task(data_path=str(tmp_path)).prepare(ctx)
    shutil.copy(FIXTURE / "aalcr" / "AA-LCR_Dataset.csv", tmp_path)
    with pytest.raises(ConfigError, match="have no Company_Documents/1/Tapir Corp Annual Report 2023.txt"):
        task(data_path=str(tmp_path)).prepare(ctx)
    monkeypatch.delenv("CTXBENCH_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(ConfigError, match="api_key_env: environment variable CTXBENCH_TEST_NO_SUCH_KEY is not set"):
        task(api_key_env="CTXBENCH_TEST_NO_SUCH_KEY").prepare(ctx)
    with pytest.raises(ConfigError, match="sample 2 is out of range; the bin of length 2048"):
        task().generate(length=2048, index=2, seed=0, ctx=ctx)
