"""Every bad input is one line naming the file, line or key, exit 2, and nothing written (issue 10 §4).

The cases run the CLI's main() in this process (the `ctxbench` fixture); test_cli_errors.py and test_store.py
drive real processes.
"""

from __future__ import annotations

import collections
import hashlib
import json
from pathlib import Path

import pytest

from ctxbench.harness.core.config import CONFIG_ROOT
from ctxbench.harness.core.models import cache_dir

GOOD = "name: t\nlengths: [512]\nsamples: 1\ntasks: [ruler/niah_single_1]\n"


def suite(tmp: Path, name: str, body: str) -> str:
    path = tmp / name
    if tmp.is_dir():  # not while collecting the case names
        path.write_text(body)
    return str(path)


def task_suite(tmp: Path, task: str, args: dict) -> str:
    name = hashlib.sha1(f"{task}{sorted(args.items())}".encode()).hexdigest()[:10]
    return suite(tmp, f"suite-{name}.yaml",
                 f"name: t\nlengths: [512]\nsamples: 1\ntasks:\n  - task: {task}\n    args: {json.dumps(args)}\n")


HUGE_CSV = "model,task,length,score\nX,avg,4096," + "9" * (10 * 1024 * 1024) + "\n"


@pytest.fixture(scope="module")
def huge_csv(tmp_path_factory) -> Path:
    """The 10 MB one-field CSV, written once per module: writing it was most of each case's setup (259 cases)."""
    path = tmp_path_factory.mktemp("huge") / "huge.csv"
    path.write_text(HUGE_CSV)
    return path


def _linked(src: Path, dst: Path) -> None:
    """dst as a hard link to src (a plain file in the case's directory, no copy), or a copy across file systems."""
    try:
        dst.hardlink_to(src)
    except OSError:
        dst.write_bytes(src.read_bytes())


@pytest.fixture()
def files(tmp_path: Path, huge_csv: Path) -> dict[str, str]:
    """Bad files of every kind the issue lists."""
    t = tmp_path / "in"
    t.mkdir()
    (t / "a_file").write_text("not a directory\n")
    (t / "corrupt.gguf").write_bytes(b"\x00garbage" * 1000)
    (t / "truncated.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(range(256)) * 8)
    (t / "latin1.yaml").write_bytes(b"name: caf\xe9\nlengths: [512]\n")
    (t / "a_dir.yaml").mkdir()
    _linked(huge_csv, t / "huge.csv")
    (t / "bad_length.csv").write_text("model,task,length,score\nX,avg,abc,50\n")
    (t / "latin1.csv").write_bytes(b"model,task,length,score\nM\xe9,avg,4096,50\n")
    (t / "empty_essays").mkdir()
    for i in range(3):
        (t / "empty_essays" / f"e{i}.txt").write_text("")
    (t / "few_words.txt").write_text("Only a handful of words here.\n")
    (t / "no_text.json").write_text('{"title": "x"}')
    (t / "squad_corrupt.json").write_text('{"data": [{"title": "x", "paragraphs": [')
    (t / "squad_wrong.json").write_text('{"version": "v2.0"}')
    (t / "squad_empty.json").write_text('{"data": []}')
    (t / "hotpot_corrupt.json").write_text("[{]")
    (t / "longbench_empty.jsonl").write_text("")
    (t / "longbench_corrupt.jsonl").write_text('{"input": "q", "context": "c"}\n{oops\n')
    # the trainers', data commands' and studies' configs: a shipped one with one thing wrong
    for name, shipped, old, new in CONFIG_FAULTS:
        text = (CONFIG_ROOT / shipped).read_text()
        assert old in text, (shipped, old)
        (t / name).write_text(text.replace(old, new, 1))
    (t / "study_latin1.yaml").write_bytes(b"name: caf\xe9\n")
    # a run whose record is garbage: score (resume) and board build must say so in one line
    garbage = tmp_path / "garbage_store"
    (garbage / "run-x").mkdir(parents=True)
    (garbage / "run-x" / "record.json").write_text("{not json")
    # a store holding a paper's table and a training (no scored run): a clashing import, --runs naming the training
    kept = tmp_path / "kept_store"
    (kept / "_reported").mkdir(parents=True)
    (kept / "_reported" / "paper-0a1b2c3d.csv").write_text("model,task,length,score\nX,avg,4096,50\n")
    (kept / "train-x").mkdir()
    (kept / "train-x" / "record.json").write_text('{"run_id": "train-x", "kind": "train", "trainer": "cpt", "config": {}}')
    (t / "clash.csv").write_text("model,task,length,score\nX,avg,4096,60\n")
    return {p.name: str(p) for p in t.iterdir()} | {"garbage_store": str(garbage), "kept_store": str(kept),
                                                    "tmp": str(tmp_path)}


LOGO, HQA, LOGO_DATA, HQA_DATA, STUDY = ("trainers/logo-tiny.yaml", "trainers/hqa-sft-tiny.yaml", "data/logo-tiny.yaml",
                                          "data/hqa-tiny.yaml", "studies/cpu-stdlib.yaml")
CONFIG_FAULTS = [  # file written, shipped config, text replaced, replacement
    ("logo_unknown_key.yaml", LOGO, "beta: 10.0", "betta: 10.0"),
    ("logo_ill_typed.yaml", LOGO, "beta: 10.0", "beta: abc"),
    ("logo_lora_key.yaml", LOGO, "r: 8,", "rank: 8,"),
    ("logo_no_data.yaml", LOGO, "path: runs/data/logo-tiny", "path: nowhere/logo"),
    ("logo.yaml", LOGO, "", ""),
    ("cpt_deepspeed.yaml", "trainers/cpt-tiny.yaml", "max_steps: 40", "max_steps: 40\ndeepspeed: zero4"),
    ("hqa_stage_key.yaml", HQA, "    seq_len: 1024", "    seq_length: 1024"),
    ("hqa_stage_data_missing.yaml", HQA, "data: configs/data/hqa-tiny.yaml", "data: nowhere/hqa.yaml"),
    ("hqa.yaml", HQA, "", ""),
    ("logo_data_unknown_key.yaml", LOGO_DATA, "num_chunks: 8", "num_chunkz: 8"),
    ("logo_data_backend.yaml", LOGO_DATA, "  backend: hf", "  backend: nope"),
    ("logo_data_backend_arg.yaml", LOGO_DATA, "dtype: float32", "dtipe: float32"),
    ("logo_data.yaml", LOGO_DATA, "", ""),
    ("hqa_data_unknown_key.yaml", HQA_DATA, "small_tokens: 128", "smal_tokens: 128"),
    ("hqa_data_docs_missing.yaml", HQA_DATA, "path: squad/dev-v2.0.json", "path: nowhere/dev.json"),
    ("hqa_data_medium.yaml", HQA_DATA, "medium_tokens: 384", "medium_tokens: 64"),
    ("hqa_data.yaml", HQA_DATA, "", ""),
    ("study_unknown_key.yaml", STUDY, "seeds: [0, 1, 2]", "sedes: [0, 1, 2]"),
    ("study_reference.yaml", STUDY, "reference: standard", "reference: nosuch"),
    ("study_training_key.yaml", STUDY, "  max_steps: 2", "  max_stepz: 2"),
    ("study_eval_task.yaml", STUDY, "{task: niah/multi,", "{task: niah/nosuch,"),
    ("study_eval_backend_arg.yaml", STUDY, "backend_args: {dtype: float32}", "backend_args: {dtipe: float32}"),
    ("study_corpus_missing.yaml", STUDY, 'path: "stdlib:"', "path: nowhere/corpus.jsonl"),
    ("study_name_a_path.yaml", STUDY, "name: cpu-stdlib\n", "name: ../../X\n"),
    ("study_method_dotdot.yaml", STUDY, "{name: splice-repo,", "{name: '..',"),
    ("study.yaml", STUDY, "", ""),
]


def cases(f: dict[str, str]) -> dict[str, tuple[list[str], str]]:
    """name -> (argv, a fragment the one line must contain). {store} and {out} are fresh paths under tmp."""
    tmp = Path(f["tmp"])
    echo = ["--backend", "echo", "--store", "{store}"]
    score = ["score", *echo]
    s = task_suite
    return {
        # usage (typer/click)
        "samples_not_int": (["score", "--samples", "abc"], "--samples"),
        "unknown_option": (["score", "--bogus"], "--bogus"),
        "misspelt_command": (["scor"], "Did you mean 'score'"),
        "bare_group": (["board"], "Missing command"),
        "seed_not_int": (["score", "--seed", "x"], "--seed"),
        # CLI values
        "samples_zero": ([*score, "--samples", "0"], "--samples"),
        "lengths_garbage": ([*score, "--lengths", "1k,abc"], "--lengths"),
        "length_too_short": ([*score, "--lengths", "10"], "at least 64"),
        "over_long_length": ([*score, "--lengths", "1m", "--backend-arg", "context_length=8192"], "exceed the model's context"),
        "shard_out_of_range": ([*score, "--shard", "2/2"], "--shard"),
        "shard_garbage": ([*score, "--shard", "x"], "--shard"),
        "unknown_backend": (["score", "--backend", "nope", "--store", "{store}"], "backend"),
        "backend_arg_no_equals": ([*score, "--backend-arg", "delay"], "KEY=VALUE"),
        "backend_arg_unknown": ([*score, "--backend-arg", "bogus=1"], "valid keys: accuracy, batch_size, context_length, delay"),
        "backend_arg_ill_typed": ([*score, "--backend-arg", "delay=abc"], "backend_args.delay"),
        "backend_arg_not_for_echo": ([*score, "--dtype", "bfloat16"], "backend_args.dtype: unknown key for backend echo"),
        # option values, checked before any weights load (issue 21 items 8, 12, 13)
        "dtype_unknown": (["score", "--store", "{store}", "--dtype", "float33"], "use one of auto, bfloat16"),
        "device_misspelt": (["score", "--store", "{store}", "--device", "gpu"], "use auto, cpu, cuda, cuda:N or mps"),
        "template_unknown": ([*score, "--template", "chatt"], "use auto, chat or one of plain"),
        "num_fewshot_on_zero_shot_tasks": ([*score, "--tasks", "ruler/niah*", "--num_fewshot", "5"], "takes few-shot"),
        "gen_kwargs_unknown_key": ([*score, "--gen_kwargs", "max_gen_toks=5"], "--gen-kwargs: max_gen_toks: unknown"),
        "gen_kwargs_bad_value": ([*score, "--gen-kwargs", "temperature=hot"], "temperature=hot: not a finite number"),
        # --gen-kwargs gaps (issue 32): non-finite numbers, seeds out of range, non-booleans, sampling keys when greedy
        "gen_kwargs_nan": ([*score, "--gen-kwargs", "temperature=nan"], "temperature=nan: not a finite number"),
        "gen_kwargs_inf": ([*score, "--gen-kwargs", "temperature=0.7,top_p=inf"], "top_p=inf: not a finite number"),
        "gen_kwargs_huge_seed": ([*score, "--gen-kwargs", "temperature=0.7,seed=1e23"], "seed=1e+23: need an integer"),
        "gen_kwargs_do_sample_maybe": ([*score, "--gen-kwargs", "do_sample=maybe"], "do_sample=maybe: not a boolean"),
        "gen_kwargs_top_k_alone": ([*score, "--gen-kwargs", "top_k=40"], "top_k=40: used only when sampling"),
        "gen_kwargs_seed_alone": ([*score, "--gen-kwargs", "seed=1"], "seed=1: used only when sampling"),
        "repeats_greedy": ([*score, "--repeats", "3"], "--repeats 3: greedy decoding gives the same answer"),
        "max_new_tokens_twice": ([*score, "--suite", suite(tmp, "mnt.yaml", GOOD.replace(
            "[ruler/niah_single_1]", "[{task: ruler/niah_single_1, max_new_tokens: 9, args: {tokens_to_generate: 9}}]"))],
            "not both"),
        "output_path_a_file": (["score", "--backend", "echo", "--output_path", "{out}/results.json"], "give a directory"),
        "output_path_and_store": ([*score, "--output_path", "{out}"], "give one of them"),
        "model_twice": ([*score, "--model", "x", "--model_args", "pretrained=y"], "give it once"),
        # the run's protocol (issue 25): thinking mode, its budget, the system turn
        "thinking_unknown": ([*score, "--thinking", "maybe"], "--thinking: use on, off or auto"),
        "thinking_budget_without_thinking": ([*score, "--max-thinking-tokens", "100"], "needs --thinking on"),
        "thinking_budget_over_context": ([*score, "--tasks", "kv/retrieval", "--lengths", "2048", "--backend-arg",
                                          "context_length=2048", "--thinking", "on"], "plus the thinking budget of 4096"),
        "system_prompt_empty": ([*score, "--system-prompt", " "], "--system-prompt: empty"),
        "lmeval_gen_kwargs_sampling": (["lmeval", "--tasks", "mmlu", "--store", "{store}", "--gen_kwargs", "do_sample=true"],
                                       "decodes greedily"),
        "adhoc_task_unknown": (["score", "--backend", "echo", "--store", "{store}", "--tasks", "kv/retrieval,nosuch/*"],
                               "'nosuch/*' matches no registered task"),
        "tasks_pattern_matches_nothing": (["tasks", "nosuch*"], "matches no registered task"),
        "generate_task_arg_unknown": (["generate", "--task", "ruler/niah_single_2", "--length", "1k", "--out", "{out}/x.jsonl",
                                       "--arg", "num_keyz=3"], "valid keys: haystack"),
        "backend_arg_reserved": ([*score, "--backend-arg", "truncation=middle"], "--truncation"),
        "backend_arg_api_key": ([*score, "--backend-arg", "api_key=sk-123"], "api_key_env"),
        "openai_bad_url": (["score", "--backend", "openai", "--store", "{store}", "--backend-arg", "base_url=ftp://x"], "base_url"),
        "openai_bad_api": (["score", "--backend", "openai", "--store", "{store}", "--backend-arg", "api=responses"], "backend_args.api"),
        "rope_scaling_bad": ([*score, "--rope-scaling", "warp:9"], "--rope-scaling"),
        "truncation_bad": ([*score, "--truncation", "sideways"], "truncation"),
        "model_missing": ([*score, "--model", str(tmp / "nope")], "model"),
        "model_corrupt_gguf": ([*score, "--model", f["corrupt.gguf"]], "not a readable GGUF file"),
        "model_truncated_gguf": ([*score, "--model", f["truncated.gguf"]], "not a readable GGUF file"),
        "data_dir_missing": ([*score, "--data-dir", str(tmp / "nope")], "--data-dir"),
        "tasks_match_nothing": ([*score, "--tasks", "nothing*"], "--tasks"),
        "store_under_a_file": (["score", "--backend", "echo", "--store", f["a_file"] + "/runs"], "--store"),
        # suite files
        "suite_missing": ([*score, "--suite", "no-such-suite"], "ruler-quick"),
        "suite_markup_name": ([*score, "--suite", "v[/2].yaml"], "v[/2].yaml"),
        "suite_not_utf8": ([*score, "--suite", f["latin1.yaml"]], "not UTF-8"),
        "suite_is_a_directory": ([*score, "--suite", f["a_dir.yaml"]], "is a directory"),
        "suite_unknown_key": ([*score, "--suite", suite(tmp, "k.yaml", GOOD + "sampels: 3\n")], "sampels"),
        "suite_name_control_char": ([*score, "--suite", suite(tmp, "n.yaml", GOOD.replace("name: t", 'name: "a\\tb"'))], "name"),
        "suite_unknown_task_arg": ([*score, "--suite", s(tmp, "ruler/niah_multikey_1", {"num_keyz": 8})], "num_keyz"),
        "essays_for_a_noise_haystack": ([*score, "--suite", s(tmp, "ruler/niah_single_1", {"essays": f["few_words.txt"]})],
                                        "only read with haystack: essay"),
        # the plan step (issue 21 items 5, 17, 18)
        "suite_task_twice": ([*score, "--suite", suite(tmp, "twice.yaml", GOOD.replace("[ruler/niah_single_1]",
                                                                                        "[kv/retrieval, kv/retrieval]"))],
                             "tasks.1: kv/retrieval listed twice; give it a distinct `name`"),
        "length_over_the_bound": ([*score, "--lengths", "1000000000"], "CTXBENCH_MAX_LENGTH"),
        "length_over_the_bound_middle": ([*score, "--lengths", "1000000000", "--truncation", "middle"], "CTXBENCH_MAX_LENGTH"),
        "length_too_short_for_a_task": ([*score, "--suite", s(tmp, "kv/retrieval", {}), "--lengths", "256"],
                                        "too short for kv/retrieval"),
        # data files
        "essays_empty": ([*score, "--suite", s(tmp, "ruler/niah_single_2", {"essays": f["empty_essays"]})], "0 words"),
        "essays_too_few_words": ([*score, "--suite", s(tmp, "ruler/niah_single_2", {"essays": f["few_words.txt"]})], "words"),
        "essays_json_without_text": ([*score, "--suite", s(tmp, "ruler/niah_single_2", {"essays": f["no_text.json"]})], "'text'"),
        "essays_missing": ([*score, "--suite", s(tmp, "ruler/niah_single_2", {"essays": str(tmp / "nope")})], "does not exist"),
        "squad_corrupt": ([*score, "--suite", s(tmp, "ruler/qa_1", {"data_file": f["squad_corrupt.json"]})], "not valid JSON"),
        "squad_wrong_format": ([*score, "--suite", s(tmp, "ruler/qa_1", {"data_file": f["squad_wrong.json"]})], "squad format"),
        "squad_no_questions": ([*score, "--suite", s(tmp, "ruler/qa_1", {"data_file": f["squad_empty.json"]})], "no usable questions"),
        "hotpot_corrupt": ([*score, "--suite", s(tmp, "ruler/qa_2", {"data_file": f["hotpot_corrupt.json"]})], "not valid JSON"),
        "longbench_empty": ([*score, "--suite", s(tmp, "longbench/qasper", {"data_file": f["longbench_empty.jsonl"]})], "no examples"),
        "longbench_corrupt": ([*score, "--suite", s(tmp, "longbench/qasper", {"data_file": f["longbench_corrupt.jsonl"]})],
                              "longbench_corrupt.jsonl:2"),
        "garbage_record_resume": (["score", "--backend", "echo", "--store", f["garbage_store"], "--suite", "{garbage_suite}"],
                                  "record.json"),
        # generate
        "generate_out_under_a_file": (["generate", "--task", "ruler/niah_single_1", "--length", "1k", "--out",
                                       f["a_file"] + "/x.jsonl"], "--out"),
        "generate_out_is_a_dir": (["generate", "--task", "ruler/niah_single_1", "--length", "1k", "--out", f["tmp"]], "--out"),
        "generate_length_short": (["generate", "--task", "ruler/niah_single_1", "--length", "10", "--out", "{out}/x.jsonl"],
                                  "--length"),
        "generate_unknown_task": (["generate", "--task", "ruler/nope", "--length", "1k", "--out", "{out}/x.jsonl"], "did you mean"),
        "generate_bad_format": (["generate", "--task", "ruler/niah_single_1", "--length", "1k", "--format", "xml", "--out",
                                 "{out}/x.jsonl"], "--format"),
        # board
        "board_empty_store": (["board", "build", "--store", "{store}", "--out", "{out}"], "no scored runs"),
        "board_compare_malformed": (["board", "build", "--store", "{store}", "--out", "{out}", "--compare", "AB"], "--compare"),
        "board_unknown_run": (["board", "build", "--store", "{store}", "--out", "{out}", "--runs", "nope"], "--runs"),
        "board_garbage_record": (["board", "build", "--store", f["garbage_store"], "--out", "{out}"], "record.json"),
        "board_out_under_a_file": (["board", "build", "--store", f["garbage_store"], "--out", f["a_file"] + "/b"], "--out"),
        "board_runs_names_a_training": (["board", "build", "--store", f["kept_store"], "--out", "{out}", "--runs", "train-x"],
                                        "is a training, not a scored run"),
        "import_clashes_with_a_kept_table": (["board", "import", f["clash.csv"], "--store", f["kept_store"]],
                                             "already imported from paper-0a1b2c3d.csv"),
        "import_missing": (["board", "import", str(tmp / "nope.csv"), "--store", "{store}"], "does not exist"),
        "import_bad_length": (["board", "import", f["bad_length.csv"], "--store", "{store}"], "length"),
        "import_huge_field": (["board", "import", f["huge.csv"], "--store", "{store}"], "huge.csv line"),
        "import_not_utf8": (["board", "import", f["latin1.csv"], "--store", "{store}"], "not UTF-8"),
        "import_a_directory": (["board", "import", f["tmp"], "--store", "{store}"], "is a directory"),
        # train (relative paths in the configs resolve under tmp: the test runs there)
        "train_unknown_method": (["train", "nope", "--config", f["logo.yaml"]], "unknown trainer 'nope'"),
        "train_config_unknown_name": (["train", "cpt", "--config", "cpt-tinny"], "give a file's path or a shipped name: "),
        "train_deepspeed_unknown": (["train", "cpt", "--config", f["cpt_deepspeed.yaml"]], "deepspeed: zero4 does not exist"),
        "train_logo_unknown_key": (["train", "logo", "--config", f["logo_unknown_key.yaml"]], "betta: unknown key"),
        "train_logo_ill_typed": (["train", "logo", "--config", f["logo_ill_typed.yaml"]], "beta:"),
        "train_logo_lora_key": (["train", "logo", "--config", f["logo_lora_key.yaml"]], "lora.rank"),
        "train_logo_no_data": (["train", "logo", "--config", f["logo_no_data.yaml"]], "run `ctxbench data logo`"),
        "train_logo_max_steps_zero": (["train", "logo", "--config", f["logo.yaml"], "--max-steps", "0"], "max_steps"),
        "train_store_under_a_file": (["train", "logo", "--config", f["logo.yaml"], "--store", f["a_file"] + "/runs"], "--store"),
        "train_output_under_a_file": (["train", "logo", "--config", f["logo.yaml"], "--output-dir", f["a_file"] + "/m"],
                                      "--output-dir"),
        "train_stage_on_unstaged": (["train", "logo", "--config", f["logo.yaml"], "--stage", "s1"], "has no stages"),
        "train_hqa_stage_key": (["train", "hqa_sft", "--config", f["hqa_stage_key.yaml"]], "stages.0"),
        "train_hqa_stage_data_missing": (["train", "hqa_sft", "--config", f["hqa_stage_data_missing.yaml"]], "nowhere/hqa.yaml"),
        "train_hqa_unknown_stage": (["train", "hqa_sft", "--config", f["hqa.yaml"], "--stage", "s9"], "no stage named 's9'"),
        # data logo | hqa
        "data_logo_unknown_key": (["data", "logo", "--config", f["logo_data_unknown_key.yaml"]], "num_chunkz"),
        "data_logo_no_hotpotqa": (["data", "logo", "--config", f["logo_data.yaml"], "--data-dir", f["empty_essays"]],
                                  "no hotpotqa"),
        "data_logo_bad_backend": (["data", "logo", "--config", f["logo_data_backend.yaml"]], "generator.backend"),
        "data_logo_bad_backend_arg": (["data", "logo", "--config", f["logo_data_backend_arg.yaml"]],
                                      "generator.backend_args.dtipe"),
        "data_logo_out_under_a_file": (["data", "logo", "--config", f["logo_data.yaml"], "--out", f["a_file"] + "/o"], "--out"),
        "data_hqa_unknown_key": (["data", "hqa", "--config", f["hqa_data_unknown_key.yaml"]], "smal_tokens"),
        "data_hqa_docs_missing": (["data", "hqa", "--config", f["hqa_data_docs_missing.yaml"]], "documents.path"),
        "data_hqa_medium_not_multiple": (["data", "hqa", "--config", f["hqa_data_medium.yaml"]], "medium_tokens"),
        "data_hqa_out_under_a_file": (["data", "hqa", "--config", f["hqa_data.yaml"], "--out", f["a_file"] + "/o"], "--out"),
        # study
        "study_missing": (["study", str(tmp / "nope.yaml")], "does not exist"),
        "study_name_a_path": (["study", f["study_name_a_path.yaml"]], "name: '../../X' is not a plain name"),
        "study_method_dotdot": (["study", f["study_method_dotdot.yaml"]], "'..' is not a plain name"),
        "study_unknown_name": (["study", "cpu-stdlibb", "--check"], "among the shipped configs/studies"),
        "openai_url_credentials_and_key": (["score", "--backend", "openai", "--suite", "{garbage_suite}", "--backend-arg",
                                            "base_url=http://u:p@127.0.0.1:9/v1", "--backend-arg", "api_key_env=HOME"],
                                           "backend_args.api_key_env sets a Bearer key"),
        "study_not_utf8": (["study", f["study_latin1.yaml"]], "not UTF-8"),
        "study_unknown_key": (["study", f["study_unknown_key.yaml"]], "sedes"),
        "study_bad_reference": (["study", f["study_reference.yaml"]], "reference 'nosuch'"),
        "study_training_key": (["study", f["study_training_key.yaml"]], "max_stepz"),
        "study_eval_task": (["study", f["study_eval_task.yaml"]], "niah/nosuch"),
        "study_eval_backend_arg": (["study", f["study_eval_backend_arg.yaml"]], "eval.backend_args.dtipe"),
        "study_corpus_missing": (["study", f["study_corpus_missing.yaml"]], "corpus.path"),
        "study_out_under_a_file": (["study", f["study.yaml"], "--out", f["a_file"] + "/o"], "--out"),
    }


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


CASE_NAMES = sorted(cases(collections.defaultdict(lambda: "/x")))


@pytest.mark.parametrize("case", CASE_NAMES)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case, files, tmp_path, ctxbench, data_dir, monkeypatch,
                                                         tmp_path_factory):
    argv, fragment = cases(files)[case]
    monkeypatch.chdir(tmp_path)  # relative outputs (a config's store, out_dir) would land here, and be seen
    monkeypatch.setenv("CTXBENCH_DATA_DIR", str(data_dir))
    # a private sample cache (other processes may fill the shared one meanwhile); the rest links to the shared cache
    shared, private = cache_dir(), tmp_path_factory.mktemp("cache")
    for entry in shared.iterdir():
        if entry.name != "datasets":
            (private / entry.name).symlink_to(entry)
    monkeypatch.setenv("CTXBENCH_CACHE", str(private))
    garbage_suite = suite(Path(files["tmp"]), "g.yaml", GOOD)
    if case == "garbage_record_resume":  # the run id this suite would get is the garbage run's
        from ctxbench.harness.core.config import load_suite
        from ctxbench.harness.run.runner import RunPlan

        run_id = RunPlan(load_suite(garbage_suite), "smollm2-135m", "echo", {}, Path(files["garbage_store"])).run_id()
        (Path(files["garbage_store"]) / "run-x").rename(Path(files["garbage_store"]) / run_id)
    store, out = tmp_path / "store", tmp_path / "out"
    argv = [a.replace("{store}", str(store)).replace("{out}", str(out)).replace("{garbage_suite}", garbage_suite) for a in argv]
    if argv[0] == "score" and "--data-dir" not in argv:
        argv += ["--data-dir", str(data_dir)]
    datasets = cache_dir("datasets")
    before, cached = _files(tmp_path), _files(datasets)
    code, stdout, stderr = ctxbench(*argv)
    lines = [x for x in stderr.splitlines() if x.strip() and not x.startswith("warning:")]
    assert code == 2, (code, stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr[-2000:]
    assert "Traceback" not in stderr
    assert fragment in lines[0], lines[0]
    assert _files(tmp_path) == before, sorted(_files(tmp_path) - before)  # nothing written: no store, no output
    assert _files(datasets) <= cached, sorted(_files(datasets) - cached)  # and no sample cache


def test_the_matrix_is_large():
    """The issue tried 76 bad inputs; this file keeps most of them (the rest: test_cli_errors, test_store)."""
    assert len(CASE_NAMES) >= 60


def test_bare_ctxbench_prints_help_and_version_exists(ctxbench):
    code, out, err = ctxbench()
    assert code == 0 and "Usage" in out + err and "score" in out + err
    code, out, _ = ctxbench("--version")
    assert code == 0 and out.startswith("ctxbench ")
