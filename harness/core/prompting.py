"""How a task's text becomes the exact prompt a model sees. One module, shared by every backend.

The answer prefix is appended after the chat template, as the start of the assistant turn, the
way RULER does it. Base models without a chat template get a named plain template instead.

In thinking mode there is no answer prefix (it would cut the model's reasoning off: the RULER authors' advice for
reasoning models), for every task: the renderer drops it, so the fitter counts the prompt the model really sees. A
chat template with a thinking switch (`enable_thinking`, Qwen3 and others) is told the mode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxbench.harness.core.errors import ConfigError

# Plain templates for base models ({task} is the task text). add_special_tokens lets the tokenizer add BOS.
PLAIN_TEMPLATES: dict[str, str] = {
    "plain": "{task}",
    "llama2-inst": "[INST] {task} [/INST]",
    "vicuna": (
        "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, "
        "detailed, and polite answers to the user's questions. USER: {task} ASSISTANT:"
    ),
}


def check_template_name(template: str, *, field: str = "template") -> str:
    """A template name is checked before any tokenizer or weights load: a typo is one line listing the names."""
    if template not in ("auto", "chat", *PLAIN_TEMPLATES):
        raise ConfigError(f"{field}: unknown {template!r}; use auto, chat or one of {', '.join(PLAIN_TEMPLATES)}")
    return template


@dataclass(frozen=True)
class Rendered:
    text: str
    add_special_tokens: bool
    user: str = ""  # the task text, for backends that send chat messages instead of raw text
    prefix: str = ""  # the answer prefix: the start of the assistant turn
    turns: tuple[tuple[str, str], ...] = ()  # (role, content) of the task's turns before its last user message

    @property
    def user_span(self) -> tuple[int, int] | None:
        """Where the task text sits in `text` (the template inserts it verbatim), or None if a template rewrote it."""
        end = len(self.text) - len(self.prefix)
        start = self.text.rfind(self.user, 0, end)
        return (start, start + len(self.user)) if start >= 0 and self.user else None


class PromptRenderer:
    """Renders (task text, answer prefix) with a tokenizer's chat template or a named plain template."""

    def __init__(self, tokenizer, template: str = "auto", system: str | None = None, thinking: str = "off"):
        has_chat = bool(getattr(tokenizer, "chat_template", None))
        if template == "auto":
            template = "chat" if has_chat else "plain"
        if template == "chat" and not has_chat:
            raise ConfigError("template: this tokenizer has no chat template; use template: plain (or llama2-inst, vicuna)")
        check_template_name(template)
        self.tokenizer = tokenizer
        self.template = template
        self.system = system
        self.switch = thinking_switch(tokenizer) if template == "chat" else None
        self.thinking = resolve_thinking(thinking, self.switch)  # "on" or "off"

    @property
    def template_kwargs(self) -> dict[str, Any]:
        """What the chat template is told besides the messages: the thinking switch, where it has one."""
        return {"enable_thinking": self.thinking == "on"} if self.switch == "enable_thinking" else {}

    def key(self) -> dict[str, Any]:
        """What besides the template name changes a rendered prompt (the sample cache's key): the thinking mode and
        what a template with a switch is told; {} for a template without one, thinking off (keys as before)."""
        return {**({"thinking": self.thinking} if self.thinking != "off" else {}),
                **({"template_kwargs": self.template_kwargs} if self.template_kwargs else {})}

    def render(self, task: str | Sequence[Mapping[str, str]], answer_prefix: str = "") -> Rendered:
        """The exact prompt of a task's text, or of its conversation: a list of {role, content} messages (system,
        user and assistant turns, e.g. few-shot chat or MRCR) ending with a user message. The run's system prompt
        comes first. What is returned is what the fitter counts, so a conversation is counted as rendered."""
        turns, task_text = conversation(task)
        if self.thinking == "on":
            answer_prefix = ""  # the model reasons first: a prefix would start its answer before its reasoning
        head = ((("system", self.system),) if self.system is not None else ()) + turns
        if self.template == "chat":
            messages = [*({"role": r, "content": c} for r, c in head), {"role": "user", "content": task_text}]
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                                      **self.template_kwargs)
            return Rendered(text + answer_prefix, False, task_text, answer_prefix, turns)
        before = "".join(f"{c}\n\n" for _, c in head)  # plain templates: earlier turns as text before the task's
        return Rendered(PLAIN_TEMPLATES[self.template].format(task=before + task_text) + answer_prefix, True, task_text,
                        answer_prefix, turns)

    def count(self, rendered: Rendered) -> int:
        return token_counts(self.tokenizer, [rendered.text], add_special_tokens=rendered.add_special_tokens)[0]


ROLES = ("system", "user", "assistant")


def conversation(task: str | Sequence[Mapping[str, str]]) -> tuple[tuple[tuple[str, str], ...], str]:
    """(the turns before the last user message, its text) of a task's text or message list."""
    if isinstance(task, str):
        return (), task
    turns = []
    for i, m in enumerate(task):
        role, content = m.get("role"), m.get("content")
        if role not in ROLES or not isinstance(content, str):
            raise ConfigError(f"messages.{i}: need a role (system, user or assistant) and a text content, got {dict(m)!r}")
        turns.append((role, content))
    if not turns or turns[-1][0] != "user":
        raise ConfigError("messages: a conversation must end with a user message (the model answers it)")
    return tuple(turns[:-1]), turns[-1][1]


def thinking_switch(tokenizer) -> str | None:
    """The thinking switch a chat template reads, if any: `enable_thinking` (Qwen3, Nemotron, ...) or
    `reasoning_effort` (gpt-oss, which always reasons)."""
    source = getattr(tokenizer, "chat_template", None) or ""
    source = source if isinstance(source, str) else " ".join(map(str, source.values() if isinstance(source, dict) else source))
    return next((s for s in ("enable_thinking", "reasoning_effort") if s in source), None)


def resolve_thinking(mode: str, switch: str | None) -> str:
    """on, off, or auto: on where the chat template has a thinking switch."""
    if mode not in ("on", "off", "auto"):
        raise ConfigError(f"--thinking: use on, off or auto, got {mode!r}")
    if mode == "auto":
        return "on" if switch else "off"
    return mode


def token_counts(tokenizer, texts: list[str], *, add_special_tokens: bool) -> list[int]:
    """Token counts of texts. Through the Rust tokenizer directly where there is one (encode_batch_fast: the same
    ids without offsets or Python-side conversion, 30-50% less time than tokenizer(texts)). Not while the Rust tokenizer
    holds padding or truncation: transformers leaves a padded or truncating call's settings on it (it resets them at
    its next call, not after), so reading it directly would count every piece of a batch as the longest one."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if (backend is not None and hasattr(backend, "encode_batch_fast") and getattr(backend, "padding", None) is None
            and getattr(backend, "truncation", None) is None):
        return [len(e.ids) for e in backend.encode_batch_fast(texts, add_special_tokens=add_special_tokens)]
    return [len(ids) for ids in tokenizer(texts, add_special_tokens=add_special_tokens)["input_ids"]]
