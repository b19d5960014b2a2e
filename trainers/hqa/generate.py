"""hierarchical-QA's use of the one generator client (trainers/data/generator.py): reply parsing and retries.

Calls, their cache (<cache_dir>/<fingerprint>.jsonl, shared by every hqa synthesis) and the fingerprint rule live in
the client; here a QA reply is parsed, a prose reply re-asked with a nudge, and a final failure counted by reason.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ctxbench.harness.core.errors import ConfigError
from ctxbench.trainers.data.generator import GeneratorClient, GeneratorConfig
from ctxbench.trainers.hqa import prompts


@dataclass(frozen=True)
class QA:
    question: str
    answer: str


_OBJECT = re.compile(r"\{.*\}", re.S)


def parse_qa(reply: str) -> QA | str:
    """A reply's question and answer, from JSON or a Python dict literal (App. B asks for {'question': ...});
    otherwise the reason it was rejected: empty, no_object, unparsable, missing_fields."""
    if not reply or not reply.strip():
        return "empty"
    found = _OBJECT.search(reply)
    if not found:
        return "no_object"
    blob = found.group(0)
    obj = None
    for loads in (json.loads, ast.literal_eval):
        try:
            obj = loads(blob)
            break
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    if not isinstance(obj, dict):
        return "unparsable"
    q, a = obj.get("question"), obj.get("answer")
    if not isinstance(q, str) or not isinstance(a, (str, int, float)) or not q.strip() or not str(a).strip():
        return "missing_fields"
    return QA(q.strip(), str(a).strip())


class Generator(GeneratorClient):
    """The client plus retry-and-parse; `drops` holds the final reason per dropped QA or summary."""

    def __init__(self, spec: GeneratorConfig, cache_dir: Path, *, max_retries: int = 2,
                 on_calls: Callable[[int], None] | None = None):
        super().__init__(spec, cache_dir=Path(cache_dir), on_calls=on_calls)
        self.spec = spec
        self.max_retries = max_retries
        self.drops: Counter = Counter()

    def check_window(self, longest_prompt: str) -> None:
        """Bad input before any call: the generator's context must hold the longest prompt plus its reply."""
        backend = self.backend()
        r = self.renderer.render(longest_prompt, self.spec.answer_prefix)
        need = self.renderer.count(r) + self.spec.max_new_tokens
        if need > backend.context_length:
            raise ConfigError(f"generator.model: context of {backend.context_length} tokens < {need} needed for a chunk, "
                              "the prompt and the reply; lower small_tokens or multihop chunks, or use a longer-context generator")

    def qas(self, texts: Sequence[str], kind: str) -> list[QA | None]:
        """QA pairs for prompts; a reply that does not parse is asked again (with a nudge, as decoding is greedy)
        up to max_retries times, then dropped and counted under `kind:reason`."""
        out: list[QA | None] = [None] * len(texts)
        pending = list(range(len(texts)))
        reasons: dict[int, str] = {}
        for attempt in range(self.max_retries + 1):
            if not pending:
                break
            replies = self.complete([prompts.retry(texts[i], attempt) for i in pending], self.spec.answer_prefix)
            still = []
            for i, reply in zip(pending, replies):
                parsed = parse_qa(reply)
                if isinstance(parsed, QA):
                    out[i] = parsed
                else:
                    reasons[i] = parsed
                    still.append(i)
            pending = still
        for i in pending:
            self.drops[f"{kind}:{reasons[i]}"] += 1
        return out

    def summaries(self, texts: Sequence[str], kind: str) -> list[str | None]:
        """Free-text summaries; an empty reply is retried, then dropped and counted."""
        out: list[str | None] = [None] * len(texts)
        pending = list(range(len(texts)))
        for attempt in range(self.max_retries + 1):
            if not pending:
                break
            replies = self.complete([prompts.retry(texts[i], attempt, "text") for i in pending])
            still = []
            for i, reply in zip(pending, replies):
                if reply.strip():
                    out[i] = reply.strip()
                else:
                    still.append(i)
            pending = still
        self.drops[f"{kind}:empty"] += len(pending)
        if not self.drops[f"{kind}:empty"]:
            del self.drops[f"{kind}:empty"]
        return out

