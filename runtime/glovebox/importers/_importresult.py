"""What an import did: the one result type of every importer (OpenAPI, GraphQL, remote MCP)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model._result import ToolInfo
from ._fragment import SecretHint

__all__ = ["ImportResult"]


@dataclass
class ImportResult:
    """What an import did (or, with ``dry_run``, would do).

    Attributes:
        api: the API name (the tools' name prefix and scope prefix; a remote MCP server's ``--name``).
        kind: ``openapi``, ``graphql`` or ``mcp-remote``.
        added, changed, removed, unchanged: tool names, by what happened to them.
        widened: ``name: what`` lines for changed tools that may reach more than before.
        versions: the version each tool of the import has (or, with ``dry_run``, would have).
        tools: the current version of every tool of the import (empty with ``dry_run``).
        policy: the policy fragment (a ``version: 1`` policy document; empty for a remote MCP server).
        secrets: the secrets the operator provides.
        notes: warnings about the spec (e.g. a security scheme the host cannot inject, names
            made unique with a hash suffix).
        skipped: the operations not imported, each ``{"operation", "place", "reason"}``.
        dry_run: nothing was registered.
    """

    api: str
    kind: str
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    widened: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    tools: list[ToolInfo] = field(default_factory=list)
    policy: dict[str, Any] = field(default_factory=dict)
    secrets: list[SecretHint] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data (tools as ``name@version``)."""
        return {
            "api": self.api,
            "kind": self.kind,
            "added": self.added,
            "changed": self.changed,
            "removed": self.removed,
            "unchanged": self.unchanged,
            "widened": self.widened,
            "versions": self.versions,
            "tools": [f"{info.name}@{info.version}" for info in self.tools],
            "policy": self.policy,
            "secrets": [hint.to_dict() for hint in self.secrets],
            "notes": self.notes,
            "skipped": self.skipped,
            "dry_run": self.dry_run,
        }

    def ref(self, name: str) -> str:
        """``name@version`` of one tool of the import (its current, or planned, version)."""
        version = self.versions.get(name)
        return f"{name}@{version}" if version else name

    def policy_yaml(self) -> str:
        """The policy fragment as YAML, with a header saying which scopes to give whom."""
        import yaml  # only when a fragment is printed

        scopes = f"{self.api}:read, {self.api}:write"
        header = (
            f"# glovebox policy fragment for the imported API {self.api!r} ({self.kind}).\n"
            f"# Give principals the scopes they need ({scopes}); approvers need the approver scope.\n"
            "# Reads are allowed, writes wait for approval; tighten or loosen per tool below.\n"
        )
        return header + yaml.safe_dump(self.policy, sort_keys=False, allow_unicode=True)
