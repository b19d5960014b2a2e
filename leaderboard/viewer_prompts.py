"""The viewer's prompts, regenerated at board-build time: a run stores each prompt's hash, not its text.

Generation is deterministic in (task arguments, length, index, seed, tokenizer, template, data), and a run's record
keeps all of them but the data folder (read from CTXBENCH_DATA_DIR, as `ctxbench score` does). So the board rebuilds
each sample through the task registry (reading the sample cache the run filled, where it is still there), and keeps
the text only where its hash equals the stored row's; otherwise the viewer shows the hash and a visible "prompt not
reproducible here" note with the reason. Regeneration costs a little build time and no store space (39,000 samples
at up to 1M tokens would be gigabytes); the board keeps a long prompt as excerpts (its head, its tail and a window
around each gold and answer), so its page weight stays bounded per sample (docs/board.md states it).
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FOLD_CHARS = 2_000  # prompts longer than this show as excerpts first (collapsed), the whole text a click away
KEEP_FULL = 16_000  # prompts up to this many characters are kept whole (about 4K tokens)
HEAD, TAIL, WINDOW = 600, 1_200, 300  # characters kept of a longer prompt: its start, its end (the question), and
MAX_HITS = 3  # ... WINDOW either side of each of the first MAX_HITS occurrences of each gold and of the answer
SHORTEST = 3  # characters a gold or an answer needs to be looked for in a prompt (the viewer uses the same rule)

DetailKey = tuple[str, str, int, int]  # (run id, task, length, index), as viewer.DetailKey


@dataclass(frozen=True)
class Wanted:
    """A stored sample whose prompt the viewer wants: where it is, its recorded hash and its highlights."""

    key: DetailKey
    prompt_hash: str
    marks: tuple[str, ...]


def spans(text: str, marks: Iterable[str], limit: int = MAX_HITS) -> list[tuple[int, int]]:
    """Where the first `limit` occurrences of each mark lie in `text`: case-insensitive, as whole words, and only
    for marks of SHORTEST characters or more (a gold "A" or "7" would mark every letter a or digit 7)."""
    out = []
    for mark in {m.strip() for m in marks if m and len(m.strip()) >= SHORTEST}:
        for k, hit in enumerate(re.finditer(rf"(?<!\w){re.escape(mark)}(?!\w)", text, re.IGNORECASE)):
            if k == limit:
                break
            out.append(hit.span())
    return sorted(out)


def excerpt(text: str, marks: Iterable[str]) -> list[tuple[int, str]]:
    """A long prompt as (offset, text) parts: its head, its tail and a window around each highlight, merged where
    they overlap; the parts are in order and the viewer shows the gaps between them."""
    keep = [(0, HEAD), (max(0, len(text) - TAIL), len(text))]
    keep += [(max(0, a - WINDOW), min(len(text), b + WINDOW)) for a, b in spans(text, marks)]
    merged: list[list[int]] = []
    for a, b in sorted(keep):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, text[a:b]) for a, b in merged]


def prompt_view(text: str, marks: Iterable[str], *, source: str) -> dict[str, Any]:
    """What the viewer's per-cell prompt file holds for one sample: the whole text when short enough, and excerpts
    when longer than the viewer shows unfolded (the collapsed view)."""
    view: dict[str, Any] = {"chars": len(text), "source": source}
    if len(text) <= KEEP_FULL:
        view["text"] = text
    if len(text) > FOLD_CHARS:
        view["parts"] = [list(p) for p in excerpt(text, marks)]
    return view


class Unavailable(Exception):
    """Why a run's prompts cannot be regenerated here, in words for the viewer's note."""


def not_reproducible(reason: str) -> dict[str, Any]:
    return {"note": f"prompt not reproducible here: {reason}"}


def first_repeats(store: Any) -> Iterator[tuple[DetailKey, dict[str, Any]]]:
    """The first repeat of every scored sample of a run, keyed as the viewer keys them."""
    for row in store.latest().values():
        if row.get("score") is None or int(row.get("repeat") or 0) or row.get("task") is None:
            continue
        yield (store.dir.name, str(row["task"]), int(row.get("length") or 0), int(row.get("index") or 0)), row


def marks_of(row: Mapping[str, Any]) -> list[str]:
    """What the viewer highlights in a prompt: each gold answer (the needle's value) and the model's answer."""
    marks = [str(a) for a in row.get("answers") or []]
    return marks + ([row["prediction"]] if isinstance(row.get("prediction"), str) else [])


def wanted_samples(store: Any) -> list[Wanted]:
    return [Wanted(key, str(row.get("prompt_hash") or ""), tuple(marks_of(row))) for key, row in first_repeats(store)]


def store_prompts(store: Any, data_dir: Path | None = None) -> dict[DetailKey, dict[str, Any]]:
    """Every scored sample of one run: its prompt view, or why it cannot be shown. Never raises for a run that
    cannot be regenerated here (an old record, a missing tokenizer or data): each sample gets the note instead."""
    wanted = wanted_samples(store)
    if not wanted:
        return {}
    try:
        record = store.read_record()
        ctx, suite = _context(record, data_dir)
    except Exception as e:  # noqa: BLE001 - any failure to rebuild the context is shown as the note, never raised
        return {w.key: not_reproducible(_reason(e)) for w in wanted}
    by_cell: dict[tuple[str, int], list[Wanted]] = defaultdict(list)
    for w in wanted:
        by_cell[(w.key[1], w.key[2])].append(w)
    out: dict[DetailKey, dict[str, Any]] = {}
    for spec in suite.tasks:
        out.update(_task_prompts(spec, by_cell, ctx, suite.seed))
    for w in wanted:
        out.setdefault(w.key, not_reproducible("its task is not in the run's recorded suite"))
    return out


def _task_prompts(spec: Any, by_cell: Mapping[tuple[str, int], list[Wanted]], ctx: Any,
                  seed: int) -> dict[DetailKey, dict[str, Any]]:
    """One suite task's samples, regenerated cell by cell; a task that fails here notes why on each of its samples."""
    from ctxbench.harness.core import datasets
    from ctxbench.harness.core.config import build_task

    cells = {length: ws for (task, length), ws in by_cell.items() if task == spec.display}
    if not cells:
        return {}
    out = {}
    try:
        task = build_task(spec)
        if task.external:
            raise Unavailable("an lm-eval task: lm-eval renders its prompts (its own log keeps them)")
        task.prepare(ctx)
        for length, ws in sorted(cells.items()):
            by_index = {w.key[3]: w for w in ws}
            for sample in datasets.iter_samples(task, length=length, indices=sorted(by_index), seed=seed, ctx=ctx):
                w = by_index[sample.index]
                out[w.key] = _checked(sample, w)
    except Exception as e:  # noqa: BLE001 - as in store_prompts: a note on the samples, the board still builds
        reason = _reason(e)
        return {w.key: out.get(w.key) or not_reproducible(reason) for ws in cells.values() for w in ws}
    return out


def _checked(sample: Any, w: Wanted) -> dict[str, Any]:
    """The regenerated prompt where its hash is the stored one; else the note, with both hashes."""
    if w.prompt_hash and sample.prompt_hash == w.prompt_hash:
        return prompt_view(sample.prompt, w.marks, source="regenerated")
    if not w.prompt_hash:
        return not_reproducible("the stored row has no prompt hash to check a regenerated prompt against")
    return not_reproducible(f"regenerated here it hashes to {sample.prompt_hash}, not the stored {w.prompt_hash} "
                            "(other task data or another tokenizer; set CTXBENCH_DATA_DIR to the data the run read)")


def _context(record: Mapping[str, Any], data_dir: Path | None) -> tuple[Any, Any]:
    """The generation context and suite a run's record describes (its tokenizer, template, thinking mode, system
    prompt and suite), checked against the record's tokenizer fingerprint."""
    from ctxbench.harness.core.config import Suite
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.fitting import resolve_mode
    from ctxbench.harness.core.models import load_tokenizer, tokenizer_fingerprint
    from ctxbench.harness.core.prompting import PromptRenderer

    if not record.get("suite_config") or not record.get("tokenizer"):
        raise Unavailable("the run's record names no suite or tokenizer (an imported or older run)")
    suite = Suite.model_validate(record["suite_config"])
    tok = load_tokenizer(local_tokenizer(str(record["tokenizer"])), light=True)
    if record.get("tokenizer_fingerprint") and tokenizer_fingerprint(tok) != record["tokenizer_fingerprint"]:
        raise Unavailable(f"the tokenizer at {record['tokenizer']} is not the one the run used (fingerprint)")
    generation = record.get("generation") or {}
    renderer = PromptRenderer(tok, str(record.get("template") or suite.template),
                              system=generation.get("system_prompt"), thinking=generation.get("thinking", "off"))
    if data_dir is None and os.environ.get("CTXBENCH_DATA_DIR"):
        data_dir = Path(os.environ["CTXBENCH_DATA_DIR"])
    return GenContext(tok, renderer, data_dir=data_dir, verify=resolve_mode(suite.verify, suite.samples)), suite


def local_tokenizer(spec: str) -> str:
    """The recorded tokenizer as something on this machine: a hub id becomes its snapshot in the Hugging Face cache,
    so a board build downloads nothing (a tokenizer that is not there is the viewer's note)."""
    from ctxbench.harness.core.models import ALIASES

    if spec in ALIASES or Path(spec).expanduser().exists() or spec.count("/") != 1 or spec.startswith((".", "/")):
        return spec
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        raise Unavailable(f"the tokenizer {spec} is a hub id and huggingface_hub is not installed here") from None
    for name in ("tokenizer_config.json", "tokenizer.json"):
        hit = try_to_load_from_cache(spec, name)
        if isinstance(hit, str):
            return str(Path(hit).parent)
    raise Unavailable(f"the tokenizer {spec} is not in this machine's Hugging Face cache (a board build downloads nothing)")


def _reason(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text if isinstance(e, Unavailable) else f"{type(e).__name__}: {text}"


def prompts_of(stores: Iterable[Any], data_dir: Path | None = None) -> Iterator[tuple[DetailKey, dict[str, Any]]]:
    """Every store's prompt views, one run at a time."""
    for store in stores:
        yield from store_prompts(store, data_dir).items()
