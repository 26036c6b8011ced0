"""Compiled components on disk: made at registration, checked before they are loaded.

A compiled component is native code, so a file changed on disk must never be
loaded. Each one is named ``<digest>-<engine fingerprint>.cwasm`` (a wasmtime
upgrade or an engine-settings change misses the cache) and its SHA-256 is
recorded in the index when it is made; it is memory-mapped only when its hash
matches. A missing or mismatching file, or one the engine refuses to load, is
rebuilt from the artifact, whose own digest is checked first, in a
resource-limited child (``_compile``). A stored file that is not wasm (the
descriptor of a remote MCP tool, which a home written by an earlier release
keeps as ``<hex>.wasm``) is never compiled.

A call that resolved a tool just before another process removed it runs the
component if this process already holds it, and otherwise answers
``tool_not_found``: a missing artifact is ``internal_error`` only while a
registered tool still refers to it, read under the index's write lock (a
removal moves the files aside before it commits, so a plain read could still
see the row of a blob already gone).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import wasmtime
from wasmtime.component import Component

from ..core._canonical import file_digest
from ..core._errors import InternalError, InvalidArtifact, ToolNotFound
from ..engine._compile import precompile
from ..engine._engine import MAX_LOADED_COMPONENTS, SharedEngine
from ._registry import CompiledFile, Registry

if TYPE_CHECKING:
    from ..sandbox._native import NativeCore

__all__ = ["CompiledCache", "file_sha256"]

logger = logging.getLogger("glovebox")


def _save_native(component: Any, staged: Path) -> None:
    component.save(str(staged))


def file_sha256(path: Path) -> str:
    """SHA-256 hex digest of a file, read in chunks (the index stores it bare)."""
    return file_digest(path).removeprefix("sha256:")


class CompiledCache:
    """Compiled components for one registry, shared through the process engine."""

    def __init__(self, shared: SharedEngine, registry: Registry, directory: Path) -> None:
        self.shared = shared
        self.registry = registry
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._verified_blobs: set[str] = set()
        #: Native components by digest (False: it does not link natively), see ``native``.
        self._native: OrderedDict[str, Any] = OrderedDict()

    def path(self, digest: str) -> Path:
        return self.directory / f"{digest}-{self.shared.fingerprint}.cwasm"

    def staged(self, digest: str, compiled: Path) -> CompiledFile:
        """A freshly compiled file, hashed, ready to be moved into the cache by the registry."""
        return CompiledFile(self.shared.fingerprint, file_sha256(compiled), compiled, self.path(digest))

    def existing(self, digest: str) -> tuple[Component, CompiledFile | None] | None:
        """The component if it is already loaded or verified on disk; never compiles.

        Registering an artifact again (a large Python component compiles for
        seconds) reuses its compilation. When it is loaded in this process for
        another home only, a copy for this home's cache is staged too (hold
        ``registry.staging.shared()`` while it exists).
        """
        on_disk = self._verified_on_disk(digest)
        hit = self.shared.cached(digest)
        if hit is not None and not on_disk:
            staged = self._staging_path(digest)
            staged.write_bytes(hit.serialize())
            return hit, self.staged(digest, staged)
        if hit is not None:
            return hit, None
        if not on_disk:
            return None
        try:
            return self.shared.load(self.path(digest)), None
        except (OSError, wasmtime.WasmtimeError):
            return None  # removed meanwhile: compile it again

    def get(self, digest: str) -> Component:
        """The component for a registered artifact, once its blob is verified.

        The blob is re-hashed the first time this cache serves a digest, so a
        blob changed on disk after registration never runs; the compiled
        component then comes from memory, the checked disk cache, or is rebuilt.

        Raises:
            ToolNotFound: the artifact was removed (no tool uses it any more).
            InternalError: the artifact of a registered tool is missing or changed.
        """
        try:
            return self._get(digest)
        except (ToolNotFound, InternalError):
            raise
        except Exception as exc:
            if self.registry.references_settled(digest):
                raise
            raise _removed(digest) from exc

    def _get(self, digest: str) -> Component:
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

    def native(self, digest: str, core: NativeCore) -> Any | None:
        """The native core's pre-linked component for ``digest`` (after ``get``), or None when it has none.

        Compiled like the Python path's (a limited child, the hash recorded and checked before it is
        loaded) into ``<digest>-<core fingerprint>.cwasm``; a component that does not link
        natively (wasi:http, another capability's interface) is remembered as such and takes the Python
        path. What another home of the process loaded for the same digest (the blob checked here first,
        by ``get``) is reused, as the Python path shares its components through the engine: a home
        without the compiled file gets a copy of it (no second compile), and a file a home has is
        checked and rebuilt when it changed.
        """
        hit = self._native.get(digest)
        if hit is not None:
            return hit or None
        with self._lock:
            hit = self._native.get(digest)
            if hit is None:
                hit = core.loaded(digest)
                target = self.directory / f"{digest}-{core.fingerprint}.cwasm"
                if hit and not target.exists():  # loaded for another home: this one gets its copy
                    self._stage_native(digest, target, core, functools.partial(_save_native, hit))
                elif hit is None or (hit and not self._intact_native(digest, target, core)):
                    hit = self._load_native(digest, core) or False
                    core.keep(digest, hit, MAX_LOADED_COMPONENTS)
                self._native[digest] = hit
                while len(self._native) > MAX_LOADED_COMPONENTS:
                    self._native.popitem(last=False)
        return hit or None

    def _intact_native(self, digest: str, target: Path, core: NativeCore) -> bool:
        expected = self.registry.compiled_hash(digest, core.fingerprint)
        try:
            return expected is not None and file_sha256(target) == expected
        except OSError:
            return False

    def _load_native(self, digest: str, core: NativeCore) -> Any | None:
        target = self.directory / f"{digest}-{core.fingerprint}.cwasm"
        if not self._intact_native(digest, target, core):
            blob, settings = self.registry.blob_path(digest), self.shared.settings
            try:
                self._stage_native(
                    digest, target, core, lambda staged: precompile(blob, staged, settings, digest, native=True)
                )
            except InvalidArtifact as exc:  # compiled by wasmtime-py, refused here: run it there
                logger.warning("the native core cannot compile %s (%s); it runs on the Python path", digest, exc)
                return None
        return core.load(str(target))

    def _stage_native(self, digest: str, target: Path, core: NativeCore, write: Callable[[Path], object]) -> None:
        """Write the native compiled file for ``digest`` (``write(staged)``), hash it and move it into the cache."""
        with self.registry.staging.shared():
            staged = target.with_name(target.name + f".{os.getpid()}.{threading.get_ident()}")
            try:
                write(staged)
                adopted = self.registry.adopt_compiled(
                    digest, CompiledFile(core.fingerprint, file_sha256(staged), staged, target)
                )
            finally:
                staged.unlink(missing_ok=True)
        if not adopted:
            raise _removed(digest)

    def _verify_blob(self, digest: str) -> None:
        blob = self.registry.blob_path(digest)
        if _intact(blob, digest):
            return
        # Missing or changed. A removal in another process moves the blob aside before it
        # commits, so the index still names it: ask again once no write is half done.
        if not self.registry.references_settled(digest):
            raise _removed(digest)
        if _intact(blob, digest):  # put back by a removal that failed, or registered again
            return
        logger.error("artifact %s is missing or changed on disk; refusing to run it", digest)
        raise InternalError("the tool's artifact failed verification; it will not run")

    def _verified_on_disk(self, digest: str) -> bool:
        target = self.path(digest)
        expected = self.registry.compiled_hash(digest, self.shared.fingerprint)
        try:
            return expected is not None and file_sha256(target) == expected
        except OSError:
            return False  # missing, or removed while it was read

    def _staging_path(self, digest: str) -> Path:
        target = self.path(digest)
        return target.with_name(target.name + f".{os.getpid()}.{threading.get_ident()}")

    def _load(self, digest: str) -> Component:
        target = self.path(digest)
        if not self._verified_on_disk(digest):
            if target.is_file():
                logger.warning("compiled artifact %s does not match its recorded hash; rebuilding", target)
            self._rebuild(digest)
            return self.shared.load(target)
        try:
            return self.shared.load(target)
        except wasmtime.WasmtimeError as exc:
            # Intact but made with settings this engine refuses (one the cache
            # key did not cover): compile it again rather than fail every call.
            reason = str(exc).strip().splitlines()[-1].strip()
            logger.warning("compiled artifact %s does not load on this engine (%s); rebuilding", target, reason)
            self._rebuild(digest)
            return self.shared.load(target)

    def _rebuild(self, digest: str) -> None:
        # The blob was verified by get(): rebuild from it in a limited child.
        with self.registry.staging.shared():
            staged = self._staging_path(digest)
            try:
                precompile(self.registry.blob_path(digest), staged, self.shared.settings, digest)
                adopted = self.registry.adopt_compiled(digest, self.staged(digest, staged))
            finally:
                staged.unlink(missing_ok=True)
        if not adopted:
            raise _removed(digest)


def _intact(blob: Path, digest: str) -> bool:
    """Whether ``blob`` holds the artifact ``digest`` (False when it is missing); raises when it is not wasm."""
    try:
        if file_digest(blob) != digest:
            return False
        _check_wasm(blob, digest)
    except OSError:  # missing, or removed while it was read
        return False
    return True


def _check_wasm(blob: Path, digest: str) -> None:
    """Refuse to compile a stored file that is not wasm (a remote MCP tool's descriptor in an old home is ``.wasm``)."""
    with blob.open("rb") as handle:
        magic = handle.read(4)
    if magic != b"\0asm":
        logger.error("artifact %s is not wasm (a remote tool descriptor?); refusing to compile it", digest)
        raise InternalError("the tool's artifact is not a wasm component; it will not be compiled")


def _removed(digest: str) -> ToolNotFound:
    return ToolNotFound("the tool was removed before this call could run it", details={"digest": digest})
