"""The one synthesis skeleton: every data method (the CPT packings, hierarchical-QA, LOGO, a plugin's) runs through it.

A method is registered in the one registry under kind "synthesis" (`register_synthesis`): its config model, how
its identity is computed, and the step that writes the data. `synthesize(method, config)` then does what every
method needs alike:

- identity: a hash of (the config minus where and how it is written, the input data's identity, the generator's
  fingerprint), stored in the manifest part by part;
- reuse: a finished out_dir of the same identity is returned as is, with no lock and no work;
- refuse: an out_dir holding another identity (finished or not) is refused in one line naming what differs;
- one writer: the method's step runs under the out_dir's lock and resumes what an interrupted run left.

A method declares what it `produces` (any name for its kind of data) and the `trainer` that trains on it (so how a
study compares it): "packed" token sequences and "text" (JSON-lines shards of {"text": str} rows listed in the
manifest's `shards`, which cpt packs with the standard packing) are trained by cpt, "hqa" by hqa_sft, "logo" by logo;
a plugin's trainer with a new kind of data declares both on its method and touches nothing here. None: no trainer
reads it.

Every manifest.json carries the same envelope: `schema` (SCHEMA, versioned), `method`, `identity`, `complete`
and `drops` (counts by reason); each method adds its own fields beside it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ctxbench.harness.core import registry
from ctxbench.harness.core.errors import ConfigError

SCHEMA = "ctxbench-synthesis/1"
MANIFEST = "manifest.json"


def content_hash(obj: Any) -> str:
    """The one hash of synthesis identities: harness/core/identity.content_hash, 16 hex digits."""
    from ctxbench.harness.core.identity import content_hash as identity_hash

    return identity_hash(obj, default=str)


@dataclass(frozen=True)
class Identity:
    """What the data depends on, part by part, so a refusal can say which part changed."""

    config: str
    inputs: str
    generator: str | None = None

    @property
    def hash(self) -> str:
        return content_hash([self.config, self.inputs, self.generator])

    def as_dict(self) -> dict[str, Any]:
        return {"hash": self.hash, "config": self.config, "inputs": self.inputs, "generator": self.generator}


def files_identity(files: list[Path], root: Path) -> list[tuple[str, str]]:
    """The content of input files: (name relative to root, sha256 of the content) each, so moving or copying the data
    keeps its identity and an edit of the same size changes it (digests memoised by path, size and times)."""
    from ctxbench.harness.core.models import file_digest

    return [(str(f.relative_to(root)) if f != root else f.name, file_digest(f)) for f in files]


def identity(config: Mapping[str, Any], inputs: Any = None, generator: str | None = None) -> Identity:
    """The identity of a synthesis from its config (dumped without where/how it is written), its input data's identity
    (file names, sizes and mtimes, or a corpus identity) and its generator's fingerprint (None: no generator)."""
    return Identity(content_hash(config), content_hash(inputs), generator)


@dataclass(frozen=True)
class SynthesisMethod:
    """A registered data method. `identity(config, **kw)` is computed before any work; `run(config, identity, **kw)`
    writes config.out_dir (resuming) and returns the manifest; `load(out_dir)` reads a finished one back. kw are the
    caller's run options (e.g. a progress callback), passed to both."""

    name: str
    config: type[BaseModel]
    identity: Callable[[Any], Identity]
    run: Callable[..., Any]
    load: Callable[[Path], Any]
    help: str
    args: type[BaseModel] | None = None  # method_args of a packing method (its config keys are SynthesisConfig's)
    extra: str | None = None  # the optional install its run needs (harness/core/extras.py), e.g. "train" for a tokenizer
    extra_modules: tuple[str, ...] | None = None  # the extra's modules it needs (default: all of the extra's)
    produces: str | None = None  # what kind of data it writes ("packed", "text", "hqa", a plugin's own); None: undeclared
    trainer: str | None = None  # the registered trainer that trains on it (a study's method trainer); None: none does

    def require_extra(self, *, for_: str) -> None:
        """Refuse `for_` in one line when the method's extra is missing: before anything is written or loaded."""
        if self.extra is not None:
            from ctxbench.harness.core.extras import require_extra

            require_extra(self.extra, modules=self.extra_modules, for_=for_)


def register_synthesis(name: str, config: type[BaseModel], *, identity: Callable[[Any], Identity],
                       load: Callable[[Path], Any] | None = None, args: type[BaseModel] | None = None,
                       help: str | None = None, extra: str | None = None, extra_modules: tuple[str, ...] | None = None,
                       produces: str | None = None, trainer: str | None = None):
    """Decorate a method's run step: registers it as synthesis method `name` (plugins use this too). `help` defaults
    to the first line of the run step's docstring; `load` to reading manifest.json as a dict; `extra` names the
    optional install the step needs (checked by the commands before they start); `produces` what it writes (any name;
    "text": JSON-lines {"text": str} rows, which cpt packs) and `trainer` the trainer that trains on it (default
    None: no trainer does, and no study can compare it)."""
    traits = {k: v for k, v in (("produces", produces), ("trainer", trainer)) if v is not None}

    def deco(run: Callable[..., Any]) -> Callable[..., Any]:
        doc = help or (run.__doc__ or "").strip().split("\n")[0]
        registry.register("synthesis", name, **traits)(SynthesisMethod(name, config, identity, run, load or read_manifest,
                                                                       doc, args, extra, extra_modules, produces, trainer))
        return run

    return deco


def get_synthesis(name: str, *, field: str = "method") -> SynthesisMethod:
    return registry.get("synthesis", name, field=field)  # type: ignore[return-value]


def synthesis_names() -> list[str]:
    return registry.names("synthesis")


def read_manifest(out_dir: str | Path) -> dict[str, Any] | None:
    path = Path(out_dir) / MANIFEST
    return json.loads(path.read_text()) if path.exists() else None


def envelope(method: str, ident: Identity, *, complete: bool = False, drops: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The fields every manifest carries (a dict manifest starts with them); drops are counts by reason, zero counts
    left out, sorted."""
    return {"schema": SCHEMA, "method": method, "identity": ident.as_dict(), "complete": complete,
            "drops": drop_counts(drops)}


def drop_counts(drops: Mapping[str, int] | None) -> dict[str, int]:
    """Drops as every manifest records them: reason -> count, zero counts left out, sorted by reason."""
    return dict(sorted((k, v) for k, v in (drops or {}).items() if v))


def _what_differs(found: Mapping[str, Any], ident: Identity) -> str | None:
    """None when `found` (a manifest) was written for `ident`; otherwise what differs, in words."""
    stored = found.get("identity")
    if found.get("schema") != SCHEMA or not isinstance(stored, Mapping):
        return f"was written by an older ctxbench (no {SCHEMA} manifest)"
    if stored.get("hash") == ident.hash:
        return None
    parts = [w for k, w in (("config", "config"), ("inputs", "input data"), ("generator", "generator"))
             if stored.get(k) != ident.as_dict()[k]]
    return f"holds a synthesis of another {' and '.join(parts) or 'identity'}"


def identity_or_older(out_dir: str | Path, ident: Identity, older: Identity) -> Identity:
    """`older`, the identity an older ctxbench gave the same synthesis (before the one identity rule left a generator's
    concurrency or tensor_parallel_size out of it), where out_dir holds data written under it: that data is reused or
    resumed, not refused. `ident` everywhere else."""
    if older.hash == ident.hash:
        return ident
    try:
        stored = (read_manifest(out_dir) or {}).get("identity")
    except (OSError, ValueError):
        return ident  # check_out_dir says what is wrong with it
    return older if isinstance(stored, Mapping) and stored.get("hash") == older.hash else ident


def check_out_dir(out_dir: str | Path, ident: Identity) -> dict[str, Any] | None:
    """The manifest in out_dir if it is ours (finished or not), None if there is none; anything else is refused."""
    found = read_manifest(out_dir)
    if found is None:
        return None
    why = _what_differs(found, ident)
    if why:
        raise ConfigError(f"out_dir: {out_dir} {why}; use another out_dir or delete it")
    return found


def synthesize(method: str | SynthesisMethod, config: BaseModel, **kwargs: Any) -> Any:
    """Reuse, refuse or (re)write config.out_dir for `method`; kwargs go to the method's run step."""
    from ctxbench.harness.core.locks import output_writer

    spec = get_synthesis(method) if isinstance(method, str) else method
    ident = spec.identity(config, **kwargs)  # bad input is refused here, before anything is written
    out = Path(config.out_dir)
    found = check_out_dir(out, ident)
    if found is not None and found.get("complete"):
        return spec.load(out)  # finished: nothing to write, no lock needed
    with output_writer(out, what=f"out_dir {out}", fix="wait for it to finish, or give another out_dir"):
        check_out_dir(out, ident)  # another process may have written it meanwhile
        return spec.run(config, ident, **kwargs)


def list_shard(out: Path, manifest: dict[str, Any], name: str, files: Mapping[str, Any]) -> None:
    """Write a shard's files (suffix -> text, bytes or a writer function; each atomically), then list the shard and
    rewrite the manifest atomically: a shard is listed only once all its files are in place, so an interrupted run
    never lists a torn one and a rerun knows where it stopped."""
    from ctxbench.harness.core.io import atomic_write, atomic_write_json

    for suffix, data in files.items():
        atomic_write(out / f"{name}{suffix}", data)
    manifest.setdefault("shards", []).append(name)
    atomic_write_json(out / MANIFEST, manifest)


def finish(out: Path, manifest: dict[str, Any], drops: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Mark the manifest complete (with its drops by reason) and write it: the out_dir is now reused as is."""
    from ctxbench.harness.core.io import atomic_write_json

    manifest.update(complete=True, drops=drop_counts(drops))
    atomic_write_json(out / MANIFEST, manifest)
    return manifest


def remove_unlisted(out: Path, listed: set[str], patterns: tuple[str, ...]) -> None:
    """Delete files matching `patterns` that the manifest does not list (left by a killed or an earlier run)."""
    for pattern in patterns:
        for f in out.glob(pattern):
            if f.name not in listed:
                f.unlink()
