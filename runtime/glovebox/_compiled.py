"""Compiled components on disk: made at registration, checked before they are loaded.

A compiled component is native code, so a file changed on disk must never be
loaded. Each one is named ``<digest>-<engine fingerprint>.cwasm`` (a wasmtime
upgrade or an engine-settings change misses the cache) and its SHA-256 is
recorded in the index when it is made; it is memory-mapped only when its hash
matches. A missing or mismatching file is rebuilt from the artifact, whose own
digest is checked first, in a resource-limited child (``_compile``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from pathlib import Path

from wasmtime.component import Component

from ._compile import precompile
from ._engine import SharedEngine
from ._errors import InternalError
from ._registry import Registry

__all__ = ["CompiledCache", "file_sha256"]

logger = logging.getLogger("glovebox")


def file_sha256(path: Path) -> str:
    """SHA-256 hex digest of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class CompiledCache:
    """Compiled components for one registry, shared through the process engine."""

    def __init__(self, shared: SharedEngine, registry: Registry, directory: Path) -> None:
        self.shared = shared
        self.registry = registry
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._verified_blobs: set[str] = set()

    def path(self, digest: str) -> Path:
        return self.directory / f"{digest}-{self.shared.fingerprint}.cwasm"

    def adopt(self, digest: str, compiled: Path) -> None:
        """Move a freshly compiled file into the cache and record its hash."""
        target = self.path(digest)
        sha = file_sha256(compiled)
        os.replace(compiled, target)
        self.registry.record_compiled(digest, self.shared.fingerprint, sha)

    def existing(self, digest: str) -> Component | None:
        """The component if it is already loaded or verified on disk; never compiles.

        Registering an artifact again (a large Python component compiles for
        seconds) reuses its compilation.
        """
        on_disk = self._verified_on_disk(digest)
        hit = self.shared.cached(digest)
        if hit is not None and not on_disk:
            # Loaded in this process for another home: give this home its own copy.
            staged = self._staging_path(digest)
            staged.write_bytes(hit.serialize())
            self.adopt(digest, staged)
        if hit is not None:
            return hit
        return self.shared.load(self.path(digest)) if on_disk else None

    def get(self, digest: str) -> Component:
        """The component for a registered artifact, once its blob is verified.

        The blob is re-hashed the first time this cache serves a digest, so a
        blob changed on disk after registration never runs; the compiled
        component then comes from memory, the checked disk cache, or is rebuilt.
        """
        if digest not in self._verified_blobs:
            self._verify_blob(digest)
            self._verified_blobs.add(digest)
        hit = self.shared.cached(digest)
        if hit is not None:
            return hit
        with self._lock:
            hit = self.shared.cached(digest)
            if hit is None:
                hit = self._load(digest)
                self.shared.remember(digest, hit)
        return hit

    def _verify_blob(self, digest: str) -> None:
        blob = self.registry.blob_path(digest)
        if not blob.is_file() or "sha256:" + file_sha256(blob) != digest:
            logger.error("artifact %s is missing or changed on disk; refusing to run it", digest)
            raise InternalError("the tool's artifact failed verification; it will not run")

    def _verified_on_disk(self, digest: str) -> bool:
        target = self.path(digest)
        expected = self.registry.compiled_hash(digest, self.shared.fingerprint)
        return target.is_file() and expected is not None and file_sha256(target) == expected

    def _staging_path(self, digest: str) -> Path:
        target = self.path(digest)
        return target.with_name(target.name + f".{os.getpid()}.{threading.get_ident()}")

    def _load(self, digest: str) -> Component:
        target = self.path(digest)
        if not self._verified_on_disk(digest):
            if target.is_file():
                logger.warning("compiled artifact %s does not match its recorded hash; rebuilding", target)
            # The blob was verified by get(): rebuild from it in a limited child.
            staged = self._staging_path(digest)
            precompile(self.registry.blob_path(digest), staged, self.shared.settings, digest)
            self.adopt(digest, staged)
        return self.shared.load(target)
