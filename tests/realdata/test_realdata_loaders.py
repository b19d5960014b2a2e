"""Loading the official formats from local files, and through `datasets` as the hub path does (no network)."""

from __future__ import annotations

import json

import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError, OfflineError
from ctxbench.harness.core.prompting import PromptRenderer


def _jsonl(path, rows):
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return path


def _lb(i, length=3000, **kw):
    return {"input": f"Question {i}?", "context": f"Context {i}. " * 20, "answers": [f"answer {i}"], "length": length,
            "dataset": "qasper", "language": "en", "all_classes": None, "_id": f"id{i}", **kw}


@pytest.fixture()
def ctx(smol_tokenizer, tmp_path, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    return GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=tmp_path)


def test_longbench_local_jsonl_limit_and_buckets(ctx, tmp_path):
    f = _jsonl(tmp_path / "qasper_e.jsonl", [_lb(0, 3999), _lb(1, 4000), _lb(2, 9000)])
    task = registry.get("task", "longbench/qasper_e")(data_file=str(f))
    assert task.samples_per_length(ctx) == 3
    got = [task.generate(length=1024, index=i, seed=0, ctx=ctx) for i in range(3)]
    assert [s.meta["bucket"] for s in got] == ["0-4k", "4-8k", "8k+"]  # official: < 4000, < 8000, else
    assert got[1].answers == ("answer 1",) and "Question 1?" in got[1].prompt
    assert task.category == "single-doc QA" and got[0].metric == "longbench/qa_f1" and got[0].max_new_tokens == 128
    limited = registry.get("task", "longbench/qasper_e")(data_file=str(f), limit=2)
    assert limited.samples_per_length(ctx) == 2
    with pytest.raises(ConfigError, match="out of range"):
        limited.generate(length=1024, index=2, seed=0, ctx=ctx)


def test_longbench_found_under_data_dir(ctx, tmp_path):
    (tmp_path / "longbench").mkdir()
    _jsonl(tmp_path / "longbench" / "trec.jsonl", [_lb(0, all_classes=["Human", "Entity"], answers=["Human"])])
    task = registry.get("task", "longbench/trec")()
    s = task.generate(length=1024, index=0, seed=0, ctx=ctx)
    # few-shot: the first line only, then classification over all_classes
    assert task.score("\nHuman\nEntity", s) == 1.0 and task.score("Entity or Human", s) == 0.5


def test_longbench_hub_path_through_datasets(ctx, tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    f = _jsonl(tmp_path / "hub.jsonl", [_lb(0), _lb(1)])
    real = datasets.load_dataset
    calls = []

    def fake(repo, name=None, split=None, **kw):  # the hub stands in for a local json file
        calls.append((repo, name, split))
        return real("json", data_files=str(f), split="train")

    monkeypatch.setattr(datasets, "load_dataset", fake)
    monkeypatch.setattr("ctxbench.tasks.realdata.hub_reachable", lambda: True)
    task = registry.get("task", "longbench/hotpotqa")()
    assert task.samples_per_length(ctx) == 2 and calls == [("THUDM/LongBench", "hotpotqa", "test")]
    assert task.generate(length=1024, index=1, seed=0, ctx=ctx).answers == ("answer 1",)


def test_offline_hub_is_a_clear_error(ctx, monkeypatch):
    datasets = pytest.importorskip("datasets")
    huggingface_hub = pytest.importorskip("huggingface_hub")

    def offline(*a, **k):
        raise ConnectionError("no network")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    monkeypatch.setattr("ctxbench.tasks.realdata.hub_reachable", lambda: True)  # the clients themselves fail
    with pytest.raises(OfflineError, match="data_file"):
        registry.get("task", "longbench/narrativeqa")().samples_per_length(ctx)
    with pytest.raises(OfflineError, match="path/to/passkey.jsonl"):
        registry.get("task", "infinitebench/passkey")().samples_per_length(ctx)


def test_unreachable_hub_fails_fast(ctx, monkeypatch):
    monkeypatch.setattr("ctxbench.tasks.realdata.hub_reachable", lambda: False)
    with pytest.raises(OfflineError, match="unreachable.*HF_HUB_OFFLINE"):
        registry.get("task", "longbench2")().samples_per_length(ctx)


def test_infinitebench_local_jsonl_keeps_label_types(ctx, tmp_path):
    rows = [
        {"id": 0, "context": "[3, 88, 7]", "input": "What is the largest number of the list? The largest number of the list is: ", "answer": [88], "options": []},
        {"id": 1, "context": "[3, 4]", "input": "What is the median number of the list? The median number of the list is: ", "answer": [3.5], "options": []},
    ]
    task = registry.get("task", "infinitebench/math_find")(data_file=str(_jsonl(tmp_path / "math_find.jsonl", rows)))
    a, b = (task.generate(length=512, index=i, seed=0, ctx=ctx) for i in range(2))
    assert a.prompt.count("What is the largest number in the following list?") == 1  # official prefix from the input
    assert (a.answers, b.answers) == (("88",), ("3.5",)) and a.max_new_tokens == 3
    assert task.score("88", a) == 1.0 and task.score("88.0", a) == 0.0 and task.score("3.50", b) == 1.0


def test_infinitebench_choice_and_code_fields(ctx, tmp_path):
    choice = {"id": 0, "context": "A book.", "input": "Who walks?", "answer": ["Walking Georgie"],
              "options": ["Walking Georgie", "Hall Farm", "Snowfield", "Nobody"]}
    task = registry.get("task", "infinitebench/longbook_choice_eng")(data_file=str(_jsonl(tmp_path / "c.jsonl", [choice])))
    s = task.generate(length=512, index=0, seed=0, ctx=ctx)
    assert s.answers == ("Walking Georgie", "A") and "B. Hall Farm" in s.prompt and "The letter of the correct answer is" in s.prompt
    run = {"id": 0, "context": "def func_1(x):\n    return x - 4", "input": "What is func_1(-10)?", "answer": [-14], "options": []}
    task = registry.get("task", "infinitebench/code_run")(data_file=str(_jsonl(tmp_path / "r.jsonl", [run])))
    s = task.generate(length=512, index=0, seed=0, ctx=ctx)
    assert "The value of func_1(-10) is" in s.prompt and "function called func_1 " in s.prompt and s.answers == ("-14",)
    assert task.score("-14", s) == 1.0


def test_longbench2_json_prompt_and_extraction(ctx, tmp_path):
    rec = {"_id": "x", "domain": "Single-Document QA", "sub_domain": "Legal", "difficulty": "hard", "length": "short",
           "question": " Who? ", "choice_A": "Ann", "choice_B": "Bob", "choice_C": "Cid", "choice_D": "Dee",
           "answer": "B", "context": "Bob did it. " * 10}
    f = tmp_path / "data.json"
    f.write_text(json.dumps([rec]), encoding="utf-8")
    task = registry.get("task", "longbench2")(data_file=str(f))
    s = task.generate(length=1024, index=0, seed=0, ctx=ctx)
    assert "What is the correct answer to this question: Who?\nChoices:\n(A) Ann\n(B) Bob" in s.prompt
    assert s.meta["difficulty"] == "hard" and s.meta["length_bucket"] == "short" and s.max_new_tokens == 128
    assert task.score("The correct answer is (B)", s) == 1.0
    assert task.score("**The correct answer is B**", s) == 1.0  # '*' removed, then the form without parentheses
    assert task.score("The answer is B", s) == 0.0


def test_icl_reads_trec_label_files_and_dbpedia_csv(ctx, tmp_path):
    (tmp_path / "trec").mkdir()
    tags = ["ABBR:exp", "ENTY:animal", "DESC:manner", "HUM:ind", "LOC:city", "NUM:date"]
    (tmp_path / "trec" / "train_5500.label").write_text("".join(f"{tags[i % 6]} What is thing {i} ?\n" for i in range(300)), encoding="latin-1")
    (tmp_path / "trec" / "TREC_10.label").write_text("HUM:ind Who is he ?\nLOC:city Where is it ?\n", encoding="latin-1")
    task = registry.get("task", "icl/trec")(num_sets=2)
    assert task.samples_per_length(ctx) == 4  # 2 sets x the whole 2-question test set
    s = task.generate(length=1024, index=1, seed=0, ctx=ctx)
    assert s.answers == ("location",) and s.prompt.endswith("Question: Where is it ?\nType:") and s.meta["template"] == "plain"
    assert "\n==\nQuestion: " in s.prompt and task.score(" Location.\nQuestion", s) == 1.0 and task.score("human", s) == 0.0
    # 2048 is in the paper's map (90 shots); 1024 is not: as many as fit. The shorter set is a prefix of the longer.
    long = task.generate(length=2048, index=1, seed=0, ctx=ctx)
    assert long.meta["shots"] == 90 and s.meta["shots_wanted"] is None and 20 < s.meta["shots"] < 90
    demos = s.prompt[: s.prompt.rindex("Question: Where")]
    assert long.prompt.startswith(demos) and s.prompt_tokens + s.max_new_tokens <= 1024
    clusters = [task.generate(length=1024, index=i, seed=0, ctx=ctx).meta["cluster"] for i in (0, 2, 3)]
    assert s.meta["cluster"] == clusters[0] != clusters[1] == clusters[2]  # one cluster per set of demonstrations
    (tmp_path / "dbpedia").mkdir()
    csv = "".join(f'{i % 14 + 1},"Title {i}"," Content {i} is here."\n' for i in range(40))
    (tmp_path / "dbpedia" / "train.csv").write_text(csv, encoding="utf-8")
    (tmp_path / "dbpedia" / "test.csv").write_text('3,"T"," An artist."\n', encoding="utf-8")
    s = registry.get("task", "icl/dbpedia")(num_sets=1).generate(length=1024, index=0, seed=0, ctx=ctx)
    assert s.answers == ("artist",) and s.prompt.endswith("input:  An artist.\ntype:") and "type: company\n==\n" in s.prompt


def test_questions_on_one_document_share_a_cluster(ctx, tmp_path):
    """Questions on one document are not independent: same document, same cluster id; another document, another."""
    ask = "What is the largest number of the list? The largest number of the list is: "
    rows = [{"id": i, "context": doc, "input": ask, "answer": [88], "options": []}
            for i, doc in enumerate(["[3, 88, 7]", "[3, 88, 7]", "[88, 4]"])]
    task = registry.get("task", "infinitebench/math_find")(data_file=str(_jsonl(tmp_path / "math_find.jsonl", rows)))
    a, b, c = (task.generate(length=512, index=i, seed=0, ctx=ctx).meta["cluster"] for i in range(3))
    assert a == b != c and a.startswith("infinitebench/math_find:")
