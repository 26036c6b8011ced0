"""Finding the authorization server: RFC 9728 protected-resource metadata, then RFC 8414 metadata.

For a resource (a remote MCP server's URL, an API's base URL):
:func:`protected_resource` asks the resource itself (a 401 whose
``WWW-Authenticate`` names ``resource_metadata``), else
``/.well-known/oauth-protected-resource{path}``, then the same at the root.
The metadata's ``resource`` must be the resource asked about. Its first
authorization server (or the one given) is the issuer; :func:`authorization_server`
reads ``/.well-known/oauth-authorization-server{path}`` (then
``openid-configuration``) and requires its ``issuer`` to be that issuer.

:func:`check_issuer` holds an issuer to the policy's allowlist
(``connections.issuers``): exact URLs, compared without a trailing slash.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ._errors import ConnectError
from ._http import Backchannel, check_secure, origin

__all__ = ["ServerMetadata", "authorization_server", "check_issuer", "protected_resource"]

_RESOURCE_METADATA = re.compile(r'resource_metadata="([^"]+)"')


@dataclass(frozen=True)
class ServerMetadata:
    """What a connection needs of an authorization server's metadata."""

    issuer: str
    authorization_endpoint: str | None
    token_endpoint: str
    revocation_endpoint: str | None = None
    registration_endpoint: str | None = None
    device_authorization_endpoint: str | None = None
    #: RFC 9207: the server sends ``iss`` in its authorization responses.
    iss_parameter: bool = False
    scopes: list[str] = field(default_factory=list)


def _same(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def check_issuer(issuer: str, allowed: Sequence[str]) -> str:
    """``issuer`` when the policy allows it; ``issuer_not_allowed`` otherwise (an empty list allows none)."""
    check_secure(issuer, "issuer")
    if not any(_same(issuer, entry) for entry in allowed):
        shown = ", ".join(allowed) or "none"
        raise ConnectError(
            "issuer_not_allowed",
            f"the authorization server {issuer} is not in the policy's connections.issuers (allowed: {shown})",
        )
    return issuer


def _well_known(url: str, suffix: str) -> list[str]:
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    base = origin(url)
    found = [f"{base}/.well-known/{suffix}{path}"]
    if path:
        found.append(f"{base}/.well-known/{suffix}")
    return found


def protected_resource(resource: str, channel: Backchannel) -> dict[str, Any]:
    """The RFC 9728 metadata of ``resource`` (its ``authorization_servers`` and ``resource``)."""
    check_secure(resource, "resource")
    candidates: list[str] = []
    try:
        probe = channel.request("GET", resource, "the resource")
    except ConnectError as exc:
        if exc.code != "redirect_refused":
            raise
    else:
        named = _RESOURCE_METADATA.search(probe.headers.get("www-authenticate", ""))
        if probe.status_code == 401 and named:
            candidates.append(str(probe.url.join(named[1])))
    candidates += _well_known(resource, "oauth-protected-resource")
    for url in candidates:
        if origin(url) != origin(resource):
            raise ConnectError("discovery_failed", f"the resource {resource} names metadata on another origin {url}")
        status, document = channel.json("GET", url, "protected-resource metadata")
        if status == 200 and document.get("authorization_servers"):
            if not _same(str(document.get("resource", "")), resource):
                raise ConnectError(
                    "resource_mismatch",
                    f"the metadata at {url} is for {document.get('resource')!r}, not {resource}",
                )
            return document
    raise ConnectError("discovery_failed", f"{resource} publishes no protected-resource metadata (RFC 9728)")


def authorization_server(issuer: str, channel: Backchannel) -> ServerMetadata:
    """The RFC 8414 metadata of ``issuer``; its ``issuer`` must be ``issuer`` itself."""
    check_secure(issuer, "issuer")
    for suffix in ("oauth-authorization-server", "openid-configuration"):
        for url in _well_known(issuer, suffix):
            status, document = channel.json("GET", url, "authorization-server metadata")
            if status != 200 or not document.get("token_endpoint"):
                continue
            if not _same(str(document.get("issuer", "")), issuer):
                raise ConnectError(
                    "issuer_mismatch", f"the metadata at {url} names issuer {document.get('issuer')!r}, not {issuer}"
                )
            return _metadata(issuer, document)
    raise ConnectError("discovery_failed", f"{issuer} publishes no authorization-server metadata (RFC 8414)")


def _metadata(issuer: str, document: dict[str, Any]) -> ServerMetadata:
    def url(key: str) -> str | None:
        value = document.get(key)
        return check_secure(value, key) if isinstance(value, str) and value else None

    token = url("token_endpoint")
    assert token is not None
    scopes = document.get("scopes_supported")
    return ServerMetadata(
        issuer=issuer,
        authorization_endpoint=url("authorization_endpoint"),
        token_endpoint=token,
        revocation_endpoint=url("revocation_endpoint"),
        registration_endpoint=url("registration_endpoint"),
        device_authorization_endpoint=url("device_authorization_endpoint"),
        iss_parameter=document.get("authorization_response_iss_parameter_supported") is True,
        scopes=[str(s) for s in scopes] if isinstance(scopes, list) else [],
    )
