"""A tokenizer that counts and renders prompts without importing transformers (0.2 s instead of 10-13 s).

The echo backend and the commands that only count tokens need a tokenizer's ids and its chat template, never a model.
`tokenizers.Tokenizer.from_file(tokenizer.json)` holds the same Rust tokenizer that transformers wraps, and the chat
template is rendered here in the sandboxed jinja2 environment transformers builds (transformers/utils/
chat_template_utils.py: trim_blocks, lstrip_blocks, loopcontrols, the `generation` tag, a `tojson` that keeps
non-ASCII, `raise_exception`, `strftime_now`, a limited `dict` and `namespace`), with the same variables (the special
tokens, then the caller's keyword arguments). So the ids, the rendered prompts and `tokenizer_fingerprint` are
identical (tests/test_light_tokenizer.py checks them against transformers).

`light_config` takes the light path only where transformers would load tokenizer.json as it is: a generic tokenizer
class, no post-processor or special token for transformers to add or rewrite, no truncation, padding, slow-only or
extra settings. Anything else returns None and the caller loads transformers. A method or argument the light
tokenizer does not reproduce (a batch of chats, tools, tensors, padding) is answered by the transformers tokenizer,
loaded on first such use (`full`), so a caller never gets different ids, only a slower answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from functools import cached_property, lru_cache
from numbers import Integral
from pathlib import Path
from typing import Any

# The classes AutoTokenizer builds straight from tokenizer.json (in transformers 5 PreTrainedTokenizerFast is
# TokenizersBackend); a model-specific class may rebuild the tokenizer from its vocabulary instead.
GENERIC_CLASSES = frozenset({"TokenizersBackend", "PreTrainedTokenizerFast"})
SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
# tokenizer_config.json keys that change nothing the light tokenizer does differently from transformers
PLAIN_KEYS = frozenset({"backend", "tokenizer_class", "model_max_length", "is_local", "local_files_only", "chat_template",
                        "clean_up_tokenization_spaces", "added_tokens_decoder", "padding_side", "truncation_side",
                        "model_input_names", "name_or_path", "split_special_tokens", *SPECIAL_NAMES})
ADDED_TOKEN_FLAGS = ("content", "single_word", "lstrip", "rstrip", "normalized", "special")
MISTRAL_REGEX_VOCAB = 100000  # transformers may patch the pre-tokenizer of a vocabulary this large (Mistral's regex)
VERY_LARGE_INTEGER = int(1e30)  # transformers' model_max_length when the config names none


def light_config(directory: str | Path) -> dict[str, Any] | None:
    """tokenizer_config.json where transformers would load tokenizer.json unchanged (so the light path gives the same
    ids), else None. Conservative: a key or file this module does not reproduce means transformers."""
    d = Path(directory)
    if not (d / "tokenizer.json").is_file() or not (d / "tokenizer_config.json").is_file():
        return None
    if any((d / name).exists() for name in ("special_tokens_map.json", "added_tokens.json", "additional_chat_templates")):
        return None
    config = json.loads((d / "tokenizer_config.json").read_text(encoding="utf-8"))
    if (set(config) - PLAIN_KEYS or config.get("tokenizer_class") not in GENERIC_CLASSES
            or config.get("backend", "tokenizers") != "tokenizers" or config.get("clean_up_tokenization_spaces")
            or config.get("split_special_tokens")):
        return None
    if (d / "chat_template.jinja").is_file():
        config["chat_template"] = (d / "chat_template.jinja").read_text(encoding="utf-8")
    if not isinstance(config.get("chat_template", ""), (str, type(None))):
        return None  # several named templates
    return config if _unchanged_by_transformers(json.loads((d / "tokenizer.json").read_text(encoding="utf-8")), config) else None


def _unchanged_by_transformers(spec: dict, config: dict) -> bool:
    """Whether transformers' TokenizersBackend would leave this tokenizer.json's backend as it is: it rewrites a
    missing post-processor, sets truncation and padding, adds every named special token (as special, not normalized)
    and every entry of added_tokens_decoder that the file lacks, and may patch a large vocabulary's regex."""
    if spec.get("post_processor") is None or spec.get("truncation") is not None or spec.get("padding") is not None:
        return False
    model_vocab = spec.get("model", {}).get("vocab") or {}
    added = {t["content"]: t for t in spec.get("added_tokens", [])}
    if len(model_vocab) + len(added) > MISTRAL_REGEX_VOCAB:
        return False
    for name in SPECIAL_NAMES:
        token = config.get(name)
        if token is None:
            continue
        want = {"content": token, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
        if not isinstance(token, str) or {k: added.get(token, {}).get(k) for k in ADDED_TOKEN_FLAGS} != want:
            return False
    by_id = {str(t["id"]): t for t in spec.get("added_tokens", [])}
    for index, token in (config.get("added_tokens_decoder") or {}).items():
        if not isinstance(token, Mapping) or any(by_id.get(index, {}).get(k) != token.get(k) for k in ADDED_TOKEN_FLAGS):
            return False
    return True


def load_light(directory: str | Path):
    """The light tokenizer of an HF directory, or None where only transformers reproduces it."""
    config = light_config(directory)
    if config is None:
        return None
    from tokenizers import Tokenizer

    return LightTokenizer(Tokenizer.from_file(str(Path(directory) / "tokenizer.json")), config, str(directory))


class LightTokenizer:
    """What ctxbench calls on a tokenizer to count tokens and render prompts: the transformers names and results."""

    is_fast = True

    def __init__(self, backend, config: dict[str, Any], name_or_path: str):
        self._backend = backend
        self._config = config
        self.name_or_path = name_or_path
        self.chat_template: str | None = config.get("chat_template")
        self.model_max_length = int(config.get("model_max_length") or VERY_LARGE_INTEGER)
        self.padding_side = config.get("padding_side", "right")
        self.truncation_side = config.get("truncation_side", "right")
        self.model_input_names = list(config.get("model_input_names", ["input_ids", "attention_mask"]))
        self.clean_up_tokenization_spaces = False
        self.special_tokens_map = {name: config[name] for name in SPECIAL_NAMES if config.get(name) is not None}
        for name in SPECIAL_NAMES:
            token = self.special_tokens_map.get(name)
            setattr(self, name, token)
            setattr(self, name + "_id", None if token is None else backend.token_to_id(token))

    def __repr__(self) -> str:
        return f"LightTokenizer(name_or_path={self.name_or_path!r}, vocab={len(self)})"

    @property
    def backend_tokenizer(self):
        return self._backend

    @cached_property
    def full(self):
        """The transformers tokenizer of the same directory, for what the light path does not reproduce."""
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(self.name_or_path)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.full, name)

    def __len__(self) -> int:
        return self._backend.get_vocab_size(with_added_tokens=True)

    @property
    def vocab_size(self) -> int:
        return self._backend.get_vocab_size(with_added_tokens=False)

    def get_vocab(self) -> dict[str, int]:
        return self._backend.get_vocab(with_added_tokens=True)

    @property
    def all_special_tokens(self) -> list[str]:
        return list(dict.fromkeys(self.special_tokens_map.values()))

    @property
    def all_special_ids(self) -> list[int]:
        return [self._backend.token_to_id(t) for t in self.all_special_tokens]

    def __call__(self, text, text_pair=None, *, add_special_tokens: bool = True, return_offsets_mapping: bool = False,
                 return_attention_mask: bool | None = None, **kwargs):
        """transformers' encoding of a text or a list of texts (input_ids, attention_mask, offset_mapping), without
        padding, truncation or tensors (those go to transformers)."""
        if text_pair is not None or any(v not in (None, False) for v in kwargs.values()) or not _texts(text):
            return self.full(text, text_pair, add_special_tokens=add_special_tokens,
                             return_offsets_mapping=return_offsets_mapping, return_attention_mask=return_attention_mask,
                             **kwargs)
        batched = isinstance(text, (list, tuple))
        self._backend.encode_special_tokens = False
        encodings = self._backend.encode_batch(list(text) if batched else [text], add_special_tokens=add_special_tokens)
        mask = "attention_mask" in self.model_input_names if return_attention_mask is None else return_attention_mask
        out: dict[str, list] = {"input_ids": [e.ids for e in encodings]}
        if "token_type_ids" in self.model_input_names:
            out["token_type_ids"] = [e.type_ids for e in encodings]
        if mask:
            out["attention_mask"] = [e.attention_mask for e in encodings]
        if return_offsets_mapping:
            out["offset_mapping"] = [e.offsets for e in encodings]
        return out if batched else {k: v[0] for k, v in out.items()}

    def encode(self, text, text_pair=None, *, add_special_tokens: bool = True, **kwargs) -> list[int]:
        return self(text, text_pair, add_special_tokens=add_special_tokens, **kwargs)["input_ids"]

    def decode(self, token_ids, skip_special_tokens: bool = False, clean_up_tokenization_spaces: bool | None = None,
               **kwargs) -> str:
        if clean_up_tokenization_spaces or kwargs or not _ids(token_ids):
            return self.full.decode(token_ids, skip_special_tokens=skip_special_tokens,
                                    clean_up_tokenization_spaces=clean_up_tokenization_spaces, **kwargs)
        ids = [int(token_ids)] if isinstance(token_ids, Integral) else [int(i) for i in token_ids]
        return self._backend.decode(ids, skip_special_tokens=skip_special_tokens)

    def batch_decode(self, sequences, skip_special_tokens: bool = False, **kwargs) -> list[str]:
        return [self.decode(s, skip_special_tokens=skip_special_tokens, **kwargs) for s in sequences]

    def convert_ids_to_tokens(self, ids, skip_special_tokens: bool = False):
        if isinstance(ids, int):
            return self._backend.id_to_token(ids)
        special = set(self.all_special_ids) if skip_special_tokens else set()
        return [self._backend.id_to_token(i) for i in ids if i not in special]

    def convert_tokens_to_ids(self, tokens):
        if isinstance(tokens, str):
            return self._backend.token_to_id(tokens)
        return [self._backend.token_to_id(t) for t in tokens]

    def apply_chat_template(self, conversation, *, add_generation_prompt: bool = False, tokenize: bool = True,
                            chat_template: str | None = None, **kwargs):
        """The rendered chat (tokenize=False) as transformers renders it; other uses (ids, tools, batches of
        chats, continue_final_message, ...) go to transformers."""
        template = chat_template or self.chat_template
        plain = _template_data(kwargs) if template and not tokenize else None
        messages = _messages(conversation) if plain is not None else None
        if messages is None or any(k in kwargs for k in TRANSFORMERS_ONLY):
            return self.full.apply_chat_template(conversation, add_generation_prompt=add_generation_prompt,
                                                 tokenize=tokenize, chat_template=chat_template, **kwargs)
        variables = {**self.special_tokens_map, **plain}
        return compiled_template(template).render(messages=messages, tools=None, documents=None,
                                                  add_generation_prompt=add_generation_prompt, **variables)


# apply_chat_template arguments whose handling (tools, documents, masks, continuation, sanitizing, tokenizing) is
# transformers' own: the light path never guesses at them
TRANSFORMERS_ONLY = frozenset({"tools", "documents", "continue_final_message", "return_assistant_tokens_mask",
                               "sanitize_control_tokens", "return_dict", "return_tensors", "padding", "truncation",
                               "max_length", "tokenizer_kwargs"})
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")  # transformers' _REASONING_FIELDS


def _texts(text) -> bool:
    return isinstance(text, str) or (isinstance(text, (list, tuple)) and all(isinstance(t, str) for t in text))


def _ids(token_ids) -> bool:
    """A token id or a flat list of them (numpy integers included), which the Rust decoder takes as they are."""
    if isinstance(token_ids, Integral):
        return not isinstance(token_ids, bool)
    return isinstance(token_ids, (list, tuple)) and all(isinstance(i, Integral) and not isinstance(i, bool) for i in token_ids)


def _template_data(value):
    """A deep copy of JSON-like data (what the template may see), or None where transformers' own conversion of rich
    objects (dataclasses, pydantic, numpy, subclasses) would be needed."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if type(value) is dict:
        items = {k: _template_data(v) for k, v in value.items()}
        ok = all(type(k) is str for k in value) and all(v is not None or value[k] is None for k, v in items.items())
        return items if ok else None
    if type(value) in (list, tuple):
        items = [_template_data(v) for v in value]
        return type(value)(items) if all(a is not None or b is None for a, b in zip(items, value)) else None
    return None


def _messages(conversation) -> list[dict] | None:
    """transformers' normalisation of one chat: keys whose value is None dropped, reasoning aliased under its three
    names; None for a batch of chats or anything not plain."""
    if not isinstance(conversation, (list, tuple)) or not conversation:
        return None
    chat = []
    for message in conversation:
        if type(message) is not dict:
            return None
        plain = _template_data({k: v for k, v in message.items() if v is not None})
        if plain is None:
            return None
        reasoning = next((plain[k] for k in REASONING_FIELDS if plain.get(k) is not None), None)
        chat.append(plain if reasoning is None else {"thinking": reasoning, **plain, "reasoning_content": reasoning})
    return chat


@lru_cache(maxsize=16)
def compiled_template(source: str):
    """The template compiled in transformers' sandboxed environment (see the module docstring)."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[generation_tag(), jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = template_namespace()
    return env.from_string(source)


def raise_exception(message):
    import jinja2

    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    """transformers' tojson: no HTML escaping, non-ASCII kept."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class TemplateDict:
    """`dict(...)` in a template, without attribute access to the type."""

    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


@lru_cache(maxsize=1)
def template_namespace():
    """jinja2's Namespace, refusing underscore-prefixed names (transformers' TemplateNamespace)."""
    import jinja2.exceptions
    import jinja2.utils

    def check(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"Chat templates cannot store underscore-prefixed attributes on a namespace, but got {name!r}. "
                "Please rename the attribute.")

    class TemplateNamespace(jinja2.utils.Namespace):
        def __init__(*args, **kwargs):
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for name in attrs:
                check(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name, value):
            check(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

    return TemplateNamespace


@lru_cache(maxsize=1)
def generation_tag():
    """`{% generation %}...{% endgeneration %}` (transformers' AssistantTracker) renders its body; the light path
    never tracks assistant spans (return_assistant_tokens_mask goes to transformers)."""
    import jinja2.nodes
    from jinja2.ext import Extension

    class GenerationTag(Extension):
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

        def _render(self, caller):
            return caller()

    return GenerationTag
