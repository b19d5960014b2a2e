"""The OpenAI-compatible backend against a real `transformers serve` of the embedded model on 127.0.0.1.

transformers 5.23 serves /v1/completions and /v1/chat/completions (also /v1/responses); both paths are
tested here against it. Its chat endpoint rejects unknown fields (422) and always adds a generation
prompt, so the answer prefix goes into the user turn there (prefill=auto detects this).

The fault-injection test puts a loopback proxy in front of the server that injects 429s, 500s,
connection resets and truncated JSON, and drives the real CLI twice: the first run ends with a prediction
or a recorded error for every sample, the rerun fills the errors, and no id is lost or duplicated. Its
request timeout is generous, so a loaded machine cannot make a real answer look like a fault; timeouts
themselves are injected without waiting in test_openai_transport.py.
"""

import json
import os
import subprocess
import sys

import pytest

from ctxbench.harness.backends.openai_compat import OpenAIBackend
from ctxbench.harness.core.types import Request

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def niah_samples(smol_tokenizer, data_dir):
    from ctxbench.harness.core import datasets
    from ctxbench.harness.core.config import TaskSpec, build_task
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.prompting import PromptRenderer

    task = build_task(TaskSpec(task="niah/single", args={"depths": 3, "tokens_to_generate": 16}))
    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=data_dir)
    return datasets.generate(task, length=320, indices=range(3), seed=42, ctx=ctx)


def requests_of(samples):
    return [Request(s.id, s.prompt, s.max_new_tokens, s.add_special_tokens, s.prompt_tokens, s.user_text, s.answer_prefix)
            for s in samples]


def test_completions_against_transformers_serve(hf_server, smol_dir, niah_samples):
    b = OpenAIBackend(model=smol_dir, base_url=hf_server, api="completions", concurrency=2, timeout=120)
    assert b.context_length == 8192  # from the local config: transformers serve's /v1/models does not say
    preds = b.generate(requests_of(niah_samples))
    assert [p.error for p in preds] == [None] * len(preds)
    for s, p in zip(niah_samples, preds):
        # the server tokenized exactly the prompt the HF backend would see
        assert p.prompt_tokens == s.prompt_tokens
        assert 0 < p.generated_tokens <= s.max_new_tokens and p.seconds > 0
    hits = sum(any(a in p.text for a in s.answers) for s, p in zip(niah_samples, preds))
    assert hits >= 1, [p.text for p in preds]


def test_chat_against_transformers_serve(hf_server, smol_dir, smol_tokenizer, niah_samples):
    b = OpenAIBackend(model=smol_dir, base_url=hf_server, api="chat", concurrency=2, timeout=120)
    assert b.prefill == "user"  # transformers serve cannot continue an assistant message
    preds = b.generate(requests_of(niah_samples[:2]))
    assert [p.error for p in preds] == [None] * len(preds)
    for s, p in zip(niah_samples, preds):
        messages = [{"role": "user", "content": s.user_text + "\n" + s.answer_prefix.strip()}]
        text = smol_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert p.prompt_tokens == len(smol_tokenizer(text, add_special_tokens=False)["input_ids"])
        assert p.generated_tokens > 0 and p.text.strip()


def test_lmeval_local_completions_against_transformers_serve(hf_server, smol_dir, niah_samples):
    pytest.importorskip("lm_eval")
    from ctxbench.harness.core import registry

    b = registry.get("backend", "lmeval:local-completions")(
        model=smol_dir, base_url=f"{hf_server}/completions", tokenized_requests=False, context_length=8192, max_retries=2)
    info = b.info()
    assert info["lm_eval_model_type"] == "local-completions" and info["lm_eval_args"]["tokenized_requests"] is False
    preds = b.generate(requests_of(niah_samples[:1]))
    assert all(p.error is None and p.text.strip() for p in preds), preds
    assert [p.prompt_tokens for p in preds] == [s.prompt_tokens for s in niah_samples[:1]]


SUITE = """name: faults
lengths: [256]
samples: 1
tasks:
  - task: niah/single
    args: {depths: 5, tokens_to_generate: 12}
"""


def _score(repo_root, data_dir, suite, out, proxy_url, model, env):
    cmd = [sys.executable, "-m", "ctxbench.harness.cli", "score", "--backend", "openai", "--model", model, "--suite", str(suite),
           "--store", str(out), "--data-dir", str(data_dir),
           "--backend-arg", f"base_url={proxy_url}", "--backend-arg", "timeout=300", "--backend-arg", "max_retries=2",
           "--backend-arg", "backoff=0.05", "--backend-arg", "backoff_max=0.2", "--backend-arg", "concurrency=2",
           "--backend-arg", "api_key_env=CTXBENCH_FAULT_KEY"]
    return subprocess.run(cmd, cwd=repo_root, capture_output=True, text=True, timeout=900, env=env)


@pytest.mark.slow  # > 25 s; the default tier keeps a faster test of the same behaviour
def test_faults_end_in_predictions_or_errors_and_a_rerun_fills_them(hf_server, smol_dir, fault_proxy, tmp_path,
                                                                    serving_repo_root, data_dir):
    secret = "sk-fault-test-5f2c9e"
    # each fault once, at most two per request (it may try three times); the depth-0 and depth-100 cells
    # are doomed in the first run (400, persistent 503)
    proxy = fault_proxy(hf_server, ["429", "500", "truncated", "reset"], require_key=secret)
    suite = tmp_path / "faults.yaml"
    suite.write_text(SUITE)
    out = tmp_path / "runs"
    env = {**os.environ, "CTXBENCH_FAULT_KEY": secret, "OMP_NUM_THREADS": "1"}

    # the same samples the CLI will generate (same tokenizer, task args, seed; read from the sample cache)
    from ctxbench.harness.core import datasets
    from ctxbench.harness.core.config import TaskSpec, build_task
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.models import load_tokenizer
    from ctxbench.harness.core.prompting import PromptRenderer

    tok = load_tokenizer(smol_dir)
    task = build_task(TaskSpec(task="niah/single", args={"depths": 5, "tokens_to_generate": 12}))
    samples = datasets.generate(task, length=256, indices=range(5), seed=42,
                                ctx=GenContext(tok, PromptRenderer(tok), data_dir=data_dir))
    ids = {s.id for s in samples}
    proxy.doom_where(lambda body: body.get("prompt") == samples[0].prompt, 400)
    proxy.doom_where(lambda body: body.get("prompt") == samples[-1].prompt, 503)

    r1 = _score(serving_repo_root, data_dir, suite, out, proxy.url, smol_dir, env)
    # the run finishes, says how many samples failed and why, and exits 3 so `score && board build` stops
    assert r1.returncode == 3, r1.stderr[-3000:]
    assert "2 samples failed (" in r1.stderr and "rerun the same command to retry them" in r1.stderr
    (samples_file,) = out.glob("*/samples.jsonl")
    rows1 = [json.loads(x) for x in samples_file.read_text().splitlines()]
    assert sorted(r["id"] for r in rows1) == sorted(ids)  # every sample has one row: nothing lost, nothing twice
    errors = {r["id"]: r["error"] for r in rows1 if r["error"]}
    assert errors.keys() == {samples[0].id, samples[-1].id}, errors
    assert errors[samples[0].id].startswith("HTTP 400")
    assert "gave up after 3 attempts" in errors[samples[-1].id] and "503" in errors[samples[-1].id]
    ok = [r for r in rows1 if not r["error"]]
    assert all(r["generated_tokens"] > 0 and r["seconds"] > 0 and r["score"] is not None for r in ok)
    outcomes = {o for _, _, o in proxy.log}
    assert {"429", "500", "truncated", "reset"} <= outcomes and not proxy.pending, outcomes  # all were hit

    proxy.clear_doom()
    r2 = _score(serving_repo_root, data_dir, suite, out, proxy.url, smol_dir, env)
    assert r2.returncode == 0, r2.stderr[-3000:]
    rows2 = [json.loads(x) for x in samples_file.read_text().splitlines()]
    assert [r["id"] for r in rows2[: len(rows1)]] == [r["id"] for r in rows1]  # append-only
    added = rows2[len(rows1):]
    assert sorted(r["id"] for r in added) == sorted(errors)  # only the errors were redone
    latest = {r["id"]: r for r in rows2}
    assert latest.keys() == ids and all(not r["error"] and r["score"] is not None for r in latest.values())

    # the key reached the proxy (it checks the bearer token) but no record, result or log
    for text in (samples_file.read_text(), next(out.glob("*/record.json")).read_text(), r1.stdout, r1.stderr,
                 r2.stdout, r2.stderr):
        assert secret not in text
    record = json.loads(next(out.glob("*/record.json")).read_text())
    assert record["backend"] == "openai" and record["backend_args"]["api_key_env"] == "CTXBENCH_FAULT_KEY"
