"""A content-addressed artifact cache: a warm re-run lowers nothing.

The key hashes everything that can change an artifact: the case definition (id, inputs,
seed, precision, the factory and its arguments, the source of the factory's module), the
flow and chipset, the torch / executorch / SDK versions and hil's own lowering code. Entries
are built in a private temporary folder and renamed into place, so concurrent runs sharing
a cache never see half an entry; every file's sha256 is recorded and checked on use, so a
corrupted entry is detected, removed and rebuilt.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import inspect
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from hil.cases.case import Case, ModuleRef
from hil.files import read_file
from hil.lower.artifact import META_FILE, Artifact, TensorMeta

log = logging.getLogger(__name__)

CHECKSUMS_FILE = "sha256.json"
LOWER_SOURCES = Path(__file__).parent
"""hil's lowering code: a change to it invalidates every entry..."""
NOT_SHAPING_ARTIFACTS = frozenset({"pool.py"})
"""...except to these files, which decide where a case is lowered, not what it lowers to."""


_NOT_IN_ARTIFACT = {"tolerance", "tags", "file", "line", "expect_delegated", "expect", "skip",
                    "tolerance_rule", "atol_scale_steps", "require_delegation"}
"""Case fields that judge an artifact but do not change it: not part of the key."""


def default_cache_dir() -> Path:
    """`$HIL_CACHE_DIR`, else `$XDG_CACHE_HOME/exynos-hil/artifacts` (`~/.cache/...`)."""
    if os.environ.get("HIL_CACHE_DIR"):
        return Path(os.environ["HIL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "exynos-hil" / "artifacts"


def _file_digest(path: Path) -> str:
    return hashlib.sha256(read_file(path)).hexdigest()


@functools.lru_cache(maxsize=64)
def _source_digest(path: str) -> str:
    try:
        return _file_digest(Path(path))
    except OSError:
        return "unreadable"


def _describe_factory(factory: Callable[[], Any]) -> dict[str, Any]:
    """A stable description of a factory: what it calls, with what, and that code's hash."""
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    while isinstance(factory, functools.partial):
        args = factory.args + args
        kwargs = {**factory.keywords, **kwargs}
        factory = factory.func
    try:
        name, source_sha256 = _describe_callable(factory)
    except TypeError:  # not hashable: described afresh
        name, source_sha256 = _describe_callable.__wrapped__(factory)
    return {
        "callable": name,
        "args": [_describe_arg(a) for a in args],
        "kwargs": {k: _describe_arg(v) for k, v in sorted(kwargs.items())},
        "source_sha256": source_sha256,
    }


@functools.lru_cache(maxsize=4096)
def _describe_callable(function: Callable[..., Any]) -> tuple[str, str | None]:
    """`module:qualname` of what a factory calls, and the digest of the file defining it:
    the same few functions stand behind every case of a suite, and `inspect.getsourcefile`
    (through torch's patched `inspect.getfile`) cost a case's key about half its time."""
    try:
        source = inspect.getsourcefile(function) or ""
    except TypeError:
        source = ""
    name = getattr(function, "__qualname__", repr(function))
    return (f"{getattr(function, '__module__', '?')}:{name}",
            _source_digest(source) if source else None)


def _describe_ref(ref: ModuleRef) -> dict[str, Any]:
    """A ModuleRef without importing it: its names, and for hil's own modules the digest of
    the file that defines it (found, not run); other packages' code is covered by their
    versions in `_environment_digest` (torch's, executorch's)."""
    source = None
    if ref.module == "hil" or ref.module.startswith("hil."):
        spec = importlib.util.find_spec(ref.module)
        source = _source_digest(spec.origin) if spec is not None and spec.origin else "unreadable"
    return {"ref": f"{ref.module}:{ref.name}", "source_sha256": source}


def _describe_arg(value: Any) -> Any:
    if isinstance(value, ModuleRef):
        return _describe_ref(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            "type": type(value).__qualname__,
            **{f.name: _describe_arg(getattr(value, f.name)) for f in dataclasses.fields(value)},
        }
    if isinstance(value, (list, tuple)):
        return [_describe_arg(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _describe_arg(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if callable(value):
        return _describe_factory(value)
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))  # no memory addresses in a key


@functools.lru_cache(maxsize=1)
def _environment_digest() -> str:
    from hil.lower.rig import RIG_DISTRIBUTION
    from hil.sdk import find_litecore

    parts: dict[str, Any] = {}
    for package in ("torch", "executorch", "exynos-hil", RIG_DISTRIBUTION):
        try:
            parts[package] = version(package)
        except PackageNotFoundError:
            parts[package] = None
    sdk = find_litecore()
    parts["sdk"] = str(sdk.root) if sdk else None
    parts["lower_code"] = {
        p.name: _file_digest(p) for p in sorted(LOWER_SOURCES.glob("*.py"))
        if p.name not in NOT_SHAPING_ARTIFACTS
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def cache_key(case: Case, flow: str, chipset: str) -> str:
    """The content address of `case` lowered for `flow` on `chipset`."""
    described = {
        field.name: _describe_arg(getattr(case, field.name))
        for field in dataclasses.fields(case)
        if field.name not in _NOT_IN_ARTIFACT
    }
    record = {
        "case": described,
        "flow": flow,
        "chipset": chipset,
        "environment": _environment_digest(),
    }
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=repr).encode()).hexdigest()


_NOT_IN_DEFINITION = {"file", "line"}
"""Where a case is written down, not what it is: not part of its definition's digest."""


def definition_digest(case: Case) -> str:
    """The sha256 of a case's definition as the key describes it (factories by their code's
    digest), the fields that judge it included: results.json `run.suites` hashes these."""
    described = {field.name: _describe_arg(getattr(case, field.name))
                 for field in dataclasses.fields(case) if field.name not in _NOT_IN_DEFINITION}
    return hashlib.sha256(json.dumps(described, sort_keys=True, default=repr).encode()).hexdigest()


def load_artifact(folder: Path, meta: bytes | None = None) -> Artifact:
    """An Artifact from its folder's meta.json (`meta`: its content, already read)."""
    record = json.loads(read_file(folder / META_FILE) if meta is None else meta)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(Artifact):
        value = record.get(field.name)
        if field.name == "folder":
            value = folder
        elif field.name in ("inputs", "outputs"):
            value = tuple(TensorMeta(m["dtype"], tuple(m["shape"])) for m in value)
        elif isinstance(value, list):
            value = tuple(value)
        values[field.name] = value
    return Artifact(**values)


class ArtifactCache:
    """Lowered artifacts by content address under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def get(self, key: str) -> Artifact | None:
        """The cached artifact, or None when absent or corrupted (a corrupted entry is removed)."""
        folder = self.root / key[:2] / key
        try:
            try:
                checksums = read_file(folder / CHECKSUMS_FILE)
            except (FileNotFoundError, NotADirectoryError):
                if not folder.is_dir():
                    return None  # no entry
                raise  # an entry without its checksums
            meta = None
            for name, digest in json.loads(checksums).items():
                content = read_file(folder / name)
                if hashlib.sha256(content).hexdigest() != digest:
                    raise ValueError(f"{name}: checksum mismatch")
                if name == META_FILE:
                    meta = content
            return load_artifact(folder, meta)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("artifact cache entry %s is corrupted (%s): rebuilding", key[:12], exc)
            shutil.rmtree(folder, ignore_errors=True)
            return None

    def put(self, key: str, build: Callable[[Path], Artifact]) -> Artifact:
        """Build an entry with `build(folder)` in a private folder, then rename it into place."""
        final = self.root / key[:2] / key
        final.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:12]}-", dir=final.parent))
        try:
            build(scratch)
            checksums = {
                p.name: _file_digest(p) for p in sorted(scratch.iterdir()) if p.is_file()
            }
            (scratch / CHECKSUMS_FILE).write_text(json.dumps(checksums, indent=1), encoding="utf-8")
            try:
                os.rename(scratch, final)
            except OSError:  # another run put the same entry first: use theirs
                shutil.rmtree(scratch, ignore_errors=True)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        artifact = self.get(key)
        if artifact is None:
            raise OSError(f"artifact cache entry {key[:12]} vanished after it was written")
        return artifact
