"""One import, registered all or none: the plan, the diff against the previous import, the widening check.

Every importer (OpenAPI, GraphQL, a remote MCP server) turns its source into
:class:`Planned` tools — a manifest each, the policy action its kind of
operation gets by default and, for a tool without a wasm artifact (kind
``mcp-remote``), its descriptor. :func:`apply` compares them with what the
previous import of the same :class:`Source` registered — the non-deprecated
tools ``Source.owns`` — and then, in one registry transaction:

- registers added tools at ``1.0.0`` (or one patch above a version the name
  already had), and changed ones (manifest or artifact) one patch version
  above the newest version of their name;
- deprecates every current version of the tools the source no longer has;
- leaves unchanged tools (the same manifest and the same artifact) alone.

A planned name that any registered version, deprecated or not, holds without
being owned by the source refuses the whole import. A changed tool that may
reach more than its previous version — an HTTP rule's host, scheme, port,
method or path, or for a remote MCP tool its server, a secret it is sent, or the
caller's trace context (``propagate_trace``) —
is a *widening*; :func:`apply` refuses the whole import
(``widening_refused``) unless ``accept_widening`` is set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core._canonical import file_digest, sha256_digest
from ..core._errors import InvalidSpec, RegistrationError, WideningRefused
from ..model._manifest import Manifest
from ..model._result import ToolInfo
from ._fragment import SecretHint, policy_fragment
from ._importresult import ImportResult

if TYPE_CHECKING:
    import semver

    from ..runtime._runtime import Runtime

__all__ = ["ImportResult", "Planned", "SecretHint", "Source", "apply"]

FIRST_VERSION = "1.0.0"
Reach = tuple[object, ...]


@dataclass(frozen=True)
class Planned:
    """One tool an importer made: its manifest, default policy action, place in the source, and descriptor.

    ``descriptor`` is the artifact of a tool that has no wasm (kind
    ``mcp-remote``); the others run the import's one wasm artifact.
    """

    manifest: Manifest
    action: str = ""
    where: str = ""
    descriptor: bytes | None = None

    @property
    def digest(self) -> str | None:
        """The descriptor's digest (``sha256:<hex>``); None for a tool of the import's wasm artifact."""
        return None if self.descriptor is None else sha256_digest(self.descriptor)


@dataclass(frozen=True)
class Source:
    """What one import is: its API name and kind, the registered tools it made, how it refuses.

    Attributes:
        api: the API name (the result's ``api``).
        kind: ``openapi``, ``graphql`` or ``mcp-remote``.
        owns: whether a registered tool version was made by an import of this source.
        removed_note: the deprecation message of a tool the source no longer has.
        refusal: the error a planned name held by another tool raises.
    """

    api: str
    kind: str
    owns: Callable[[ToolInfo], bool]
    removed_note: str
    refusal: type[RegistrationError] = InvalidSpec


def apply(
    runtime: Runtime,
    planned: list[Planned],
    artifact: Path | None,
    source: Source,
    *,
    secrets: Sequence[SecretHint] = (),
    notes: Sequence[str] = (),
    accept_widening: bool = False,
    dry_run: bool = False,
    fragment: Callable[..., dict[str, Any]] = policy_fragment,
    progress: Callable[[str], None] | None = None,
) -> ImportResult:
    """Diff ``planned`` against the previous import of ``source`` and register the difference, all or none.

    Args:
        runtime: the Runtime whose registry receives the tools.
        planned: the tools, each with a descriptor or none (then they run ``artifact``).
        artifact: the wasm file the descriptor-less tools run (None: there are none,
            or a dry run before it was ever built, which then compares manifests only).
        source: which import this is.
        secrets: the secrets the operator provides (shown in the result).
        notes: warnings about the source (shown in the result).
        accept_widening: let a changed tool reach more than its previous version.
        dry_run: compute the diff and the policy fragment; register nothing.
        fragment: makes the policy fragment from (api, manifests, actions, secrets).
        progress: told each slow step (the diff's size, the registration), for a terminal.

    Raises:
        InvalidSpec (or ``source.refusal``): a planned name is held by a tool the source did not make.
        WideningRefused: a changed tool may reach more and ``accept_widening`` is not set.
        RegistrationError: the artifact or a manifest is refused (nothing is registered).
    """
    wasm = [plan for plan in planned if plan.descriptor is None]
    if wasm and artifact is None and not dry_run:
        raise ValueError(f"{wasm[0].manifest.name}: a tool without a descriptor needs the import's wasm artifact")
    digest = file_digest(artifact) if wasm and artifact else None
    result = ImportResult(api=source.api, kind=source.kind, secrets=list(secrets), notes=list(notes), dry_run=dry_run)
    existing = _by_name(runtime.tools())  # read once: a large API plans hundreds of tools
    _check_owned(existing, planned, source)
    previous = _previous(existing, source)
    register: list[Planned] = []
    for plan in planned:
        held = existing.get(plan.manifest.name, [])
        versioned = _versioned(runtime, plan, held, previous.get(plan.manifest.name), digest or plan.digest, result)
        if versioned is not None:
            register.append(versioned)
    result.removed = sorted(set(previous) - {plan.manifest.name for plan in planned})
    if result.widened and not accept_widening:
        raise WideningRefused(
            f"re-importing {source.api!r} would widen what existing tools may reach: "
            + "; ".join(result.widened)
            + " (accept with --accept-widening)",
            details={"api": source.api, "widened": result.widened},
        )
    if wasm:  # a remote MCP server's tools need no grants: the host proxies them
        manifests, actions = [p.manifest for p in planned], [p.action for p in planned]
        result.policy = fragment(source.api, manifests, actions, [*secrets])
    if not dry_run:
        deprecate = _deprecations(existing, source, result.removed)
        if progress is not None:
            progress(f"registering {len(register)} tool versions and deprecating {len(deprecate)}, in one transaction")
        stored = {info.name: info for info in _store(runtime, register, artifact, deprecate)}
        result.tools = [stored.get(plan.manifest.name) or previous[plan.manifest.name] for plan in planned]
    return result


def _by_name(infos: list[ToolInfo]) -> dict[str, list[ToolInfo]]:
    """Every registered version of each name (deprecated too), newest first."""
    grouped: dict[str, list[ToolInfo]] = {}
    for info in infos:  # the registry lists them by name, newest first
        grouped.setdefault(info.name, []).append(info)
    return grouped


def _check_owned(existing: dict[str, list[ToolInfo]], planned: list[Planned], source: Source) -> None:
    """Refuse a planned name that any version (deprecated too) holds without ``source`` having made it."""
    for plan in planned:
        name = plan.manifest.name
        foreign = [info for info in existing.get(name, []) if not source.owns(info)]
        if foreign:
            other = foreign[0]
            raise source.refusal(
                f"{plan.where or name}: tool name {name!r} is already taken by {other.name}@{other.version} "
                f"(kind {other.kind}), which is not part of the import {source.api!r}; choose another --name",
                details={"tool": name, "place": plan.where},
            )


def _previous(existing: dict[str, list[ToolInfo]], source: Source) -> dict[str, ToolInfo]:
    """The current (newest non-deprecated) version of each tool the last import of ``source`` registered."""
    found: dict[str, ToolInfo] = {}
    for name, versions in existing.items():
        current = next((info for info in versions if info.deprecated is None and source.owns(info)), None)
        if current is not None:
            found[name] = current
    return found


def _versioned(
    runtime: Runtime,
    plan: Planned,
    held: list[ToolInfo],
    old: ToolInfo | None,
    digest: str | None,
    result: ImportResult,
) -> Planned | None:
    """The plan with its version (None: unchanged), noting the diff in ``result``; ``held`` are the
    name's registered versions."""
    name = plan.manifest.name
    versions = [info.version for info in held]
    if old is not None and _same(plan.manifest, digest, old):
        result.unchanged.append(name)
        result.versions[name] = old.version
        return None
    if old is None:
        result.added.append(name)
    else:
        result.changed.append(name)
        widened = _reach(runtime, plan.manifest, plan.descriptor) - _reach(runtime, old.manifest, _stored(runtime, old))
        if widened:
            result.widened.append(f"{name}: " + ", ".join(_show(item) for item in sorted(widened, key=str)))
    version = _bump(max(versions, key=_key)) if versions else FIRST_VERSION
    result.versions[name] = version
    return Planned(plan.manifest.model_copy(update={"version": version}), plan.action, plan.where, plan.descriptor)


def _same(manifest: Manifest, digest: str | None, old: ToolInfo) -> bool:
    """The same manifest (but for the version) and the same artifact (when its digest is known)."""
    same = manifest.model_copy(update={"version": old.version}).to_json() == old.manifest.to_json()
    return same and (digest is None or digest == old.digest)


def _reach(runtime: Runtime, manifest: Manifest, descriptor: bytes | None) -> set[Reach]:
    """Everything a tool may reach: each (host, scheme, port, method, path) of its HTTP rules; for a
    remote MCP tool, its server and each (header, secret name) it is sent."""
    found: set[Reach] = set()
    for rule in manifest.capabilities.http:
        ports: list[int | None] = list(rule.ports) if rule.ports else [None]
        for scheme in rule.schemes:
            for port in ports:
                for method in rule.methods:
                    for path in rule.paths:
                        found.add((rule.host, scheme, port, method, path))
    if descriptor is not None:
        from ..remote._proxy import Descriptor

        remote = Descriptor.from_bytes(descriptor)
        found.add(("mcp-remote", remote.url))
        found |= {("mcp-remote", remote.url, header, secret) for header, secret in remote.headers.items()}
        if remote.propagate_trace:
            found.add(("mcp-remote", remote.url, "trace"))
        if remote.command:  # a local server: its command line, its secrets, running outside the OS sandbox
            found.add(("mcp-remote", "stdio:" + " ".join(remote.command)))
            found |= {("mcp-remote", remote.url, f"env {name}", secret) for name, secret in remote.env_secrets.items()}
            if remote.sandbox == "none":
                found.add(("mcp-remote", f"{remote.url} outside the OS sandbox"))
    return found


def _stored(runtime: Runtime, info: ToolInfo) -> bytes | None:
    """The stored descriptor of a registered ``mcp-remote`` tool (empty when it cannot be read)."""
    if info.kind != "mcp-remote":
        return None
    from ..remote._proxy import load_descriptor

    try:
        return load_descriptor(runtime.registry.descriptor_path(info.digest), info.digest).to_bytes()
    except Exception:  # missing or changed on disk: everything it asks for now is new
        return None


def _show(item: Reach) -> str:
    if item[0] == "mcp-remote":
        if len(item) == 3:
            return f"the caller's trace context sent to {item[1]}"
        return f"the MCP server {item[1]}" if len(item) == 2 else f"secret {item[3]} sent in {item[2]} to {item[1]}"
    host, scheme, port, method, path = item
    return f"{method} {scheme}://{host}:{port or 'default'}{path}"


def _deprecations(existing: dict[str, list[ToolInfo]], source: Source, removed: list[str]) -> dict[str, str]:
    """Every current version the source made of each removed name, with the source's note."""
    refs = {}
    for name in removed:
        for info in existing.get(name, []):
            if info.deprecated is None and source.owns(info):
                refs[f"{name}@{info.version}"] = source.removed_note
    return refs


def _store(
    runtime: Runtime, register: list[Planned], artifact: Path | None, deprecate: dict[str, str]
) -> list[ToolInfo]:
    """Register the versioned plans and deprecate ``deprecate`` in one registry transaction; the
    registered versions."""
    wasm = [plan.manifest for plan in register if plan.descriptor is None]
    remote = [plan for plan in register if plan.descriptor is not None]
    if wasm and remote:
        raise ValueError("one import registers tools of its wasm artifact or descriptors, not both")
    if wasm:
        assert artifact is not None
        return runtime.registrar.register_many(artifact, wasm, None, deprecate)
    if remote:
        return _store_descriptors(runtime, remote, deprecate)
    if deprecate:
        runtime.registry.deprecate_many(deprecate)
    return []


def _store_descriptors(runtime: Runtime, register: list[Planned], deprecate: dict[str, str]) -> list[ToolInfo]:
    registry = runtime.registry
    with registry.staging.shared():
        staged = []
        try:
            for plan in register:
                assert plan.descriptor is not None and plan.digest is not None
                staged.append((plan.manifest, plan.digest, registry.stage_blob(plan.descriptor)))
            return registry.add_descriptors(staged, deprecate)
        finally:
            for _, _, blob in staged:
                blob.unlink(missing_ok=True)


def _key(version: str) -> tuple[semver.Version, str]:
    from ..registry._registry import version_key

    return version_key(version)


def _bump(version: str) -> str:
    """One patch version above ``version`` (a pre-release or build suffix is dropped)."""
    release = _key(version)[0]
    return f"{release.major}.{release.minor}.{release.patch + 1}"
