"""Chat conversations to (input_ids, labels) with the loss on assistant turns only (§4.1).

Templates are rendered message by message instead of relying on `{% generation %}` markers (SmolLM2's
template has none, and `return_assistant_tokens_mask` then returns all zeros): the text before an
assistant turn is `render(messages[:i], add_generation_prompt=True)`, the text through it
`render(messages[:i+1])`. The labelled span is the assistant content as the template wrote it plus the
end-of-turn token that follows; system, user and template tokens get -100. Each piece is tokenized on
its own, so a labelled token never straddles a boundary and the labels decode exactly to the answers.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxbench.harness.core.errors import ConfigError

IGNORE = -100


def require_chat_template(tokenizer, field: str, name: str) -> None:
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError(f"{field}: {name!r} has no chat template; hqa_sft trains on chat turns, so use an instruct "
                          "(chat) model or a tokenizer with a chat_template")


def _render(tokenizer, messages: Sequence[dict[str, str]], generation_prompt: bool = False) -> str:
    if not messages:
        return ""
    return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=generation_prompt)


def _special_strings(tokenizer) -> list[str]:
    specials = set(tokenizer.all_special_tokens)
    for tok in getattr(tokenizer, "added_tokens_decoder", {}).values():
        if getattr(tok, "special", False):
            specials.add(str(tok.content))
    return sorted((s for s in specials if s), key=len, reverse=True)


def pieces(tokenizer, messages: Sequence[dict[str, str]]) -> list[tuple[str, bool]]:
    """The rendered conversation cut into (text, labelled) pieces; labelled = assistant content + end of turn."""
    full = _render(tokenizer, messages)
    specials = _special_strings(tokenizer)
    out: list[tuple[str, bool]] = []
    pos = 0
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        head = _render(tokenizer, messages[:i], generation_prompt=True)
        through = _render(tokenizer, messages[: i + 1])
        if not (through.startswith(head) and full.startswith(through)) or len(head) < pos:
            raise ConfigError("tokenizer: its chat template rewrites earlier turns when later ones are added, so assistant "
                              "tokens cannot be located; use a prefix-preserving template")
        turn = through[len(head):]
        content = m["content"]
        shown = content if content in turn else content.strip()
        at = turn.find(shown)
        if at < 0:
            raise ConfigError(f"tokenizer: its chat template does not reproduce assistant turn {i}'s content verbatim; "
                              "answer-only labels need a template that copies assistant text")
        start, end = len(head) + at, len(head) + at + len(shown)
        rest = through[end:]
        hits = [(rest.find(s), s) for s in specials if s in rest]
        stop = end + (min(hits)[0] + len(min(hits)[1]) if hits else len(rest.rstrip()))
        out += [(full[pos:start], False), (full[start:stop], True)]
        pos = stop
    out.append((full[pos:], False))
    return [(text, lab) for text, lab in out if text]


def tokenize(tokenizer, messages: Sequence[dict[str, str]]) -> tuple[list[int], list[int]]:
    """input_ids and labels (-100 outside assistant answers) of one conversation."""
    parts = pieces(tokenizer, messages)
    encoded = tokenizer([text for text, _ in parts], add_special_tokens=False)["input_ids"]
    ids: list[int] = []
    labels: list[int] = []
    for (_, labelled), toks in zip(parts, encoded):
        ids += toks
        labels += toks if labelled else [IGNORE] * len(toks)
    return ids, labels
