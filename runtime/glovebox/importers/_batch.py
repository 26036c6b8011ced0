"""One import, registered all or none: the plan, the diff against the previous import, the widening check.

An importer (OpenAPI, GraphQL) turns a spec into :class:`Planned` tools — a
manifest each (version ``1.0.0``) and the policy action its kind of operation
gets by default. :func:`apply` compares them with what the previous import of
the same API registered — the non-deprecated tools whose manifest
``operation.api`` names it — and then, in one registry transaction:

- registers added operations at ``1.0.0`` (or one patch above a version the
  name already had), and changed ones (schema, description, method, URL or
  path) one patch version above their current one;
- deprecates the operations the spec no longer has;
- leaves unchanged operations alone.

A changed operation whose HTTP rules ask for a host, scheme, port, method or
path its previous version did not have is a *widening*; :func:`apply` refuses
the whole import (``widening_refused``) unless ``accept_widening`` is set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import InvalidSpec, WideningRefused
from .._manifest import Manifest
from .._result import ToolInfo
from ._fragment import SecretHint, policy_fragment

if TYPE_CHECKING:
    from .._runtime import Runtime

__all__ = ["ImportResult", "Planned", "SecretHint", "apply"]


@dataclass(frozen=True)
class Planned:
    """One operation an importer made: its manifest and its default policy action."""

    manifest: Manifest
    action: str
    where: str = ""


@dataclass
class ImportResult:
    """What an import did (or, with ``dry_run``, would do).

    Attributes:
        api: the API name (the tools' name prefix and scope prefix).
        kind: ``openapi`` or ``graphql``.
        added, changed, removed, unchanged: tool names, by what happened to them.
        widened: ``name: what`` lines for changed operations that ask for more.
        tools: the current version of every operation of the import.
        policy: the policy fragment (a ``version: 1`` policy document).
        secrets: the secrets the operator provides.
        notes: warnings about the spec (e.g. a security scheme the host cannot inject).
        dry_run: nothing was registered.
    """

    api: str
    kind: str
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    widened: list[str] = field(default_factory=list)
    tools: list[ToolInfo] = field(default_factory=list)
    policy: dict[str, Any] = field(default_factory=dict)
    secrets: list[SecretHint] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
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
            "tools": [f"{info.name}@{info.version}" for info in self.tools],
            "policy": self.policy,
            "secrets": [hint.to_dict() for hint in self.secrets],
            "notes": self.notes,
            "dry_run": self.dry_run,
        }

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


def apply(
    runtime: Runtime,
    planned: list[Planned],
    artifact: Path,
    *,
    api: str,
    kind: str,
    secrets: list[SecretHint],
    notes: list[str],
    accept_widening: bool = False,
    dry_run: bool = False,
) -> ImportResult:
    """Diff ``planned`` against the previous import of ``api`` and register the difference, all or none.

    Raises:
        InvalidSpec: a planned name belongs to a tool that another import (or no import) registered.
        WideningRefused: a changed operation asks for more and ``accept_widening`` is not set.
        RegistrationError: the artifact or a manifest is refused (nothing is registered).
    """
    result = ImportResult(api=api, kind=kind, secrets=secrets, notes=notes, dry_run=dry_run)
    previous = _previous(runtime, api)
    register: list[Manifest] = []
    current: dict[str, ToolInfo] = {}
    for plan in planned:
        manifest = _versioned(runtime, plan, previous, result)
        if manifest is None:
            current[plan.manifest.name] = previous[plan.manifest.name]
        else:
            register.append(manifest)
    planned_names = {plan.manifest.name for plan in planned}
    result.removed = sorted(set(previous) - planned_names)
    if result.widened and not accept_widening:
        raise WideningRefused(
            f"re-importing {api!r} would widen what existing operations may reach: "
            + "; ".join(result.widened)
            + " (accept with --accept-widening)",
            details={"api": api, "widened": result.widened},
        )
    result.policy = policy_fragment(api, [plan.manifest for plan in planned], [p.action for p in planned], secrets)
    if dry_run:
        return result
    deprecate = {f"{name}@{previous[name].version}": f"removed from {api} by a re-import" for name in result.removed}
    if register:
        registered = runtime._registrar.register_many(artifact, register, None, deprecate)
        current.update({info.name: info for info in registered})
    elif deprecate:
        runtime._registry.deprecate_many(deprecate)
    result.tools = [current[plan.manifest.name] for plan in planned]
    return result


def _previous(runtime: Runtime, api: str) -> dict[str, ToolInfo]:
    """The current (newest non-deprecated) version of each tool the last import of ``api`` registered."""
    found: dict[str, ToolInfo] = {}
    for info in runtime.tools(include_deprecated=False):
        operation = info.manifest.operation
        if operation is not None and operation.api == api:
            found.setdefault(info.name, info)  # newest first
    return found


def _versioned(runtime: Runtime, plan: Planned, previous: dict[str, ToolInfo], result: ImportResult) -> Manifest | None:
    """The manifest to register for one planned operation (None: unchanged), noting the diff."""
    name = plan.manifest.name
    old = previous.get(name)
    if old is None:
        others = runtime.tools(name)
        foreign = [
            info for info in others if info.manifest.operation is None or info.manifest.operation.api != result.api
        ]
        if foreign:
            raise InvalidSpec(
                f"{plan.where or name}: tool name {name!r} is already taken by {foreign[0].name}@{foreign[0].version}, "
                f"which is not part of the import {result.api!r}; choose another --name",
                details={"tool": name, "place": plan.where},
            )
        result.added.append(name)
        version = _bump(max((info.version for info in others), key=_key)) if others else "1.0.0"
        return plan.manifest.model_copy(update={"version": version})
    if plan.manifest.model_copy(update={"version": old.version}).to_json() == old.manifest.to_json():
        result.unchanged.append(name)
        return None
    result.changed.append(name)
    widened = _rules(plan.manifest) - _rules(old.manifest)
    if widened:
        shown = ", ".join(f"{m} {s}://{h}:{p or 'default'}{path}" for h, s, p, m, path in sorted(widened, key=str))
        result.widened.append(f"{name}: {shown}")
    newest = max((info.version for info in runtime.tools(name)), key=_key)
    return plan.manifest.model_copy(update={"version": _bump(newest)})


def _rules(manifest: Manifest) -> set[tuple[str, str, int | None, str, str]]:
    """Every (host, scheme, port, method, path pattern) a manifest's HTTP rules ask for."""
    found: set[tuple[str, str, int | None, str, str]] = set()
    for rule in manifest.capabilities.http:
        ports: list[int | None] = list(rule.ports) if rule.ports else [None]
        for scheme in rule.schemes:
            for port in ports:
                for method in rule.methods:
                    for path in rule.paths:
                        found.add((rule.host, scheme, port, method, path))
    return found


def _key(version: str) -> tuple[int, int, int, int, str]:
    from .._registry import version_key

    return version_key(version)


def _bump(version: str) -> str:
    """One patch version above ``version`` (a pre-release or build suffix is dropped)."""
    major, minor, patch = _key(version)[:3]
    return f"{major}.{minor}.{patch + 1}"
