"""The generic guests, built once and cached: the HTTP-operation guest
(``guest/operation/operation.c``) and the SQL guest (``guest/sqlop/sqlop.c``).

Every imported operation runs one of these components, so all of them share one
artifact digest and one compiled component. It is built from the C source
shipped with the package (the ``build`` extra's Zig and wasm-tools) into the
build cache, under a name derived from the digest of its sources, so a
changed source (or SDK) builds anew and an unchanged one never does.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from ..core._errors import BuildError
from ..core._settings import build_cache_dir
from ..toolchains._build import build, sdk_dir

__all__ = ["cached_operation_guest", "cached_sql_guest", "operation_guest", "sql_guest"]

#: Each generic guest: its name, and its source under the SDK directory.
_GUESTS = {"operation": "operation/operation.c", "sqlop": "sqlop/sqlop.c"}


def _sources(name: str = "operation") -> list[Path]:
    sdk = sdk_dir()
    source = sdk / _GUESTS[name]
    if not source.is_file():
        raise BuildError(f"the generic {name} guest source is missing from this installation ({source})")
    headers = sorted(source.parent.glob("*.h"))  # what the guest includes beside it (the operation's encode.h)
    return [source, *headers, sdk / "c" / "glovebox.h", *sorted((sdk / "wit").glob("*.wit"))]


def cached_operation_guest(home: Path | None = None) -> Path | None:
    """The generic HTTP-operation guest if it was built already (never builds it)."""
    target = _target(home, _sources(), "operation")
    return target if target.is_file() else None


def cached_sql_guest(home: Path | None = None) -> Path | None:
    """The generic SQL guest if it was built already (never builds it)."""
    target = _target(home, _sources("sqlop"), "sqlop")
    return target if target.is_file() else None


def _target(home: Path | None, sources: list[Path], name: str = "operation") -> Path:
    """Where the guest built from ``sources`` is cached: named by the digest of the sources."""
    digest = hashlib.sha256()
    for path in sources:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return build_cache_dir(home) / f"{name}-{digest.hexdigest()[:24]}.wasm"


def operation_guest(home: Path | None = None) -> Path:
    """The built generic HTTP-operation guest: from the cache, or built now (a few seconds the first time).

    Raises:
        BuildError: the source is missing or the C toolchain (the ``build`` extra) is not installed.
    """
    return _built(home, "operation")


def sql_guest(home: Path | None = None) -> Path:
    """The built generic SQL guest (see :func:`operation_guest`)."""
    return _built(home, "sqlop")


def _built(home: Path | None, name: str) -> Path:
    sources = _sources(name)
    target = _target(home, sources, name)
    if target.is_file():
        return target
    cache = target.parent
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=f".{name}-") as tmp:
        built = build(sources[0], Path(tmp) / f"{name}.wasm")
        os.replace(built, target)  # atomic: a concurrent import sees the whole file or none
    return target
