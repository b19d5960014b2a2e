"""The one cached model client: a ctxbench backend built on its first cache miss, behind a keyed JSON-lines cache.

Every model call that ctxbench pays for outside a scored run goes through `CachedClient`: data synthesis (hqa's
summaries and QAs, LOGO's replies and Quest's queries, by trainers/data/generator.py) and the LLM judge
(tasks/judge/task.py). It sits below tasks and trainers and imports only the core, so both may use it.

`KeyedCache` is the file: one JSON object per line with a `key`, appended and never rewritten. Every append takes
the file's lock (`.<file>.lock` beside it), cuts a torn last line that a killed writer left, and appends whole lines, so any
number of processes may share one file (every hqa synthesis on a machine shares its generator's file) and none
loses a row. A row marked `refused` (a judge verdict that could not be scored) is counted, never read back as an
answer. Files written before this module (by the old CallCache and JudgeCache) are read as they are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ctxbench.harness.core.errors import ConfigError, CtxbenchError


class KeyedCache:
    """Rows by key, read once (lazily) from an append-only JSON-lines file; appended under the file's lock."""

    def __init__(self, path: str | Path, *, require: tuple[str, ...] = ("key",)):
        self.path = Path(path)
        self.require = require  # a row without these fields is skipped with a warning naming file:line
        self._rows: dict[str, dict[str, Any]] | None = None
        self._refused: Counter[str] = Counter()

    @property
    def lock_path(self) -> Path:
        """A hidden file beside the cache (a cache kept in an output directory adds no listed file to it)."""
        return self.path.with_name(f".{self.path.name}.lock")

    def _lock(self):
        from filelock import FileLock

        self.path.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(str(self.lock_path))

    @property
    def rows(self) -> dict[str, dict[str, Any]]:
        """Every accepted row by key (the last one of a key wins)."""
        if self._rows is None:
            self._rows = {}
            if self.path.exists():
                from ctxbench.harness.core.io import cut_torn_tail, read_jsonl

                with self._lock():  # no other writer is half way through a line while we read
                    cut_torn_tail(self.path)
                    found = list(read_jsonl(self.path, require=self.require))
                for row in found:
                    self._remember(row)
        return self._rows

    def _remember(self, row: dict[str, Any]) -> None:
        if row.get("refused"):
            self._refused[row["key"]] += 1
        elif self._rows is not None:
            self._rows[row["key"]] = row

    def __contains__(self, key: str) -> bool:
        return key in self.rows

    def get(self, key: str) -> dict[str, Any] | None:
        """The accepted row of `key`, if any (a refused one never comes back)."""
        return self.rows.get(key)

    def refusals(self, key: str) -> int:
        """How many rows of `key` were refused so far."""
        _ = self.rows  # the file, read once
        return self._refused[key]

    def add(self, rows: Iterable[dict[str, Any]]) -> None:
        """Append rows (each with a `key`) in one write: under the lock, after cutting a torn last line."""
        rows = list(rows)
        if not rows:
            return
        from ctxbench.harness.core.io import append_jsonl, cut_torn_tail

        _ = self.rows  # read before writing, so the rows below are not counted twice
        with self._lock():
            cut_torn_tail(self.path)
            append_jsonl(self.path, rows)
        for row in rows:
            self._remember(row)

    def put(self, key: str, entry: Mapping[str, Any]) -> None:
        self.add([{"key": key, **entry}])

    def put_refused(self, key: str, entry: Mapping[str, Any]) -> None:
        self.add([{"key": key, **entry, "refused": True}])


class CachedClient:
    """A backend (by registry name, model and arguments) built on the first call that the cache cannot answer, so
    a run whose replies are all cached loads no model and opens no connection. A backend that cannot be built
    (a bad argument, an unreachable server) fails every later call of this process with the same error at once;
    a new process tries again."""

    def __init__(self, backend: str, model: str, backend_args: Mapping[str, Any], cache: KeyedCache, *,
                 field: str = "backend"):
        self.backend_name = backend
        self.model = model
        self.backend_args = dict(backend_args)
        self.cache = cache
        self.field = field  # the config field an unknown backend name is reported under
        self._backend: Any = None
        self._build_error: str | None = None

    def backend(self) -> Any:
        if self._build_error is not None:
            raise ConfigError(self._build_error)
        if self._backend is None:
            from ctxbench.harness.core import registry

            factory = registry.get("backend", self.backend_name, field=self.field)
            try:
                self._backend = factory(model=self.model, **self.backend_args)
            except CtxbenchError as e:
                self._build_error = str(e)
                raise
        return self._backend

    def generate(self, requests: list) -> list:
        """The backend's answers to requests (not cached here: the caller decides what an answer is worth keeping)."""
        return self.backend().generate(requests)
