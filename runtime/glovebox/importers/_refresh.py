"""Refresh the tools of a remote MCP server: register them all at once, or none, and say what changed.

A tool's version is decided against what is registered under its name: a new
name is ``1.0.0``; the same artifact and manifest as the newest current version
is unchanged; anything else is the newest version with its patch number
bumped (``changed``, or ``added`` when every earlier version was deprecated).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._manifest import Manifest
from .._registry import version_key

if TYPE_CHECKING:
    from .._result import ToolInfo
    from .._runtime import Runtime

__all__ = ["Candidate", "RefreshResult", "register_all"]

FIRST_VERSION = "1.0.0"


@dataclass(frozen=True)
class Candidate:
    """One tool an import wants registered: its manifest (any version) and artifact bytes."""

    manifest: Manifest
    artifact: bytes
    digest: str


@dataclass
class RefreshResult:
    """What an import did, as ``name@version`` strings (``removed``: the names it deprecated)."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready lists."""
        return {"added": self.added, "changed": self.changed, "removed": self.removed, "unchanged": self.unchanged}

    def lines(self) -> list[str]:
        """One line per tool: ``added``, ``changed``, ``removed`` (deprecated), ``unchanged``."""
        marks = (("added", self.added), ("changed", self.changed), ("removed", self.removed))
        shown = [f"{mark:<9} {ref}" for mark, refs in marks for ref in refs]
        return [*shown, f"unchanged {len(self.unchanged)} tool(s)"]


def _bump(version: str) -> str:
    major, minor, patch, _, _ = version_key(version)
    return f"{major}.{minor}.{patch + 1}"


def _place(candidate: Candidate, existing: list[ToolInfo]) -> tuple[str, Manifest]:
    """``(status, manifest with its version)`` of a candidate against a name's registered versions."""
    if not existing:
        return "added", candidate.manifest.model_copy(update={"version": FIRST_VERSION})
    newest = max(existing, key=lambda info: version_key(info.version))
    current = [info for info in existing if info.deprecated is None]
    if current:
        latest = max(current, key=lambda info: version_key(info.version))
        same = candidate.manifest.model_copy(update={"version": latest.version})
        if latest.digest == candidate.digest and latest.manifest.to_json() == same.to_json():
            return "unchanged", same
    status = "changed" if current else "added"
    return status, candidate.manifest.model_copy(update={"version": _bump(newest.version)})


def register_all(runtime: Runtime, candidates: list[Candidate], removed: list[str], note: str) -> RefreshResult:
    """Register ``candidates`` and deprecate the names in ``removed``, in one transaction."""
    registry = runtime._registry
    result = RefreshResult(removed=sorted(removed))
    planned: list[tuple[Manifest, Candidate]] = []
    for candidate in candidates:
        existing = [info for info in runtime.tools(candidate.manifest.name) if info.name == candidate.manifest.name]
        status, manifest = _place(candidate, existing)
        getattr(result, status).append(f"{manifest.name}@{manifest.version}")
        if status != "unchanged":
            planned.append((manifest, candidate))
    if not planned and not removed:
        return result
    with registry.staging.shared():
        staged = [(manifest, c.digest, registry.stage_blob(c.artifact)) for manifest, c in planned]
        try:
            registry.add_all(staged, removed, note)
        finally:
            for _, _, blob in staged:
                blob.unlink(missing_ok=True)
    return result
