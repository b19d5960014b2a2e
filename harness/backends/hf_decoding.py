"""How the HF backend decodes a run's protocol: greedy or sampled (`sampling`), and the thinking budget.

End a local model's thinking at its budget: when a sequence inside an open `<think>` block reaches its
budget, the closing tag is forced token by token (as the budget's last tokens, so the reasoning never exceeds it) and
the answer follows within the answer budget. The budget counts from the first generated token.

A block is open when the prompt ends inside one (the chat template opened it) or the model wrote `<think>`; a model
that never opens one is left alone, and so are channel formats (gpt-oss), whose unfinished analysis is counted.
"""

from __future__ import annotations

from typing import Any

FORCED = "\n</think>\n\n"
TAIL = 8  # generated tokens decoded per step to see a tag (a tag is at most a few tokens)


class ThinkingBudget:
    """A transformers logits processor (built by `make`, since transformers is imported lazily)."""

    def __init__(self, tokenizer: Any, *, budget: int, prompt_len: int, opened: list[bool]):
        self.tokenizer = tokenizer
        self.forced = tokenizer(FORCED, add_special_tokens=False)["input_ids"]
        self.budget, self.prompt_len = budget, prompt_len
        self.opened = list(opened)
        self.closed = [False] * len(opened)

    def __call__(self, input_ids, scores):
        done = input_ids.shape[1] - self.prompt_len  # tokens generated so far (the same for every row)
        step = done - (self.budget - len(self.forced))  # the tag is the budget's last tokens: budget + answer fit
        for row, ids in enumerate(input_ids.tolist()):
            if self.closed[row]:
                continue
            tail = self.tokenizer.decode(ids[max(self.prompt_len, len(ids) - TAIL):], skip_special_tokens=False)
            self.opened[row] = self.opened[row] or "<think>" in tail
            if "</think>" in tail:
                self.closed[row] = True
            elif self.opened[row] and 0 <= step < len(self.forced):
                forced = self.forced[step]
                scores[row, :] = float("-inf")
                scores[row, forced] = 0.0
        return scores


def reasoning_length(tokenizer: Any, toks: list[int]) -> int | None:
    """Generated tokens up to and including the first `</think>` (the exact reasoning count), None if it never closed."""
    for i in range(1, len(toks) + 1):
        if "</think>" in tokenizer.decode(toks[max(0, i - TAIL): i], skip_special_tokens=False):
            return i
    return None


def make(tokenizer: Any, *, budget: int, prompt_len: int, opened: list[bool]) -> Any:
    from transformers import LogitsProcessor

    class Processor(ThinkingBudget, LogitsProcessor):
        pass

    return Processor(tokenizer, budget=budget, prompt_len=prompt_len, opened=opened)


def sampling(r: Any) -> dict[str, Any]:
    """generate()'s decoding settings: greedy, or the run's sampling (--gen-kwargs; a batch shares one protocol).
    A seed makes each repeat its own reproducible draw (seed + repeat)."""
    kw = dict(r.sampling)
    if not kw or float(kw.get("temperature", 0)) == 0:
        return {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    if "seed" in kw:
        import torch

        torch.manual_seed(int(kw.pop("seed")) + r.repeat)
    return {"do_sample": True, "temperature": float(kw["temperature"]), "top_p": float(kw.get("top_p", 1.0)),
            "top_k": int(kw.get("top_k", 0)) or None}
