"""The ``http`` capability: ``http-fetch`` in ``glovebox:tool/host@0.1.0``.

A manifest declares HTTP rules (``capabilities.http``), a policy grants rules,
per-call limits and secrets (``http``, ``http_limits``, ``secrets``); a call's
:class:`~glovebox.capabilities._fetch.HttpCapability` enforces both per request.
The enforcing client (httpx, h11) is imported only when a call is granted HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from ...core._world import HOST_INTERFACE
from ...model._capability import Capability, HostFunction
from ...model._grantrules import HttpLimits, HttpRule, SecretRule

__all__ = ["CAPABILITY", "HttpCapabilityKind", "http_fetch"]

WIT = """\
  record http-request { method: string, url: string, headers: list<tuple<string, string>>, body: option<list<u8>> }
  record http-response { status: u16, headers: list<tuple<string, string>>, body: list<u8> }
  variant http-error { denied(string), timeout(string), too-large(string), network(string) }
  http-fetch: func(request: http-request) -> result<http-response, http-error>;
"""


def http_fetch(state: Any, request: Any) -> Any:
    """Answer one guest request for the call on this thread: a response record or an ``http-error``."""
    from wasmtime.component import Variant

    if state is not None and state.http is not None:
        return state.http.fetch(request, state)
    reason = "the http capability is not granted to this call"
    if state is not None:
        url = state.clip(request.url)
        method = state.clip(request.method, 32)
        state.add_denial({"capability": "http", "method": method, "url": url, "reason": reason})
        state.add_egress({"method": method, "url": url, "error": "denied", "ms": 0.0})
    return Variant("denied", reason)


class HttpCapabilityKind(Capability):
    """Outgoing HTTP requests, checked per request against the manifest's and the grant's rules."""

    name = "http"
    interface = HOST_INTERFACE
    wit = WIT

    def manifest_fields(self) -> Mapping[str, Any]:
        return {"http": (list[HttpRule], [])}

    def grant_fields(self) -> Mapping[str, Any]:
        return {
            "http": (list[HttpRule], []),
            "http_limits": (HttpLimits, HttpLimits()),
            "secrets": (list[SecretRule], []),
        }

    def policy_fields(self) -> Mapping[str, Any]:
        return {
            "http": (list[HttpRule], Field([], description="HTTP destinations granted.")),
            "http_limits": (
                HttpLimits | None,
                Field(None, description="Per-call HTTP limits (the tightest matching wins)."),
            ),
            "secrets": (list[SecretRule], Field([], description="Secrets the host adds to matching requests.")),
        }

    def combine(self, entries: Sequence[Any]) -> dict[str, Any]:
        limits = [entry.http_limits for entry in entries if entry.http_limits is not None]
        return {
            "http": [rule for entry in entries for rule in entry.http],
            "http_limits": _tightest(limits) if limits else HttpLimits(),
            "secrets": [secret for entry in entries for secret in entry.secrets],
        }

    def functions(self) -> Sequence[HostFunction]:
        from wasmtime.component import Variant

        from ...sandbox._hostabi import lift_request, lower_response

        return (
            HostFunction(
                "http-fetch", _one(lift_request), http_fetch, lower_response, Variant("network", "host error")
            ),
        )

    def bind(self, declared: Any, grants: Any, context: Any) -> Any:
        if not declared.http or not grants.http:
            return None  # the host function answers `denied` without touching the network
        from .._fetch import HttpCapability  # httpx only when a call may use it
        from .._secrets import load_secrets

        hosts = context.hosts() if context.hosts is not None else None
        secrets = load_secrets(grants.secrets, context.principal, context.home)
        return HttpCapability(declared.http, grants, secrets, context.transport, tracer=context.tracer, hosts=hosts)

    def egress(self, meta: Mapping[str, Any], *, store_inputs: bool, extras: Mapping[str, Any]) -> Any:
        return meta.get("egress")


def _one(lift: Any) -> Any:
    return lambda args, count: (lift(args, count),)


def _tightest(limits: Sequence[HttpLimits]) -> HttpLimits:
    dumps = [item.model_dump() for item in limits]
    return HttpLimits(**{key: min(d[key] for d in dumps) for key in dumps[0]})


CAPABILITY = HttpCapabilityKind()
