"""``import_mcp``: every tool of a remote MCP server (streamable HTTP) as a ``mcp-remote`` tool.

The host lists the server's tools with the official ``mcp`` SDK client and
registers each as ``<prefix>-<remote name>`` (lower-cased, characters outside
``[a-z0-9_-]`` replaced by ``-``, cut to 64), with the remote description and
input schema (held to the host's schema rules; a schema the host cannot
accept refuses the whole import, naming the tool), the remote ``outputSchema``
or ``true``, the required scopes given (default ``<prefix>:call``) and the
limits given. Its artifact is a descriptor (see ``glovebox._remote``). Calls
are proxied by the host to the server under the policy like any tool's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .._errors import InvalidManifest
from .._manifest import HOST_MAXIMA, NAME_PATTERN, Limits, parse_manifest
from .._remoteheaders import check_url, parse_header_secrets
from ._refresh import Candidate, RefreshResult, register_all

if TYPE_CHECKING:
    from .._remote import Descriptor
    from .._runtime import Runtime

__all__ = ["import_mcp"]

#: The deadline and the byte cap of listing a server's tools at import.
LIST_TIMEOUT_S = 30.0
LIST_BYTES = 16 * 1024 * 1024
DESCRIPTION_CHARS = 4000


def sanitize(text: str) -> str:
    """A tool name from any text: lower case, ``[a-z0-9_-]`` only, at most 64 characters.

    >>> sanitize("My Server/Get Weather!")
    'my-server-get-weather'
    """
    name = re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-_")[:64].rstrip("-_")
    return name or "tool"


def import_mcp(
    runtime: Runtime,
    url: str,
    *,
    name: str | None = None,
    scopes: Iterable[str] | None = None,
    header_secrets: Iterable[str] | Mapping[str, str] = (),
    timeout_ms: int | None = None,
    output_bytes: int | None = None,
) -> RefreshResult:
    """Register (or refresh) every tool of the MCP server at ``url``; all of them or none.

    Args:
        runtime: the Runtime whose registry receives the tools.
        url: the server's streamable-HTTP endpoint (``http`` or ``https``; the host
            connects wherever the URL points, loopback and private addresses included).
        name: the tools' name prefix (default: the server's name, else its host).
        scopes: the scopes a caller needs (default ``<prefix>:call``).
        header_secrets: ``HEADER=SECRET_NAME`` pairs (or a mapping): the host sends
            the environment variable ``SECRET_NAME`` in ``HEADER``; only the name is stored.
        timeout_ms: each call's deadline (``limits.timeout_ms``; default the manifest default).
        output_bytes: each call's output cap (``limits.output_bytes``).

    Returns:
        What was added, changed (a new patch version), removed (deprecated) and left unchanged.

    Raises:
        ValueError: a malformed URL, name, scope or header secret.
        InvalidManifest: a remote tool the host cannot accept (named), or a name taken by another tool.
        UpstreamError, CallTimeout, OutputTooLarge: the server could not be listed.
    """
    from .._remote import list_remote, origin_of

    runtime._check_open()
    _require_sdk()
    check_url(url)
    headers = parse_header_secrets(url, header_secrets)
    if name is not None and not re.fullmatch(NAME_PATTERN, name):
        raise ValueError(f"--name {name!r}: a tool name prefix must match {NAME_PATTERN}")
    limits = _limits(timeout_ms, output_bytes)
    listing = list_remote(url, headers, LIST_TIMEOUT_S, LIST_BYTES)
    prefix = name or sanitize(listing.server_name or urlsplit(url).hostname or "remote")
    required = _scopes(scopes, prefix)
    candidates = [_candidate(url, tool, prefix, required, limits, headers) for tool in listing.tools]
    _check_unique(candidates, origin_of(url))
    owned = _owned(runtime, url, prefix)
    taken = {c.manifest.name for c in candidates} - set(owned)
    _check_free(runtime, taken)
    removed = sorted(set(owned) - {c.manifest.name for c in candidates})
    return register_all(runtime, candidates, removed, f"removed from the MCP server {origin_of(url)}")


def _require_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ValueError("importing an MCP server needs the serve extra: pip install 'glovebox[serve]'") from exc


def _limits(timeout_ms: int | None, output_bytes: int | None) -> Limits:
    given = {"timeout_ms": timeout_ms, "output_bytes": output_bytes}
    try:
        limits = Limits(**{key: value for key, value in given.items() if value is not None})
    except ValueError as exc:
        raise ValueError(f"limits: {exc}") from exc
    for key, value in given.items():
        ceiling = getattr(HOST_MAXIMA, key)
        if value is not None and value > ceiling:
            raise ValueError(f"--{key.replace('_', '-')} {value} exceeds the host maximum {ceiling}")
    return limits


def _scopes(scopes: Iterable[str] | None, prefix: str) -> list[str]:
    found = [f"{prefix}:call"] if scopes is None else list(scopes)
    for scope in found:
        if not isinstance(scope, str) or not re.fullmatch(r"[A-Za-z0-9_.:*/-]{1,128}", scope):
            raise ValueError(f"--scope {scope!r}: not a scope name")
    return found


def _candidate(
    url: str, tool: Any, prefix: str, scopes: list[str], limits: Limits, headers: dict[str, str]
) -> Candidate:
    from .._remote import Descriptor, origin_of

    description = (tool.description or "")[:DESCRIPTION_CHARS]
    output_schema = tool.output_schema if tool.output_schema is not None else True
    document = {
        "name": sanitize(f"{prefix}-{tool.name}"),
        "description": description,
        "input_schema": tool.input_schema,
        "output_schema": output_schema,
        "limits": limits.model_dump(),
        "required_scopes": scopes,
        "kind": "mcp-remote",
    }
    manifest = parse_manifest(document, f"of the remote tool {tool.name!r} of {origin_of(url)}")
    descriptor = Descriptor(url, tool.name, description, tool.input_schema, output_schema, headers)
    return Candidate(manifest, descriptor.to_bytes(), descriptor.digest)


def _check_unique(candidates: list[Candidate], origin: str) -> None:
    seen: dict[str, str] = {}
    for candidate in candidates:
        remote = _remote_name(candidate)
        other = seen.setdefault(candidate.manifest.name, remote)
        if other != remote:
            raise InvalidManifest(
                f"the remote tools {other!r} and {remote!r} of {origin} both become {candidate.manifest.name!r}; "
                "rename one on the server or import with another --name",
                details={"name": candidate.manifest.name},
            )


def _remote_name(candidate: Candidate) -> str:
    from .._remote import Descriptor

    return Descriptor.from_bytes(candidate.artifact).tool


def _descriptor(runtime: Runtime, digest: str) -> Descriptor | None:
    from .._remote import load_descriptor

    try:
        return load_descriptor(runtime._registry.blob_path(digest), digest)
    except Exception:
        return None


def _owned(runtime: Runtime, url: str, prefix: str) -> list[str]:
    """Names of current ``mcp-remote`` tools imported from ``url`` under ``prefix``."""
    names = []
    for info in runtime.tools(f"{prefix}-*", include_deprecated=False):
        if info.kind == "mcp-remote" and info.name not in names:
            descriptor = _descriptor(runtime, info.digest)
            if descriptor is not None and descriptor.url == url:
                names.append(info.name)
    return names


def _check_free(runtime: Runtime, names: set[str]) -> None:
    """Refuse names that a tool not imported from this server holds (a deprecated remote tool may come back)."""
    for name in sorted(names):
        for info in runtime.tools(name):
            if info.name == name and (info.kind != "mcp-remote" or info.deprecated is None):
                raise InvalidManifest(
                    f"the name {name!r} is taken by another tool ({info.name}@{info.version}, kind {info.kind})",
                    details={"name": name},
                )
