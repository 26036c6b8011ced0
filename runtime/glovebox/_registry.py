"""A content-addressed store of tool artifacts with a SQLite index.

Layout under ``GLOVEBOX_HOME``::

    blobs/sha256/<hex>.wasm      artifacts, named by their digest, read-only
    cache/compiled/              compiled components (see glovebox._compiled)
    registry.sqlite              the index (WAL): tools and compiled-artifact hashes

An artifact is written to a temporary file and renamed into place before its
index row is committed, so a crash never leaves a row pointing at a missing
or partial blob. Writers take SQLite's write lock (``BEGIN IMMEDIATE``), so
two processes registering at once serialise instead of corrupting the index.
Readers see every committed change at their next lookup (hot registration).
"""

from __future__ import annotations

import functools
import hashlib
import os
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from ._errors import InvalidManifest, ToolNotFound
from ._manifest import Manifest
from ._result import ToolInfo
from ._sqlite import Database
from .policy._patterns import match_name

__all__ = ["Registry", "version_key"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tools (
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    digest TEXT NOT NULL,
    manifest TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    registered_at TEXT NOT NULL,
    signer TEXT,
    deprecated TEXT,
    PRIMARY KEY (name, version)
);
CREATE INDEX IF NOT EXISTS tools_digest ON tools (digest);
CREATE TABLE IF NOT EXISTS compiled (
    digest TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    PRIMARY KEY (digest, fingerprint)
);
"""
_COLUMNS = "name, version, digest, manifest, size_bytes, registered_at, signer, deprecated"
Row = tuple[str, str, str, str, int, str, str | None, str | None]


def version_key(version: str) -> tuple[int, int, int, int, str]:
    """Sort key for semantic versions: releases after their pre-releases.

    >>> sorted(["1.10.0", "1.2.0", "1.2.0-rc1"], key=version_key)
    ['1.2.0-rc1', '1.2.0', '1.10.0']
    """
    core, _, pre = version.partition("-")
    core = core.split("+", 1)[0]
    major, minor, patch = (int(part) for part in core.split("."))
    return (major, minor, patch, 0 if pre else 1, pre)


class Registry:
    """Stores artifacts by digest and resolves ``name`` / ``name@version``."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.blob_dir = home / "blobs" / "sha256"
        self.blob_dir.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._database = Database(home / "registry.sqlite", _SCHEMA)
        self._db = self._database.connection

    def close(self) -> None:
        """Close every database connection this registry opened."""
        self._database.close()
        self._local = threading.local()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        try:
            with self._database.write() as db:
                yield db
        finally:
            self._local.cache = None

    # -- blobs ---------------------------------------------------------------

    def blob_path(self, digest: str) -> Path:
        """Where the artifact with ``digest`` (``sha256:<hex>``) is stored."""
        return self.blob_dir / f"{digest.removeprefix('sha256:')}.wasm"

    def store_blob(self, data: bytes) -> str:
        """Write an artifact under its digest (idempotent); return the digest."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        target = self.blob_path(digest)
        if not target.exists():
            fd, tmp = tempfile.mkstemp(dir=self.blob_dir, suffix=".part")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o444)
            os.replace(tmp, target)
        return digest

    # -- compiled artifacts --------------------------------------------------

    def compiled_hash(self, digest: str, fingerprint: str) -> str | None:
        """The recorded SHA-256 of a compiled artifact, if one was recorded."""
        row = (
            self._db()
            .execute("SELECT sha256 FROM compiled WHERE digest = ? AND fingerprint = ?", (digest, fingerprint))
            .fetchone()
        )
        return str(row[0]) if row else None

    def record_compiled(self, digest: str, fingerprint: str, sha256: str) -> None:
        """Remember the SHA-256 of a compiled artifact (checked before it is loaded)."""
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO compiled VALUES (?, ?, ?)", (digest, fingerprint, sha256))

    # -- tools ---------------------------------------------------------------

    def check_conflict(self, manifest: Manifest, digest: str) -> tuple[str, str] | None:
        """The existing (digest, manifest) row for name@version; refuses a different one."""
        query = "SELECT digest, manifest FROM tools WHERE name = ? AND version = ?"
        row: tuple[str, str] | None = self._db().execute(query, (manifest.name, manifest.version)).fetchone()
        if row is not None and (row[0], row[1]) != (digest, manifest.to_json()):
            raise InvalidManifest(
                f"{manifest.name}@{manifest.version} is already registered with a different "
                f"artifact or manifest ({row[0]}); bump the version",
                details={"name": manifest.name, "version": manifest.version, "digest": row[0]},
            )
        return row

    def add(self, manifest: Manifest, digest: str, size_bytes: int, signer: str | None = None) -> ToolInfo:
        """Index a tool version. Re-registering the same name@version is allowed
        only with the same artifact and manifest (then it is a no-op)."""
        now = datetime.now(UTC).isoformat(timespec="milliseconds")
        with self._write() as db:
            if self.check_conflict(manifest, digest) is None:
                db.execute(
                    f"INSERT INTO tools ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
                    (manifest.name, manifest.version, digest, manifest.to_json(), size_bytes, now, signer),
                )
        return self.resolve(f"{manifest.name}@{manifest.version}")

    def entries(
        self, pattern: str | None = None, *, include_deprecated: bool = True, signed: bool | None = None
    ) -> list[ToolInfo]:
        """Registered tool versions, by name, newest first, optionally filtered.

        Args:
            pattern: an fnmatch pattern over names (``"text-*"``).
            include_deprecated: list deprecated versions too.
            signed: True for signed versions only, False for unsigned only.
        """
        infos = [_info(row) for row in self._db().execute(f"SELECT {_COLUMNS} FROM tools")]
        infos = [
            info
            for info in infos
            if (pattern is None or match_name(pattern, info.name))
            and (include_deprecated or info.deprecated is None)
            and (signed is None or (info.signer is not None) == signed)
        ]
        infos.sort(key=lambda info: version_key(info.version), reverse=True)
        infos.sort(key=lambda info: info.name)
        return infos

    def resolve(self, ref: str) -> ToolInfo:
        """Find ``name@version``, or the newest non-deprecated version of ``name``.

        Answers are cached per thread until the index changes: SQLite's
        ``data_version`` moves whenever another connection (another thread or
        process) commits, and this connection's own writes clear the cache.
        """
        cache = self._cache()
        hit = cache.get(ref)
        if hit is not None:
            return hit
        info = self._resolve(ref)
        cache[ref] = info
        return info

    def _cache(self) -> dict[str, ToolInfo]:
        version = self._db().execute("PRAGMA data_version").fetchone()[0]
        cache: dict[str, ToolInfo] | None = getattr(self._local, "cache", None)
        if cache is None or getattr(self._local, "cache_version", None) != version:
            cache = self._local.cache = {}
            self._local.cache_version = version
        return cache

    def _versions(self, ref: str) -> list[ToolInfo]:
        name, _, version = ref.partition("@")
        rows = self._db().execute(f"SELECT {_COLUMNS} FROM tools WHERE name = ?", (name,))
        infos = [_info(row) for row in rows]
        if version:
            infos = [info for info in infos if info.version == version]
        if not infos:
            raise ToolNotFound(_not_found_message(ref, self.names()), details={"tool": ref})
        return infos

    def _resolve(self, ref: str) -> ToolInfo:
        infos = self._versions(ref)
        current = [info for info in infos if info.deprecated is None] or infos
        return max(current, key=lambda info: version_key(info.version))

    def names(self) -> list[str]:
        """Registered tool names."""
        return [row[0] for row in self._db().execute("SELECT DISTINCT name FROM tools ORDER BY name")]

    def remove(self, ref: str) -> list[ToolInfo]:
        """Remove ``name@version`` (or every version of ``name``); drop unreferenced blobs."""
        with self._write() as db:
            removed = self._versions(ref)
            for info in removed:
                db.execute("DELETE FROM tools WHERE name = ? AND version = ?", (info.name, info.version))
        for digest in {info.digest for info in removed}:
            self._collect(digest)
        return removed

    def _collect(self, digest: str) -> None:
        with self._write() as db:
            if db.execute("SELECT 1 FROM tools WHERE digest = ?", (digest,)).fetchone():
                return
            db.execute("DELETE FROM compiled WHERE digest = ?", (digest,))
        self.blob_path(digest).unlink(missing_ok=True)
        for cached in (self.home / "cache" / "compiled").glob(f"{digest}-*.cwasm"):
            cached.unlink(missing_ok=True)

    def deprecate(self, ref: str, message: str) -> list[ToolInfo]:
        """Mark ``name@version`` (or every version of ``name``) deprecated with a message."""
        note = message.strip() or "deprecated"
        with self._write() as db:
            targets = self._versions(ref)
            for info in targets:
                db.execute(
                    "UPDATE tools SET deprecated = ? WHERE name = ? AND version = ?", (note, info.name, info.version)
                )
        return [self._resolve(f"{info.name}@{info.version}") for info in targets]


@functools.lru_cache(maxsize=4096)
def _info(row: Row) -> ToolInfo:
    # Rows are immutable while their values are unchanged, so parsing a manifest
    # happens once per row, not per call. Its schemas were checked at registration.
    manifest = Manifest.model_validate_json(row[3], context={"stored": True})
    return ToolInfo(
        manifest=manifest,
        digest=row[2],
        registered_at=row[5],
        size_bytes=row[4],
        signer=row[6],
        deprecated=row[7],
    )


def _not_found_message(ref: str, names: list[str]) -> str:
    if not names:
        return f"no tool named {ref!r} is registered (the registry is empty)"
    shown = ", ".join(names[:20]) + (", …" if len(names) > 20 else "")
    return f"no tool named {ref!r} is registered; available: {shown}"
