"""The ``files`` capability: one directory under the home, preopened for a WASI 0.2 component.

No directory is visible to a tool unless its manifest declares ``files`` (the
access it needs) and a policy grants it one (``files``: ``directory``, relative
to ``HOME/files``, ``access`` and ``quota_bytes``). The call then sees that
directory at ``/files`` (``wasi:filesystem/preopens``), read-only unless both say
``read_write``; with several matching grants the first applies. It has no host
functions of its own: WASI is the interface (``sandbox._wasi``).

Defences, each refusing the call's access with a recorded denial (a tool that
then fails answers ``capability_denied``):

- the grant's directory is a relative path of plain names (no ``..``, no
  absolute path: the policy is refused); resolved on disk, it must stay inside
  ``HOME/files`` (a symlink out of it is refused); it is created when missing;
- a regular file in it with more than one hard link is refused (it may alias a
  file outside the directory); wasmtime resolves every guest path inside the
  preopened directory, so ``..`` and symlinks pointing out fail inside the guest;
- the quota: wasmtime-py gives the host no hook on writes, so the directory's
  size (regular files' bytes, at most :data:`MAX_ENTRIES` entries) is measured
  while a read-write call runs, at every epoch tick (``sandbox._wasi.watch_quota``),
  and once more after it; a call that takes it over the quota and larger than it
  found it is stopped and fails with ``capability_denied`` (what it wrote stays:
  the overshoot is what it writes between two measures).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from ...core._frozen import Frozen
from ...model._capability import Capability

__all__ = ["CAPABILITY", "MAX_ENTRIES", "BoundFiles", "FilesCapability", "FilesGrant", "FilesRule"]

#: Entries a granted directory may hold (the hard-link and quota scans stop there).
MAX_ENTRIES = 10_000
_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")

Access = Literal["read", "read_write"]


class FilesRule(Frozen):
    """The directory access a tool declares it needs."""

    access: Access = Field("read", description="read: read only; read_write: create, write and delete too.")


class FilesGrant(Frozen):
    """A directory under ``HOME/files`` granted to matching calls."""

    directory: str = Field(description="A relative path under HOME/files (plain names, no '..').")
    access: Access = Field("read", description="read or read_write.")
    quota_bytes: int = Field(16 * 1024 * 1024, gt=0, description="Bytes of regular files the directory may hold.")

    @field_validator("directory")
    @classmethod
    def _plain(cls, value: str) -> str:
        parts = value.split("/")
        if value.startswith("/") or not all(_PART.match(part) for part in parts):
            raise ValueError("a relative path of plain names under HOME/files (no '..', no absolute path)")
        return value


@dataclass
class BoundFiles:
    """A call's directory (or the reason it has none), and its size before the call."""

    name: str  # the grant's directory, as the policy names it
    directory: Path | None
    writable: bool
    quota_bytes: int
    denied: str | None = None
    size_before: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    def after(self) -> str | None:
        """Why the call must fail after it ran (over its quota), or None."""
        if self.directory is None or not self.writable:
            return None
        size = directory_size(self.directory)
        if size > self.quota_bytes and size > self.size_before:
            self.details = {"directory": self.name, "bytes": size, "quota_bytes": self.quota_bytes}
            return f"the files directory holds {size} bytes after the call, over its quota of {self.quota_bytes}"
        return None


def directory_size(directory: Path) -> int:
    """Bytes of the regular files under ``directory`` (symlinks not followed); past MAX_ENTRIES, a huge number."""
    total, seen = 0, 0
    for root, dirs, files in os.walk(directory, followlinks=False):
        for name in files:
            seen += 1
            if seen > MAX_ENTRIES:
                return 2**62
            try:
                info = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if not os.path.islink(os.path.join(root, name)):
                total += info.st_size
        seen += len(dirs)
    return total


def _hard_linked(directory: Path) -> str | None:
    seen = 0
    for root, dirs, files in os.walk(directory, followlinks=False):
        seen += len(dirs) + len(files)
        if seen > MAX_ENTRIES:
            return f"the directory holds more than {MAX_ENTRIES} entries"
        for name in files:
            path = os.path.join(root, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if not os.path.islink(path) and info.st_nlink > 1:
                return (
                    f"{os.path.relpath(path, directory)} has {info.st_nlink} hard links (it may alias a file outside)"
                )
    return None


def resolve_directory(home: Path, relative: str) -> tuple[Path | None, str | None]:
    """The granted directory on disk (created when missing), or why it is refused."""
    base = (Path(home) / "files").resolve()
    target = base / relative
    try:
        base.mkdir(parents=True, exist_ok=True)
        if not target.exists() and not target.is_symlink():
            target.mkdir(parents=True, exist_ok=True)
        resolved = target.resolve(strict=True)
    except OSError as exc:
        return None, f"the directory {relative!r} cannot be used: {exc.strerror or exc}"
    if not resolved.is_relative_to(base) or not resolved.is_dir():
        return None, f"the directory {relative!r} leads outside HOME/files (a symlink?)"
    linked = _hard_linked(resolved)
    if linked is not None:
        return None, f"the directory {relative!r} is refused: {linked}"
    return resolved, None


class FilesCapability(Capability):
    """One directory under the home, preopened at ``/files`` for WASI 0.2 components."""

    name = "files"

    def manifest_fields(self) -> Mapping[str, Any]:
        return {"files": (FilesRule | None, Field(None, description="The directory access the tool needs."))}

    def grant_fields(self) -> Mapping[str, Any]:
        return {"files": (list[FilesGrant], Field([], description="Directories under HOME/files granted."))}

    def bind(self, declared: Any, grants: Any, context: Any) -> Any:
        rule, granted = declared.files, grants.files
        if rule is None or not granted:
            return None
        grant = granted[0]
        writable = rule.access == grant.access == "read_write"
        directory, denied = resolve_directory(Path(context.home), grant.directory)
        bound = BoundFiles(grant.directory, directory, writable, grant.quota_bytes, denied)
        if directory is not None and writable:
            bound.size_before = directory_size(directory)
        return bound


CAPABILITY = FilesCapability()
