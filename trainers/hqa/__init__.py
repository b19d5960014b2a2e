"""Hierarchical-QA long-context SFT (He et al., "Scaling Instruction-Tuned LLMs to Million-Token Contexts via
Hierarchical Synthetic Data Generation"): data synthesis (split, summarize, Algorithms 1 and 2) and the
`hqa_sft` trainer (answer-only loss, stepwise RoPE stages)."""
