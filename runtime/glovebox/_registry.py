"""A content-addressed store of tool artifacts with a SQLite index.

Layout under ``GLOVEBOX_HOME``::

    blobs/sha256/<hex>.wasm      artifacts, named by their digest, read-only
    cache/compiled/              compiled components (see glovebox._engine)
    registry.sqlite              the index (WAL): name, version, digest, manifest

An artifact is written to a temporary file and renamed into place, and its
index row is written in one transaction, so a crash never leaves a row
pointing at a missing or partial blob.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sqlite3
import tempfile
import threading
from datetime import UTC, datetime
from pathlib import Path

from ._errors import InvalidManifest, ToolNotFound
from ._manifest import Manifest
from ._result import ToolInfo

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
    PRIMARY KEY (name, version)
);
"""


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
        with self._db() as db:
            db.executescript(_SCHEMA)

    def _db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.home / "registry.sqlite", timeout=30, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
        return db

    def close(self) -> None:
        """Close this thread's database connection."""
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

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

    def add(self, manifest: Manifest, digest: str, size_bytes: int) -> ToolInfo:
        """Index a tool version. Re-registering the same name@version is allowed
        only with the same artifact and manifest (then it is a no-op)."""
        now = datetime.now(UTC).isoformat(timespec="milliseconds")
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            row = self.check_conflict(manifest, digest)
            if row is None:
                db.execute(
                    "INSERT INTO tools (name, version, digest, manifest, size_bytes, registered_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (manifest.name, manifest.version, digest, manifest.to_json(), size_bytes, now),
                )
            db.execute("COMMIT")
            self._local.cache = None
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return self.resolve(f"{manifest.name}@{manifest.version}")

    def check_conflict(self, manifest: Manifest, digest: str) -> tuple[str, str] | None:
        """The existing (digest, manifest) row for name@version; refuses a different one."""
        row: tuple[str, str] | None = (
            self._db()
            .execute(
                "SELECT digest, manifest FROM tools WHERE name = ? AND version = ?", (manifest.name, manifest.version)
            )
            .fetchone()
        )
        if row is not None and (row[0], row[1]) != (digest, manifest.to_json()):
            raise InvalidManifest(
                f"{manifest.name}@{manifest.version} is already registered with a different "
                f"artifact or manifest ({row[0]}); bump the version",
                details={"name": manifest.name, "version": manifest.version, "digest": row[0]},
            )
        return row

    def entries(self) -> list[ToolInfo]:
        """Every registered tool version, by name, newest version first."""
        rows = self._db().execute("SELECT name, version, digest, manifest, size_bytes, registered_at FROM tools")
        infos = [_info(row) for row in rows]
        infos.sort(key=lambda info: version_key(info.version), reverse=True)
        infos.sort(key=lambda info: info.name)
        return infos

    def resolve(self, ref: str) -> ToolInfo:
        """Find ``name@version``, or the newest version of ``name``.

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

    def _resolve(self, ref: str) -> ToolInfo:
        name, _, version = ref.partition("@")
        query = "SELECT name, version, digest, manifest, size_bytes, registered_at FROM tools WHERE name = ?"
        rows = [_info(row) for row in self._db().execute(query, (name,))]
        if version:
            rows = [info for info in rows if info.version == version]
        if not rows:
            raise ToolNotFound(_not_found_message(ref, self.names()), details={"tool": ref})
        return max(rows, key=lambda info: version_key(info.version))

    def names(self) -> list[str]:
        """Registered tool names."""
        return [row[0] for row in self._db().execute("SELECT DISTINCT name FROM tools ORDER BY name")]


@functools.lru_cache(maxsize=4096)
def _info(row: tuple[str, str, str, str, int, str]) -> ToolInfo:
    # Rows are immutable once written, so parsing (and re-checking the
    # schemas of) a manifest happens once per row, not once per call.
    manifest = Manifest.model_validate_json(row[3])
    return ToolInfo(manifest=manifest, digest=row[2], registered_at=row[5], size_bytes=row[4])


def _not_found_message(ref: str, names: list[str]) -> str:
    if not names:
        return f"no tool named {ref!r} is registered (the registry is empty)"
    shown = ", ".join(names[:20]) + (", …" if len(names) > 20 else "")
    return f"no tool named {ref!r} is registered; available: {shown}"
