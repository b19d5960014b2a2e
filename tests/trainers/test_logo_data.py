"""`ctxbench data logo`: responses, labels and positions on disk; chunk scores on HotpotQA; resumability; bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from ctxbench.harness.core.errors import ConfigError
from ctxbench.trainers.data.synthesis import synthesize
from ctxbench.trainers.logo.data import LogoDataConfig, load_config, read_manifest

REPO = Path(__file__).resolve().parents[2]


def fake():
    from ctxbench.harness.core import registry

    return registry.get("backend", "logo-fake")


def samples(directory: Path):
    """(meta, [(ids, labels, positions) per response]) of every sample, read straight from the shards."""
    m = read_manifest(directory)
    group = m["responses_per_sample"]
    for shard in m["shards"]:
        z = {k: np.load(directory / f"{shard}.{k}.npy") for k in ("input_ids", "labels", "position_ids", "offsets")}
        metas = [json.loads(line) for line in (directory / f"{shard}.jsonl").read_text().splitlines()]
        off = z["offsets"]
        for s, meta in enumerate(metas):
            rows = range(s * group, (s + 1) * group)
            yield meta, [tuple(z[k][off[r]:off[r + 1]] for k in ("input_ids", "labels", "position_ids")) for r in rows]


def test_labels_are_ignored_outside_the_answers_and_responses_share_their_context(logo_data, smol_tokenizer):
    m = read_manifest(logo_data)
    seen = 0
    for meta, responses in samples(logo_data):
        seen += 1
        prefix = meta["prefix"]
        ids0, _, pos0 = responses[0]
        for (ids, labels, pos), text in zip(responses, [meta["chosen"], *meta["rejected"]]):
            assert np.all(labels[:prefix] == -100)
            assert np.array_equal(labels[prefix:], ids[prefix:]) and len(ids) > prefix
            assert np.array_equal(ids[:prefix], ids0[:prefix]) and np.array_equal(pos[:prefix], pos0[:prefix])
            assert pos[prefix] == pos0[prefix] == pos0[prefix - 1] + 1  # answers start together, right after the prompt
            assert np.all(np.diff(pos) > 0) and pos.max() < m["target_window"]
            answer = [t for t in ids[prefix:].tolist() if t != smol_tokenizer.eos_token_id]
            assert smol_tokenizer.decode(answer).strip() == text.strip()
        assert meta["chosen"].strip() not in {t.strip() for t in meta["rejected"]}
        assert set(meta["relevant_chunks"]) <= set(meta["context_chunks"]) and len(meta["context_chunks"]) == m["num_chunks"]
        assert all(meta["scores"][c] >= m["threshold"] for c in meta["relevant_chunks"])
    assert seen == m["samples"] and sum(m["modes"].values()) == seen


def test_manifest_records_generator_scorer_and_drops(logo_data):
    m = read_manifest(logo_data)
    assert m["generator"]["decoding"] == "greedy" and m["generator"]["paper_sampling"] == {"temperature": 0.7, "top_p": 0.95}
    assert m["generator"]["fingerprint"] and m["tokenizer_fingerprint"]
    assert (m["scorer"], m["threshold"], m["num_chunks"], m["num_rejected"], m["target_window"]) == ("keywords", 2, 6, 2, 4096)
    assert m["samples"] + sum(m["drops"].values()) == m["input_samples"] == 24


def test_supporting_fact_chunks_outscore_distractors(data_dir, smol_tokenizer):
    """On HotpotQA the default scorer ranks chunks holding a supporting fact above the others: AUC > 0.7."""
    from ctxbench.trainers.logo.chunks import chunk_sample, load_samples, make_scorer, score_chunks

    keys = make_scorer("keywords")
    pos, neg = [], []
    for s in load_samples("hotpotqa", data_dir / "hotpotqa" / "hotpot_dev_distractor_sample100.json"):
        chunks = chunk_sample(smol_tokenizer, s, 64)
        for c, x in zip(chunks, score_chunks(keys, s.question, s.answer, chunks, max_df=0.5)):
            (pos if c.supporting else neg).append(x)
    pos, neg = np.array(pos), np.array(neg)
    auc = ((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()) / (len(pos) * len(neg))
    assert len(pos) > 100 and auc > 0.7, auc


def test_spacy_scorers_count_entities_or_lemmas():
    """spacy_ner counts shared entities; lexical adds verb and noun lemmas (a stub pipeline stands in for spaCy)."""
    from types import SimpleNamespace as NS

    from ctxbench.trainers.logo.chunks import Chunk, make_scorer, score_chunks

    def nlp(text):
        toks = [NS(text=w, lemma_=w.lower().rstrip("s"), pos_="NOUN" if w.islower() else "PROPN") for w in text.split()]
        return NS(ents=[t for t in toks if t.pos_ == "PROPN"], __iter__=None, toks=toks)

    class Doc:
        def __init__(self, text):
            d = nlp(text)
            self.ents, self.toks = d.ents, d.toks

        def __iter__(self):
            return iter(self.toks)

    chunks = [Chunk(0, (), "Paris rivers bridges", False), Chunk(1, (), "London river", False)]
    ner = score_chunks(make_scorer("spacy_ner", nlp=Doc), "Paris river", None, chunks)
    lexical = score_chunks(make_scorer("lexical", nlp=Doc), "Paris river", None, chunks)
    assert ner.tolist() == [1, 0] and lexical.tolist() == [2, 1]


def test_a_rerun_reuses_the_data_and_the_cached_calls(tmp_path, logo_config):
    cfg = LogoDataConfig(**logo_config(tmp_path / "data"))
    first = synthesize("logo", cfg)
    calls = fake().calls
    again = synthesize("logo", cfg)
    assert again.pop("reused") and again == first and fake().calls == calls  # finished: returned as is, nothing generated
    stricter = LogoDataConfig(**logo_config(tmp_path / "data", threshold=3))
    with pytest.raises(ConfigError, match="data holds a synthesis of another config; use another out_dir"):
        synthesize("logo", stricter)  # an out_dir holds one synthesis: another config is refused, never silently rebuilt
    stricter = LogoDataConfig(**logo_config(tmp_path / "stricter", threshold=3, cache_dir=str(tmp_path / "data")))
    second = synthesize("logo", stricter)
    new = fake().calls - calls
    assert second["config_hash"] != first["config_hash"] and second["calls"]["cached"] > 0
    assert new == second["calls"]["generated"] < 3 * 24  # only prompts never answered before
    assert not (tmp_path / "stricter" / "generations.jsonl").exists()  # the calls went to the cache_dir given


def test_an_interrupted_generation_resumes(tmp_path, logo_config):
    cfg = LogoDataConfig(**logo_config(tmp_path / "data", seed=7))
    gen = fake()
    gen.fail_after = gen.calls + 20
    try:
        with pytest.raises(RuntimeError, match="simulated crash"):
            synthesize("logo", cfg)
    finally:
        gen.fail_after = None
    cached = len((tmp_path / "data" / "generations.jsonl").read_text().splitlines())
    assert cached == 16  # two batches of 8 were answered and cached before the crash
    m = synthesize("logo", cfg)
    assert m["complete"] and m["calls"]["cached"] == 16


def test_failed_calls_leave_the_data_incomplete_and_a_rerun_retries_only_them(tmp_path, logo_config):
    from ctxbench.harness.core.errors import CtxbenchError

    cfg = LogoDataConfig(**logo_config(tmp_path / "data", seed=11))
    gen = fake()
    gen.refuse = "Scott Derrickson"  # the first question's prompts fail
    try:
        with pytest.raises(CtxbenchError, match=r"generator: 3 of \d+ calls failed \(BackendError: refused\); rerun"):
            synthesize("logo", cfg)
    finally:
        gen.refuse = None
    assert read_manifest(tmp_path / "data")["complete"] is False
    calls = gen.calls
    m = synthesize("logo", cfg)
    assert m["complete"] and m["calls"]["generated"] == gen.calls - calls == 3


@pytest.mark.parametrize("change, where", [
    ({"num_rejected": 0}, "num_rejected"),
    ({"target_window": 400}, "target_window: K=400 <= k="),
    ({"num_chunks": 200}, "num_chunks: N=200"),
    ({"threshold": 1000}, "nothing left after filtering"),
    ({"prompt": "no slots"}, "prompt"),
    ({"generator": {"backend": "ech0"}}, "generator.backend"),
])
def test_bad_input_is_one_line_before_any_generation(tmp_path, logo_config, change, where):
    from ctxbench.harness.core.config import validate_config as validate

    calls = fake().calls
    with pytest.raises(ConfigError) as e:
        synthesize("logo", validate(LogoDataConfig, logo_config(tmp_path / "d", **change), where="logo.yaml"))
    assert where in str(e.value) and "\n" not in str(e.value)
    assert fake().calls == calls


def test_samples_longer_than_max_real_tokens_are_dropped(tmp_path, logo_data, logo_config):
    lengths = sorted(meta["real_length"] for meta, _ in samples(logo_data))
    cap = lengths[len(lengths) // 2]
    m = synthesize("logo", LogoDataConfig(**logo_config(tmp_path / "d", max_real_tokens=cap)))
    kept = [meta["real_length"] for meta, _ in samples(tmp_path / "d")]
    assert max(kept) <= cap and m["drops"]["too_long"] >= len(lengths) - len(kept) > 0


def test_a_window_leaving_less_than_one_spare_position_per_chunk_is_refused(tmp_path, logo_config):
    import re

    with pytest.raises(ConfigError) as e:
        synthesize("logo", LogoDataConfig(**logo_config(tmp_path / "d", target_window=100)))
    k = int(re.search(r"<= k=(\d+)", str(e.value)).group(1))  # the longest sample's real length
    with pytest.raises(ConfigError, match=r"target_window: K=\d+ leaves Δ=⌊\(K-k\)/N⌋=0 < 1"):
        synthesize("logo", LogoDataConfig(**logo_config(tmp_path / "d", target_window=k + 5)))  # N = 6: Δ = 0
    assert synthesize("logo", LogoDataConfig(**logo_config(tmp_path / "d", target_window=k + 6)))["complete"]  # Δ = 1 is enough


def test_spacy_scorer_without_spacy_is_one_line(tmp_path, logo_config):
    try:
        import spacy  # noqa: F401

        pytest.skip("spaCy is installed")
    except ImportError:
        pass
    with pytest.raises(ConfigError, match="scorer spacy_ner needs the logo extra"):
        synthesize("logo", LogoDataConfig(**logo_config(tmp_path / "data", scorer="spacy_ner")))


def test_cli_bad_input_is_one_line(tmp_path, data_dir, ctxbench, monkeypatch):
    raw = {"data_file": str(data_dir / "hotpotqa" / "hotpot_dev_distractor_sample100.json"), "chunk_tokens": 64,
           "num_chunks": 4, "target_window": 100, "generator": {"model": "smollm2-135m", "backend": "echo"}}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(REPO)  # the CLI in process: a refusal needs no process of its own
    code, _, err = ctxbench("data", "logo", "--config", str(path), "--out", str(tmp_path / "out"))
    assert code == 2 and "target_window: K=100" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("path", sorted((REPO / "configs" / "data").glob("logo-*.yaml")), ids=lambda p: p.name)
def test_shipped_data_configs_validate(path):
    cfg = load_config(path)
    assert cfg.generator.model and cfg.target_window > cfg.num_chunks * cfg.chunk_tokens
