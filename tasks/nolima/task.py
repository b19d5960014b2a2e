"""NoLiMa (`nolima/needles`, `nolima/hard`): needle-in-a-haystack where the question shares no words with the
needle (Modarressi et al. 2025, adobe-research/NoLiMa; data amodaresi/NoLiMa on the hub).

The needle set and the shuffled books are NoLiMa's own, downloaded at run time (Adobe Research License:
non-commercial research only, so ctxbench never ships them). The tests are built as NoLiMa's run_tests.py
builds them: every (entry, question type, test) of the needle set, its {1}, {2}... arguments filled in (a
question keeps only its last filled placeholder, as there), and per test, book and depth a character drawn
from the entry's character set by NumPy's legacy generator seeded with base_seed + the entry's 4-digit id +
the book's position in NoLiMa's haystack listing (its os.listdir order, which varies across filesystems; here the
sorted order by default, so position = number - 1, or `listing` to reproduce a given run), one draw per depth in
order. Placement is ctxbench's: the needle goes at the sentence
boundary of the book nearest its depth, and the book text fills the sample's length (NoLiMa's context_length
counts the book's tokens only, ctxbench's length the whole prompt, generation included). NoLiMa's default
template after NoLiMa's system message "You are a helpful assistant" (async_api_connector.py sends it on every call,
whatever the needle set's system_prompt; `system_prompt: null` sends none, and a run's --system-prompt replaces
it), 192 new tokens; score "contains": 1 when the gold character's name occurs in the answer, case-sensitive.

A sample's index is (test, book, depth): index = (test * books + book) * depths + depth.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.fitting import fit_units
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Sample
from ctxbench.tasks.base import Task, TaskArgs, check_points, points
from ctxbench.tasks.haystacks import EssayLayout, read_text_source, word_haystack
from ctxbench.tasks.realdata import hub_file

HUB = "amodaresi/NoLiMa"
TEMPLATE = ("You will answer a question based on the following book snippet:\n\n{haystack}\n\nUse the information provided "
            "in the book snippet to answer the question. Your answer should be short and based on either explicitly stated "
            "facts or strong, logical inferences.\n\nQuestion: {question}\n\n Return only the final answer with no additional "
            "explanation or reasoning.")  # run_tests.py DEFAULT_TASK_TEMPLATE
_SLOT = "\x00HAYSTACK\x00"
SYSTEM_PROMPT = "You are a helpful assistant"  # evaluation/async_api_connector.py APIConnector.SYSTEM_PROMPT (no period)


class NolimaArgs(TaskArgs):
    needle_set: str = Field("needle_set", description="NoLiMa needle set: a name under needlesets/ (needle_set, needle_set_hard, "
                                                      "needle_set_ONLYDirect, ...) or a path to such a .json")
    books: list[int] = Field([1, 2, 3, 4, 5], description="shuffled books used as haystacks (rand_book_N.txt, N in 1..5)")
    depths: list[float] | int = Field(26, description="needle depth percentages, or N evenly spaced from 0 to 100 (NoLiMa: 26)")
    question_types: list[str] | None = Field(None, description="only these question types (onehop, twohop); default: all")
    data_path: str | None = Field(None, description="local copy laid out as the hub repo (needlesets/, haystack/rand_shuffle/); "
                                                     "default: data_dir/nolima/, else the hub")
    base_seed: int = Field(42, description="NoLiMa's --base_seed: draws each depth's character")
    tokens_to_generate: int = Field(192, ge=1, description="tokens to generate (NoLiMa's model configs: 192)")
    system_prompt: str | None = Field(SYSTEM_PROMPT, description="system message before every prompt (NoLiMa always "
                                      "sends 'You are a helpful assistant'); null: none. A run's --system-prompt replaces it")
    listing: list[int] | None = Field(None, description="the books in the order NoLiMa's os.listdir listed them in the run "
                                      "to reproduce (e.g. [4, 5, 3, 1, 2]): a book's character seed adds its position "
                                      "there; default: sorted, position = number - 1")

    @field_validator("depths")
    @classmethod
    def _depths(cls, v):
        return check_points(v, top=100, name="depths", unit="a percentage")

    @field_validator("books")
    @classmethod
    def _books(cls, v):
        if not v or any(not 1 <= b <= 5 for b in v):
            raise ValueError("books: NoLiMa has rand_book_1 ... rand_book_5; give numbers in 1..5")
        return v

    @field_validator("listing")
    @classmethod
    def _listing(cls, v):
        if v is not None and sorted(v) != [1, 2, 3, 4, 5]:
            raise ValueError("listing: give each of the books 1..5 once, in the order os.listdir listed them")
        return v

    def position(self, book: int) -> int:
        """The book's place in NoLiMa's haystack listing (its character seed offset)."""
        return self.listing.index(book) if self.listing else book - 1


def nolima_contains(prediction: str, golds) -> float:
    """NoLiMa's "contains" metric: some gold answer occurs in the response as is (case-sensitive, no stripping)."""
    return float(any(g in prediction for g in golds))


def build_tests(needle_set: list[dict[str, Any]], question_types: list[str] | None) -> list[dict[str, Any]]:
    """NoLiMa's tests in run_tests.py's order, arguments filled in its way."""
    tests = []
    for entry in needle_set:
        for qtype, question in entry["questions"].items():
            if question_types and qtype not in question_types:
                continue
            for test_id, test in entry["tests"].items():
                needle, filled = entry["needle"], question
                for no, arg in enumerate(test["input_args"], 1):
                    slot = "{" + str(no) + "}"
                    if slot in question:
                        filled = question.replace(slot, arg)  # from the original: only the last placeholder survives
                    needle = needle.replace(slot, arg)
                tests.append({"name": f"{entry['id']}_{test_id}_{qtype}", "needle": needle, "question": filled,
                              "template": entry.get("task_template") or TEMPLATE, "characters": entry.get("character_set") or [],
                              "gold": list(test.get("gold_answers") or []), "seed": int(str(entry["id"])[:4])})
    return tests


def character_at(characters: list[str], seed: int, draw: int) -> str:
    """The character of the draw-th depth: np.random.seed(seed), then one np.random.choice per depth."""
    import numpy as np

    state = np.random.RandomState(seed)
    for _ in range(draw):
        state.choice(characters)
    return str(state.choice(characters))


class Nolima(Task):
    Args = NolimaArgs
    category = "retrieval"
    metric = "nolima/contains"
    summary = "{name}: a needle with no literal overlap with its question, at each depth of a book"
    data_source = "amodaresi/NoLiMa (hub, Adobe research licence: downloaded at run time), or data_path / data_dir/nolima/"
    shared_context = "book"  # a needle's depths in one book
    requires_data = True

    @property
    def max_new_tokens(self) -> int:
        return self.args.tokens_to_generate

    def _file(self, relative: str, data_dir: Path | None) -> Path:
        roots = [Path(self.args.data_path).expanduser()] if self.args.data_path else []
        roots += [data_dir / "nolima"] if data_dir is not None else []
        for root in roots:
            if (root / relative).is_file():
                return root / relative
        if self.args.data_path:
            raise ConfigError(f"data_path: {self.args.data_path} has no {relative}; give a copy laid out as {HUB}")
        return hub_file(HUB, relative, what=self.name, hint=f"put {relative} under data_dir/nolima/ (from {HUB})")

    def data_files(self, ctx: GenContext) -> list[Path]:
        """The local needle set and books (the sample cache is keyed by their content)."""
        roots = [Path(self.args.data_path).expanduser()] if self.args.data_path else []
        roots += [ctx.data_dir / "nolima"] if ctx.data_dir is not None else []
        name = self.args.needle_set
        wanted = [] if name.endswith(".json") else [f"needlesets/{name}.json"]
        wanted += [f"haystack/rand_shuffle/rand_book_{b}.txt" for b in self.args.books]
        found = [root / w for w in wanted for root in roots if (root / w).is_file()]
        return ([Path(name).expanduser()] if name.endswith(".json") else []) + found

    def tests(self, ctx: GenContext) -> list[dict[str, Any]]:
        def load():
            name = self.args.needle_set
            path = Path(name).expanduser() if name.endswith(".json") else self._file(f"needlesets/{name}.json", ctx.data_dir)
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                if any("distractors" in entry for entry in data):
                    raise ConfigError(f"needle_set: {path} places distractors, which ctxbench does not; use a set without them")
                tests = build_tests(data, self.args.question_types)
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
                raise ConfigError(f"needle_set: {path} is not a NoLiMa needle set ({e.__class__.__name__}: {e})") from None
            if not tests:
                raise ConfigError(f"needle_set: {path} has no tests{' of types ' + ', '.join(self.args.question_types) if self.args.question_types else ''}")
            return tests

        return ctx.cached(("nolima-tests", self.args.needle_set, str(self.args.question_types), self.args.data_path, str(ctx.data_dir)), load)

    def prepare(self, ctx: GenContext) -> None:
        self.tests(ctx)

    def samples_per_length(self, ctx: GenContext | None = None) -> int | None:
        if ctx is None:
            return None
        return len(self.tests(ctx)) * len(self.args.books) * len(points(self.args.depths, top=100))

    def book(self, number: int, ctx: GenContext):
        def make():
            from ctxbench.harness.core.models import tokenizer_fingerprint

            path = self._file(f"haystack/rand_shuffle/rand_book_{number}.txt", ctx.data_dir)
            fp = ctx.cached(("fingerprint",), lambda: tokenizer_fingerprint(ctx.tokenizer))
            return word_haystack(read_text_source(path), ctx.tokenizer, fp)

        return ctx.cached(("nolima-book", number, self.args.data_path, str(ctx.data_dir)), make)

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        tests, depths, books = self.tests(ctx), points(self.args.depths, top=100), self.args.books
        test_no, rest = divmod(index, len(books) * len(depths))
        if test_no >= len(tests):
            raise ConfigError(f"{self.name}: sample {index} is out of range; {len(tests) * len(books) * len(depths)} samples")
        book_no, depth_no = divmod(rest, len(depths))
        test, number = tests[test_no], books[book_no]
        needle, question, golds = test["needle"], test["question"], test["gold"]
        character = None
        if "{CHAR}" in needle:
            if not test["characters"]:
                raise ConfigError(f"needle_set: entry {test['name']} has {{CHAR}} but no character_set")
            character = character_at(test["characters"], self.args.base_seed + test["seed"] + self.args.position(number), depth_no)
            needle, question, golds = needle.replace("{CHAR}", character), question.replace("{CHAR}", character), [character]
        head, tail = test["template"].format(haystack=_SLOT, question=question).split(_SLOT)
        layout = EssayLayout(self.book(number, ctx), [needle], [depths[depth_no]], ctx)

        system = self.args.system_prompt if ctx.renderer.system is None else None  # the run's own replaces it

        def build(n: int):
            context, realised = layout.context(n)
            text = head + context + tail
            return ctx.renderer.render([{"role": "system", "content": system}, {"role": "user", "content": text}]
                                       if system is not None else text), realised

        budget = length - self.max_new_tokens
        fitted = fit_units(budget=budget, build=build, estimate=layout.estimate, count=ctx.count, count_short=ctx.count_short,
                           state=self.fit_state(ctx, length), max_units=int(budget * 2), what=self.name)
        meta = {"test": test["name"], "book": number, "depth": depths[depth_no], "character": character, "system_prompt": system,
                "haystack_units": fitted.n,  # one needle's depths in one book share a cluster, as a niah grid's do
                "cluster": f"{self.name}:{length}:{test['name']}:{number}"}
        return self.make_sample(length=length, index=index, text=fitted.text, tokens=fitted.tokens, answers=golds,
                                depths=fitted.extra, meta=meta)

    def score(self, prediction: str, sample: Sample) -> float:
        return nolima_contains(prediction, sample.answers)


@register("task", "nolima/needles", args=NolimaArgs, version=1)
def nolima_needles(**args):
    return Nolima("nolima/needles", NolimaArgs(**args))


@register("task", "nolima/hard", args=NolimaArgs, version=1)
def nolima_hard(**args):
    return Nolima("nolima/hard", NolimaArgs(**{"needle_set": "needle_set_hard", **args}))
