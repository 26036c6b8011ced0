"""A content-addressed store of tool artifacts with a SQLite index.

Layout under ``GLOVEBOX_HOME``::

    blobs/sha256/<hex>.wasm      wasm artifacts, named by their digest, read-only
    blobs/sha256/<hex>.mcp-remote.json
                                 descriptors of remote MCP tools (never compiled;
                                 homes written by earlier releases hold them as
                                 ``<hex>.wasm``, which is still read)
    cache/compiled/              compiled components (see glovebox.registry._compiled)
    cache/staging.lock           held while temporary files exist (see glovebox.storage._staging)
    registry.sqlite              the index (WAL): tools and compiled-artifact hashes

Files enter and leave the store inside the index transaction that refers to
them. An artifact is staged in a temporary file, then renamed into place in
the transaction that commits its row, while the write lock (``BEGIN
IMMEDIATE``) is held; removal deletes the rows, and the blobs no remaining row
refers to, in one transaction too. So a crash never leaves a row pointing at a
missing or partial blob, and a removal racing a registration of the same
artifact never deletes the blob the new row needs. Concurrent writers in
several processes serialise. Readers see every committed change at their next
lookup (hot registration).
"""

from __future__ import annotations

import functools
import os
import sqlite3
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core._errors import InvalidManifest, ToolNotFound
from ..model._manifest import Manifest
from ..model._result import ToolInfo
from ..policy._patterns import match_name
from ..storage._sqlite import Database
from ..storage._staging import StagingLock, sweep_staging
from ..storage._walindex import WalIndex

if TYPE_CHECKING:
    import semver

__all__ = ["DESCRIPTOR_SUFFIX", "CompiledFile", "Registry", "version_key"]

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
#: Prefix of a file moved aside by a removal until its transaction commits.
_REMOVED = ".removed-"
#: The file name ending of a stored remote MCP tool descriptor (see ``glovebox.remote._proxy``).
DESCRIPTOR_SUFFIX = ".mcp-remote.json"
#: ``gc`` tells its progress after every this many files removed.
GC_PROGRESS_EVERY = 500


@dataclass(frozen=True)
class CompiledFile:
    """A compiled component staged on disk, to be moved into the cache with its index row."""

    fingerprint: str
    sha256: str
    staged: Path
    target: Path


def version_key(version: str) -> tuple[semver.Version, str]:
    """Sort key for versions: semver precedence (semver.org item 11), then the text.

    Pre-release identifiers compare as numbers when numeric; build metadata is
    not precedence, so ``1.0.0+build-7`` ranks with ``1.0.0`` and the text only
    breaks the tie. Every version a manifest accepts has a key, including the
    few its pattern lets through that strict semver refuses (``01.0.0``,
    ``1.0.0-a..b``, ``1.0.0+a+b``): the parts are split here and compared by semver.

    >>> sorted(["1.10.0", "1.2.0", "1.2.0-rc.10", "1.2.0-rc.2", "1.2.0+build-7"], key=version_key)
    ['1.2.0-rc.2', '1.2.0-rc.10', '1.2.0', '1.2.0+build-7', '1.10.0']
    """
    import semver  # on first sort, not by `import glovebox` (it costs ~10 ms)

    core, _, build = version.partition("+")
    release, _, pre = core.partition("-")
    major, minor, patch = (int(part) for part in release.split("."))
    return semver.Version(major, minor, patch, pre or None, build or None), version


class Registry:
    """Stores artifacts by digest and resolves ``name`` / ``name@version``."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.blob_dir = home / "blobs" / "sha256"
        self.blob_dir.mkdir(parents=True, exist_ok=True)
        self.compiled_dir = home / "cache" / "compiled"
        self.staging = StagingLock(home / "cache" / "staging.lock")
        self._database = Database(home / "registry.sqlite", _SCHEMA)
        #: Resolved refs per pooled connection, with the ``data_version`` they were read at.
        self._caches: dict[sqlite3.Connection, tuple[int, dict[str, ToolInfo]]] = {}
        #: The index's change signal, and the newest answers with the signal they are valid at.
        self._wal_index = WalIndex(home / "registry.sqlite")
        self._latest: tuple[bytes, dict[str, ToolInfo]] | None = None
        #: Parsed rows of the last full listing: a registry past ``_info``'s cache is not re-parsed per listing.
        self._listed: dict[Row, ToolInfo] = {}

    def close(self) -> None:
        """Close every database connection this registry opened."""
        self._database.close()
        self._wal_index.close()
        self._caches.clear()
        self._latest = None

    def _rows(self, query: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """Every row ``query`` answers, read on a borrowed connection."""
        with self._database.connection() as db:
            return db.execute(query, params).fetchall()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        try:
            with self._database.write() as db:
                yield db
        finally:
            self._caches.clear()
            self._latest = None

    # -- blobs ---------------------------------------------------------------

    def blob_path(self, digest: str) -> Path:
        """Where the wasm artifact with ``digest`` (``sha256:<hex>``) is stored."""
        return self.blob_dir / f"{digest.removeprefix('sha256:')}.wasm"

    def descriptor_path(self, digest: str) -> Path:
        """Where the remote MCP tool descriptor with ``digest`` is stored.

        ``<hex>.mcp-remote.json``; a home written by an earlier release holds it
        as ``<hex>.wasm``, which is answered when only that file exists.
        """
        current = self._descriptor_target(digest)
        legacy = self.blob_path(digest)
        return legacy if not current.exists() and legacy.exists() else current

    def _descriptor_target(self, digest: str) -> Path:
        return self.blob_dir / f"{digest.removeprefix('sha256:')}{DESCRIPTOR_SUFFIX}"

    def stage_blob(self, data: bytes) -> Path:
        """Write an artifact to a temporary file beside the blobs (``add`` moves it into place).

        Hold ``staging.shared()`` until the file is moved or deleted.
        """
        fd, tmp = tempfile.mkstemp(dir=self.blob_dir, suffix=".part")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o444)
        return Path(tmp)

    # -- compiled artifacts --------------------------------------------------

    def compiled_hash(self, digest: str, fingerprint: str) -> str | None:
        """The recorded SHA-256 of a compiled artifact, if one was recorded."""
        rows = self._rows("SELECT sha256 FROM compiled WHERE digest = ? AND fingerprint = ?", (digest, fingerprint))
        return str(rows[0][0]) if rows else None

    def adopt_compiled(self, digest: str, compiled: CompiledFile) -> bool:
        """Move a staged compiled component into the cache and record its hash, if a tool still uses ``digest``.

        Returns:
            Whether it was adopted; when no tool uses the artifact any more
            (it was removed meanwhile) the staged file is deleted instead.
        """
        with self._write() as db:
            if not self.references(digest):
                compiled.staged.unlink(missing_ok=True)
                return False
            os.replace(compiled.staged, compiled.target)
            db.execute(
                "INSERT OR REPLACE INTO compiled VALUES (?, ?, ?)", (digest, compiled.fingerprint, compiled.sha256)
            )
        return True

    # -- tools ---------------------------------------------------------------

    def check_conflict(self, manifest: Manifest, digest: str) -> tuple[str, str] | None:
        """The existing (digest, manifest) row for name@version; refuses a different one."""
        query = "SELECT digest, manifest FROM tools WHERE name = ? AND version = ?"
        rows = self._rows(query, (manifest.name, manifest.version))
        row: tuple[str, str] | None = rows[0] if rows else None
        if row is not None and (row[0], row[1]) != (digest, manifest.to_json()):
            raise InvalidManifest(
                f"{manifest.name}@{manifest.version} is already registered with a different "
                f"artifact or manifest ({row[0]}); bump the version",
                details={"name": manifest.name, "version": manifest.version, "digest": row[0]},
            )
        return row

    def add(
        self,
        manifest: Manifest,
        digest: str,
        size_bytes: int,
        signer: str | None = None,
        *,
        blob: Path | None = None,
        compiled: CompiledFile | None = None,
    ) -> ToolInfo:
        """Index a tool version, moving its staged blob and compiled file into place in the same transaction.

        Re-registering the same name@version is allowed only with the same
        artifact and manifest (then only the files are refreshed).

        Raises:
            InvalidManifest: name@version is registered with another artifact or manifest.
            FileNotFoundError: no ``blob`` was given and the artifact is not stored.
        """
        return self.add_many([manifest], digest, size_bytes, signer, blob=blob, compiled=compiled)[0]

    def add_many(
        self,
        manifests: list[Manifest],
        digest: str,
        size_bytes: int,
        signer: str | None = None,
        *,
        blob: Path | None = None,
        compiled: CompiledFile | None = None,
        deprecate: dict[str, str] | None = None,
    ) -> list[ToolInfo]:
        """``add`` for several tool versions of one artifact, all or none, in one transaction.

        ``deprecate`` maps ``name@version`` refs to a message; they are marked
        deprecated in the same transaction.

        Raises:
            InvalidManifest: a name@version is registered with another artifact or manifest
                (then nothing is added).
            FileNotFoundError: no ``blob`` was given and the artifact is not stored.
        """
        now = datetime.now(UTC).isoformat(timespec="milliseconds")
        added: dict[str, ToolInfo] = {}
        with self._write() as db:
            for manifest in manifests:
                if self.check_conflict(manifest, digest) is None:
                    db.execute(
                        f"INSERT INTO tools ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
                        (manifest.name, manifest.version, digest, manifest.to_json(), size_bytes, now, signer),
                    )
                    added[f"{manifest.name}@{manifest.version}"] = ToolInfo(
                        manifest=manifest, digest=digest, registered_at=now, size_bytes=size_bytes, signer=signer
                    )
            _deprecate(db, deprecate or {})
            if blob is not None:
                os.replace(blob, self.blob_path(digest))
            elif not self.blob_path(digest).is_file():
                raise FileNotFoundError(f"artifact {digest} is not stored")
            if compiled is not None:
                os.replace(compiled.staged, compiled.target)
                db.execute(
                    "INSERT OR REPLACE INTO compiled VALUES (?, ?, ?)", (digest, compiled.fingerprint, compiled.sha256)
                )
        # What was just written is known: parsing every manifest back would double a large import's memory.
        refs = [f"{manifest.name}@{manifest.version}" for manifest in manifests]
        return [added[ref] if ref in added and ref not in (deprecate or {}) else self.resolve(ref) for ref in refs]

    def add_descriptors(
        self, entries: Sequence[tuple[Manifest, str, Path]], deprecate: dict[str, str]
    ) -> list[ToolInfo]:
        """Index artifact-less tools (manifest, digest, staged descriptor) and deprecate others, in one transaction.

        Each staged descriptor is moved to ``<hex>.mcp-remote.json`` once every
        row is in; ``deprecate`` maps ``name@version`` refs to a message. All
        of it commits or none of it does: a refused row moves no file, and a
        descriptor moved into place by a transaction that then fails is left
        for ``collect_garbage``.

        Raises:
            InvalidManifest: a name@version is registered with another artifact or manifest.
        """
        now = datetime.now(UTC).isoformat(timespec="milliseconds")
        with self._write() as db:
            for manifest, digest, blob in entries:
                if self.check_conflict(manifest, digest) is None:
                    db.execute(
                        f"INSERT INTO tools ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, NULL, NULL)",
                        (manifest.name, manifest.version, digest, manifest.to_json(), blob.stat().st_size, now),
                    )
            _deprecate(db, deprecate)
            for _, digest, blob in entries:
                os.replace(blob, self._descriptor_target(digest))
        return [self._resolve(f"{manifest.name}@{manifest.version}") for manifest, _, _ in entries]

    def references(self, digest: str) -> bool:
        """Whether any registered tool version uses the artifact ``digest`` (read fresh)."""
        return bool(self._rows("SELECT 1 FROM tools WHERE digest = ? LIMIT 1", (digest,)))

    def references_settled(self, digest: str) -> bool:
        """``references``, read under the write lock: once no removal or registration is half done.

        A removal moves an artifact's files aside before its transaction commits (and
        puts them back before it lets go of the lock when it fails), so a reader that
        finds a blob missing asks here: the answer and the files on disk then agree.
        """
        with self._database.write() as db:
            return bool(db.execute("SELECT 1 FROM tools WHERE digest = ? LIMIT 1", (digest,)).fetchone())

    def entries(
        self, pattern: str | None = None, *, include_deprecated: bool = True, signed: bool | None = None
    ) -> list[ToolInfo]:
        """Registered tool versions, by name, newest first, optionally filtered.

        Args:
            pattern: an fnmatch pattern over names (``"text-*"``).
            include_deprecated: list deprecated versions too.
            signed: True for signed versions only, False for unsigned only.
        """
        listed = self._listed
        parsed = {row: listed.get(row) or _info(row) for row in self._rows(f"SELECT {_COLUMNS} FROM tools")}
        self._listed = parsed  # only the rows there are now: a removed tool's entry goes
        by_name: dict[str, list[ToolInfo]] = {}
        for info in parsed.values():
            if (
                (pattern is None or match_name(pattern, info.name))
                and (include_deprecated or info.deprecated is None)
                and (signed is None or (info.signer is not None) == signed)
            ):
                by_name.setdefault(info.name, []).append(info)
        infos: list[ToolInfo] = []
        for name in sorted(by_name):  # semver keys only where a name has versions to order
            versions = by_name[name]
            if len(versions) > 1:
                versions.sort(key=lambda info: version_key(info.version), reverse=True)
            infos.extend(versions)
        return infos

    def resolve(self, ref: str) -> ToolInfo:
        """Find ``name@version``, or the newest non-deprecated version of ``name``.

        Answers are cached until the index changes. While the index's
        wal-index header (see ``_walindex``) reads as it did when an answer
        was cached, nothing has committed since, and the answer is given
        without touching the database. Otherwise the answer comes from a
        pooled connection's cache: SQLite's ``data_version`` moves on a
        connection whenever another connection (of this pool, another
        registry or another process) commits, and this registry's own writes
        clear every cache.
        """
        stamp = self._wal_index.stamp()  # read first: answers read after it are at least as new
        latest = self._latest
        if stamp is not None and latest is not None and latest[0] == stamp:
            hit = latest[1].get(ref)
            if hit is not None:
                return hit
        with self._database.connection() as db:
            version = db.execute("PRAGMA data_version").fetchone()[0]
            cached = self._caches.get(db)
            if cached is None or cached[0] != version:
                cached = self._caches[db] = (version, {})
            hit = cached[1].get(ref)
            if hit is None:
                hit = cached[1][ref] = self._resolve(ref)  # read on this same connection
            if stamp is not None:
                self._latest = (stamp, cached[1])
            return hit

    def _versions(self, ref: str) -> list[ToolInfo]:
        name, _, version = ref.partition("@")
        rows = self._rows(f"SELECT {_COLUMNS} FROM tools WHERE name = ?", (name,))
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
        return [row[0] for row in self._rows("SELECT DISTINCT name FROM tools ORDER BY name")]

    def remove(self, ref: str) -> list[ToolInfo]:
        """Remove ``name@version`` (or every version of ``name``); drop unreferenced blobs.

        The rows and the files no remaining row refers to go in one
        transaction: the files are moved aside before it commits, deleted
        after, and put back if it fails.
        """
        moved: list[tuple[Path, Path]] = []
        with self._write() as db:
            try:
                removed = self._versions(ref)
                for info in removed:
                    db.execute("DELETE FROM tools WHERE name = ? AND version = ?", (info.name, info.version))
                for digest in {info.digest for info in removed}:
                    if not self.references(digest):
                        db.execute("DELETE FROM compiled WHERE digest = ?", (digest,))
                        stored = [self.blob_path(digest), self._descriptor_target(digest)]
                        _set_aside([*stored, *self._compiled_files(digest)], moved)
            except BaseException:
                for original, aside in moved:  # back in place before the write lock is let go
                    os.replace(aside, original)
                raise
        for _, aside in moved:
            aside.unlink(missing_ok=True)
        return removed

    def _compiled_files(self, digest: str) -> list[Path]:
        return list(self.compiled_dir.glob(f"{digest}-*.cwasm"))

    def gc(self, progress: Callable[[str], None] | None = None) -> list[Path]:
        """Delete leftovers (see ``sweep_leftovers`` and ``collect_garbage``); return what went.

        ``progress`` is told each step: the sweep, what is checked, and every
        :data:`GC_PROGRESS_EVERY` files removed.
        """
        say = progress or (lambda line: None)
        say("gc: sweeping what interrupted registrations staged")
        swept = self.sweep_leftovers()
        return swept + self.collect_garbage(say)

    def sweep_leftovers(self) -> list[Path]:
        """Delete staged files of dead registrations and rebuilds; none while one is live."""
        return sweep_staging(self.staging, self.blob_dir, self.compiled_dir) or []

    def collect_garbage(self, progress: Callable[[str], None] | None = None) -> list[Path]:
        """Delete stored files no registered tool refers to; return them.

        Blobs, compiled components and their index rows whose artifact no tool
        version uses (left by an interrupted removal or by older releases), and
        files a removal set aside but did not get to delete. Runs under the
        write lock, so nothing is registered or removed meanwhile.
        """
        with self._write() as db:
            used = {row[0] for row in db.execute("SELECT DISTINCT digest FROM tools")}
            db.execute(f"DELETE FROM compiled WHERE digest NOT IN ({','.join('?' * len(used))})", tuple(used))
            found = [*self.blob_dir.glob(_REMOVED + "*"), *self.compiled_dir.glob(_REMOVED + "*")]
            stored = [*self.blob_dir.glob("*.wasm"), *self.blob_dir.glob("*" + DESCRIPTOR_SUFFIX)]
            blobs = [path for path in stored if not path.name.startswith(".")]
            found += [path for path in blobs if "sha256:" + path.name.partition(".")[0] not in used]
            compiled = list(self.compiled_dir.glob("sha256:*.cwasm"))
            found += [path for path in compiled if _cwasm_digest(path) not in used]
            say = progress or (lambda line: None)
            say(
                f"gc: {len(blobs) + len(compiled)} stored files checked against {len(used)} registered "
                f"artifacts; {len(found)} to remove ({_size(found)})"
            )
            for count, path in enumerate(found, 1):
                path.unlink(missing_ok=True)
                if count % GC_PROGRESS_EVERY == 0 and count < len(found):
                    say(f"gc: removed {count} of {len(found)}")
        return found

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

    def deprecate_many(self, refs: dict[str, str]) -> None:
        """Mark each ``name@version`` in ``refs`` deprecated with its message, in one transaction."""
        with self._write() as db:
            _deprecate(db, refs)


def _size(paths: list[Path]) -> str:
    """The total size of ``paths`` for a person (files already gone count 0)."""
    total = 0
    for path in paths:
        try:
            total += path.stat().st_size if path.is_file() else 0
        except OSError:
            pass
    return f"{total / 1e6:.1f} MB" if total >= 100_000 else f"{total / 1e3:.1f} kB"


def _deprecate(db: sqlite3.Connection, refs: dict[str, str]) -> None:
    """Mark each ``name@version`` in ``refs`` deprecated with its message (inside the caller's transaction)."""
    for ref, message in refs.items():
        name, _, version = ref.partition("@")
        db.execute("UPDATE tools SET deprecated = ? WHERE name = ? AND version = ?", (message, name, version))


def _set_aside(paths: list[Path], moved: list[tuple[Path, Path]]) -> None:
    for path in paths:
        aside = path.with_name(f"{_REMOVED}{uuid.uuid4().hex}-{path.name}")
        try:
            os.replace(path, aside)
        except FileNotFoundError:
            continue
        moved.append((path, aside))


def _cwasm_digest(path: Path) -> str:
    """``sha256:<hex>`` from ``sha256:<hex>-<fingerprint>.cwasm``."""
    return path.name.partition("-")[0]


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
