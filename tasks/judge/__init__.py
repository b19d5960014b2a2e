"""The opt-in LLM judge (`judge/qa`, `judge/summary`): another task's samples scored by a model with HELMET's protocols.

task.py is the protocol and `judge/qa`; summary.py `judge/summary`; prompts.py HELMET's judge prompts, verbatim;
verdicts.py reads and scores verdicts as HELMET's scripts do; cache.py the verdict cache key and the spend meter.
"""
