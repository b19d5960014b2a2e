"""How the OpenAI-compatible backend builds a request body from a rendered prompt, and reads a completion back.

Split from openai_compat.py (which opens the client, probes the server and sends): the length check before sending
(local or server-side counting; refuse, or cut the middle as text or ids), the chat messages with the answer prefix
continued or appended to the user turn, the run's protocol fields (sampling, thinking switch, reasoning effort), and
(`cache_control: true`) Anthropic-style prompt-cache breakpoints at the shared prefixes the schedule declares.
`PromptBuilding` is a mixin: it uses the backend's tokenizer, settings and `_call`.

Prompt caches: requests arrive in the schedule's order (harness/run/prefix.py: prompts sharing a context back to
back, each declaring the characters it shares with the one before it). OpenAI-style servers cache shared prefixes
themselves; a server that caches only at marked breakpoints (Anthropic's cache_control) gets two marks per request:
where it shares its prompt with the request before it (a read) and with the one after it (written for that one), each
moved back to the last line break before it, so that every question over one document breaks where the document ends.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ctxbench.harness.backends.openai_replies import parse_tokenized
from ctxbench.harness.core.backend import apply_truncation
from ctxbench.harness.core.errors import ConfigError, PromptTooLongError
from ctxbench.harness.core.types import Request

CONTINUE_FIELDS = {"continue_final_message": True, "add_generation_prompt": False}
USER_JOIN = "\n"  # user-turn mode: user_text + USER_JOIN + answer prefix (stripped)
EPHEMERAL = {"type": "ephemeral"}  # Anthropic's cache_control value (a five-minute cache)


@dataclass
class PreparedRequest:
    request: Request
    body: dict[str, Any]
    prompt_tokens: int
    truncated: int


class PromptBuilding:
    """Request bodies for OpenAIBackend (see the module docstring)."""

    def _messages(self, r: Request) -> list[dict[str, str]]:
        user = r.user_text or r.prompt
        system = [{"role": "system", "content": r.system_prompt}] if r.system_prompt is not None else []
        system += [{"role": role, "content": content} for role, content in r.turns]  # a conversation's earlier turns
        if not r.answer_prefix:
            return [*system, {"role": "user", "content": user}]
        if self.prefill == "continue":
            return [*system, {"role": "user", "content": user}, {"role": "assistant", "content": r.answer_prefix}]
        return [*system, {"role": "user", "content": user + USER_JOIN + r.answer_prefix.strip()}]

    def plan_breakpoints(self, requests: list[Request]) -> None:
        """Note what each request shares with the one after it (its successor's declaration): the second mark."""
        self._following = {r.sample_id: after.shared_prefix for r, after in zip(requests, requests[1:])}

    def _marked(self, r: Request, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages with cache_control marks at the shared prefixes (see the module docstring); unchanged when
        the request shares nothing or the template rewrote its user text."""
        start = r.prompt.find(r.user_text) if r.user_text else -1
        shared = [c for c in (r.shared_prefix, getattr(self, "_following", {}).get(r.sample_id, 0)) if c > 0]
        user = next((i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == "user"), None)
        if start < 0 or not shared or user is None:
            return messages
        cuts = set()
        for c in shared:
            cut = r.user_text.rfind("\n", 0, c - start) + 1 if c > start else 0
            cuts.add(min(cut, len(messages[user]["content"])))
        out = [dict(m) for m in messages]
        if 0 in cuts and user > 0:  # the shared part ends before the user text: the earlier messages are cached whole
            out[user - 1]["content"] = [{"type": "text", "text": out[user - 1]["content"], "cache_control": EPHEMERAL}]
        text, blocks, at = out[user]["content"], [], 0
        for cut in sorted(cuts - {0}):
            blocks.append({"type": "text", "text": text[at:cut], "cache_control": EPHEMERAL})
            at = cut
        if blocks:
            out[user]["content"] = blocks + ([{"type": "text", "text": text[at:]}] if at < len(text) else [])
        return out

    def _protocol(self, r: Request) -> dict[str, Any]:
        """Body fields of the run's protocol: sampling (else greedy), the thinking switch passed through (chat: the
        server applies the template), reasoning effort, and the generation limit (answer + thinking budget)."""
        sampling = dict(r.sampling)
        body: dict[str, Any] = {"max_tokens": r.generation_limit, "temperature": sampling.pop("temperature", 0), **sampling}
        if "seed" in body:
            body["seed"] = int(body["seed"]) + r.repeat  # each repeat its own draw, reproducibly
        kwargs = dict(r.template_kwargs)
        if self.api == "chat" and self.thinking_switch and (r.thinking or "enable_thinking" in kwargs):
            kwargs["enable_thinking"] = r.thinking
        if self.api == "chat" and kwargs and self.thinking_switch:
            body["chat_template_kwargs"] = kwargs
        if self.reasoning_effort:
            body["reasoning_effort"] = self.reasoning_effort
        return body

    def _continuing(self, r: Request) -> bool:
        return self.api == "chat" and self.prefill == "continue" and bool(r.answer_prefix)

    def _local_chat_ids(self, messages: list[dict[str, str]], continuing: bool, template_kwargs=()) -> list[int]:
        out = self.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=not continuing,
                                                 continue_final_message=continuing, **dict(template_kwargs))
        if isinstance(out, dict) or hasattr(out, "keys"):
            out = out["input_ids"]
        return list(out)

    async def _count(self, r: Request, messages: list[dict] | None, prompt: str) -> tuple[int, list[int] | None]:
        """(token count, ids if cheaply known). Server counting asks /tokenize; local counting the local tokenizer."""
        if self.count_tokens == "server":
            payload: dict[str, Any] = {"model": self.served_model}
            if messages is None:
                payload.update(prompt=prompt, add_special_tokens=r.add_special_tokens)
            else:
                cont = self._continuing(r)
                payload.update(messages=messages, add_generation_prompt=not cont, continue_final_message=cont)
            return await self._call(f"{self._root()}/tokenize", payload, parse_tokenized)
        if messages is None:
            if r.prompt_tokens is not None and self.prompt_format == "text":
                return int(r.prompt_tokens), None  # counted by this tokenizer when the sample was generated
            ids = self.tokenizer(prompt, add_special_tokens=r.add_special_tokens)["input_ids"]
            return len(ids), ids
        ids = self._local_chat_ids(messages, self._continuing(r), r.template_kwargs)
        return len(ids), ids

    async def _prepare(self, r: Request) -> PreparedRequest:
        """Body for one request, after the length check (refuse raises PromptTooLongError; middle cuts, recorded)."""
        limit = self.context_length - r.generation_limit
        body: dict[str, Any] = {"model": self.served_model, **self._protocol(r), "stream": False}
        if self.api == "completions":
            n, ids = await self._count(r, None, r.prompt)
            truncated = 0
            if n > limit or self.prompt_format == "ids":
                if ids is None or (self.count_tokens == "server" and self.prompt_format == "text"):
                    ids = self.tokenizer(r.prompt, add_special_tokens=r.add_special_tokens)["input_ids"]
                ids, truncated = apply_truncation(list(ids), max_new_tokens=r.generation_limit, context_length=self.context_length,
                                                  policy=self.truncation, sample_id=r.sample_id)
                n = len(ids)
            if self.prompt_format == "ids":
                body["prompt"] = list(ids)
            elif truncated:
                body["prompt"], n = self._fit_text(r, limit)
                truncated = max(truncated, len(self.tokenizer(r.prompt, add_special_tokens=r.add_special_tokens)["input_ids"]) - n)
            else:
                body["prompt"] = r.prompt
            body.update(self.extra_body)
            return PreparedRequest(r, body, n, truncated)

        if not r.user_text:
            raise ConfigError(f"backend_args.api: chat needs samples that carry their user text; {r.sample_id} has none "
                              "(samples from an older ctxbench): regenerate them, or use api=completions")
        messages = self._messages(r)
        n, _ = await self._count(r, messages, "")
        truncated = 0
        if n > limit:
            # refuse, or cut the middle of the task text until the whole chat fits
            if self.truncation != "middle":
                apply_truncation(range(n), max_new_tokens=r.generation_limit, context_length=self.context_length,
                                 policy=self.truncation, sample_id=r.sample_id)  # raises PromptTooLongError
            original = n
            user_ids = self.tokenizer(r.user_text or r.prompt, add_special_tokens=False)["input_ids"]
            over = n - limit
            for _ in range(4):
                keep = max(len(user_ids) - over, 0)
                cut_ids, _ = apply_truncation(user_ids, max_new_tokens=0, context_length=keep, policy="middle", sample_id=r.sample_id)
                cut_req = dataclasses.replace(r, prompt_tokens=None, user_text=self.tokenizer.decode(cut_ids))
                messages = self._messages(cut_req)
                n, _ = await self._count(cut_req, messages, "")
                if n <= limit:
                    break
                over += n - limit
            else:
                raise PromptTooLongError(f"{r.sample_id}: cannot cut the chat prompt below {limit} tokens")
            truncated = original - n
        body["messages"] = self._marked(r, messages) if self.cache_control and not truncated else messages
        if self._continuing(r):
            body.update(CONTINUE_FIELDS)
        body.update(self.extra_body)
        return PreparedRequest(r, body, n, truncated)

    def _fit_text(self, r: Request, limit: int) -> tuple[str, int]:
        """The prompt with its middle cut, as text that re-tokenizes to at most limit tokens (and that count).

        Decoding a cut and tokenizing it again can merge tokens differently at the cut, so check and cut more.
        Special tokens the tokenizer adds itself (BOS of plain templates) are left to the server to add.
        """
        special = len(self.tokenizer("", add_special_tokens=r.add_special_tokens)["input_ids"])
        ids = self.tokenizer(r.prompt, add_special_tokens=False)["input_ids"]
        keep = limit - special
        for _ in range(4):
            ids, _ = apply_truncation(ids, max_new_tokens=0, context_length=keep, policy="middle", sample_id=r.sample_id)
            text = self.tokenizer.decode(ids)
            n = len(self.tokenizer(text, add_special_tokens=r.add_special_tokens)["input_ids"])
            if n <= limit:
                return text, n
            keep -= n - limit
        raise PromptTooLongError(f"{r.sample_id}: cannot cut the prompt below {limit} tokens as text; use prompt_format=ids")

