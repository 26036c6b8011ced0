"""The policy fragment an import prints: safe defaults per operation, the API's grants and secrets.

Reads (GET, HEAD, OPTIONS; GraphQL queries) get ``allow``, writes (POST, PUT,
PATCH, DELETE; GraphQL mutations) ``require_approval``, one rule per tool so
the operator can change each. One grant entry (``tool: <api>-*``) grants the
hosts, methods and paths of all the API's operations and its secrets; every
call's effective grant is still cut down to the tool's own manifest (one
method, one path template), so a tool reaches only its own operation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..model._manifest import Manifest

__all__ = ["SecretHint", "policy_fragment"]


@dataclass(frozen=True)
class SecretHint:
    """A secret the operator provides for an imported API (the host injects it; tools never see it)."""

    name: str
    env: str
    header: str
    format: str
    scheme: str
    #: A secret reference the fragment reads instead of the environment variable ``env``: an OAuth
    #: scheme's ``connection://API/{principal}`` (made by ``glovebox connect API``); empty: ``env``.
    source: str = ""

    def to_dict(self) -> dict[str, str]:
        """The hint as JSON-ready data (``source`` only when it is one)."""
        found = {"name": self.name, "env": self.env, "header": self.header, "format": self.format}
        return found | {"scheme": self.scheme} | ({"source": self.source} if self.source else {})


def policy_fragment(
    api: str, manifests: list[Manifest], actions: list[str], secrets: list[SecretHint]
) -> dict[str, Any]:
    """A ``version: 1`` policy document for one imported API."""
    rules = [
        {"tool": manifest.name, "action": action, "reason": _reason(manifest, action)}
        for manifest, action in zip(manifests, actions, strict=True)
    ]
    grant: dict[str, Any] = {"tool": f"{api}-*", "http": _http(manifests)}
    hosts = {rule["host"] for rule in grant["http"]}
    if secrets:
        grant["secrets"] = [
            {
                "name": hint.name,
                **({"source": hint.source} if hint.source else {"provider": "env", "source": hint.env}),
                "host": host,
                "header": hint.header,
                "format": hint.format,
                "schemes": [hint.scheme],
            }
            for hint in secrets
            for host in sorted(hosts)
        ]
    return {
        "version": 1,
        "description": f"imported API {api}: reads allowed, writes held for approval",
        "rules": rules,
        "grants": [grant],
    }


def _reason(manifest: Manifest, action: str) -> str:
    operation = manifest.operation
    assert operation is not None
    what = f"GraphQL {operation.source_id}" if operation.graphql is not None else f"{operation.method} {operation.path}"
    return f"{what}: {'read' if action == 'allow' else 'write, needs approval'}"


def _http(manifests: list[Manifest]) -> list[dict[str, Any]]:
    """The union of the manifests' HTTP rules, merged per (host, schemes, ports, allow_private,
    allow_path_params)."""
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for manifest in manifests:
        for rule in manifest.capabilities.http:
            key = (rule.host, tuple(rule.schemes), tuple(rule.ports or ()), rule.allow_private, rule.allow_path_params)
            entry = merged.setdefault(
                key,
                {"host": rule.host, "schemes": list(rule.schemes), "ports": rule.ports, "methods": [], "paths": []},
            )
            if rule.allow_private:
                entry["allow_private"] = True
            if rule.allow_path_params:
                entry["allow_path_params"] = True  # matrix-style parameters: only the tools that send them
            entry["methods"] += [m for m in rule.methods if m not in entry["methods"]]
            entry["paths"] += [p for p in rule.paths if p not in entry["paths"]]
    for entry in merged.values():
        if entry["ports"] is None:
            del entry["ports"]
    return list(merged.values())
