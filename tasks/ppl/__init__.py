"""Long-context perplexity (`ppl/full`, `ppl/sliding`): task.py.
"""
