"""Head-to-head studies: methods (a trainer and its data each) compared on one suite and one held-out
perplexity set, with replicate seeds, the untrained starting checkpoint as a row, and calibrated verdicts.

`ctxbench study configs/studies/NAME.yaml` runs: the held-out split of the corpus (heldout.py) -> for every
(method, seed): the method's data and its training (run.py) -> scoring of every checkpoint and of the
untrained model on the suite plus `ppl/heldout-*` -> the report (report.py; statistics in leaderboard/studies.py).

Plugging a trainer in. A study method names a registered trainer (`trainer:`, default the study's) and its data
options (`data:`). The trainer class (an HFTrainer subclass, `cls(config, console=...).train() -> TrainResult`)
declares four things:

    study_data_cls: ClassVar[type[BaseModel]]
        a pydantic model of its `data:` options (extra="forbid"); validated when the study loads.
    @classmethod study_data_config(cls, options, inputs: StudyInputs) -> dict
        its config's `data` section, built from the options and what the study provides (trainers/base.py
        StudyInputs): the training corpus (CorpusConfig keys whose exclude_ids hold the held-out documents out),
        tokenizer, seq_len, budget_tokens, the data seed, an out_dir of its own (named by everything the data depends
        on) and data_dir. Pure: the trainer's prepare_data() makes the data, resumably, when the study asks.
    corpus_documents(self) -> frozenset[str] | None
        ids of the study-corpus documents its prepared data uses (trainers.data.corpus.Corpus.documents and
        TokenCorpus.doc_ids give them), or None if it reads none; the study checks that none is held out.
    data_diagnostics(self) -> dict | None
        what the report shows about the data ({part: {sequences, docs_per_sequence, doc_similarity, zipf,
        domains, duplicate_rate}} for packings; None for nothing).

A trainer whose data does not sit in one `data` section overrides `study_config(settings, options, inputs) -> dict`
(default: settings plus data = study_data_config()), which returns the whole raw trainer config.

Plugged in:
- cpt (trainers/cpt.py) packs the corpus with a packing method ({method, method_args, mix_ratio, eval_sequences}),
  or runs a synthesis method that produces text (method_args: its config keys) and standard-packs its rows.
- hqa_sft (trainers/hqa/study.py): options {composition, data_args, samples}; its stages (data YAML, seq_len,
  RoPE, steps) come from the study's `training`, the last at the study's seq_len; study_config points every stage's
  synthesis at inputs.out_dir/<stage> with documents read from the study corpus (format: corpus, so the held-out
  documents stay out), the study's tokenizer and data seed, and budget_tokens // seq_len conversations.
  corpus_documents() is every conversation's documents; the study checks them against the held-out set.
- logo (trainers/logo/trainer.py): options {data: a LOGO data YAML, data_args, eval_samples, max_samples};
  its synthesis goes to inputs.out_dir with the study's seed; it reads QA samples under inputs.data_dir, not the
  study corpus (corpus_documents -> None). `training: {objective: sft}` is its SFT baseline on the same data.
tests/trainers/test_study_methods.py has a stub trainer of a conversation kind; tests/trainers/test_study_trainers.py
runs hqa_sft and logo beside a packing.
"""

from ctxbench.harness.studies.config import EvalSpec, MethodSpec, PerplexitySpec, StatsSpec, StudyConfig, load_study
from ctxbench.harness.studies.run import StudyResult, run_study

__all__ = ["EvalSpec", "MethodSpec", "PerplexitySpec", "StatsSpec", "StudyConfig", "StudyResult", "load_study", "run_study"]
