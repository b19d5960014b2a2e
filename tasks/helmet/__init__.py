"""HELMET (princeton-nlp/HELMET): its judge-free categories and its own judged summarisation items.

task.py registers retrieval-augmented QA (`helmet/rag_*`) and re-ranking (`helmet/rerank_msmarco`); icl.py HELMET's
in-context learning (`icl/banking77`, `icl/clinic150`, `icl/nlu`, `icl/trec_coarse`, `icl/trec_fine`); judged.py
`helmet/infbench_sum` (scored by tasks/judge/); metrics.py HELMET's eval.py scores.
"""
