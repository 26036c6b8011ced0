"""Who is calling: API keys (``Authorization: Bearer KEY`` or ``X-API-Key: KEY``)
mapped to principals by the SHA-256 digests the policy holds.

Without a policy the HTTP servers refuse to start unless anonymous access is
asked for explicitly (``--insecure-anonymous``); then every request without a
key is the principal ``anonymous``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._runtime import Runtime

__all__ = ["AuthFailure", "authenticate", "check_can_serve", "envelope_error"]

ANONYMOUS = "anonymous"


@dataclass(frozen=True)
class AuthFailure:
    """Why a request was not authenticated (answered with HTTP 401)."""

    reason: str
    message: str


def check_can_serve(runtime: Runtime, insecure_anonymous: bool) -> None:
    """Refuse to serve over the network with no policy, unless anonymous access is explicit.

    Raises:
        ValueError: no policy is configured and ``insecure_anonymous`` is False.
    """
    if not runtime.policy_configured and not insecure_anonymous:
        raise ValueError(
            "no policy is configured, so no API key can be checked: give one with --policy or "
            "GLOVEBOX_POLICY (principals' api_key_sha256 authenticate callers), or pass "
            "--insecure-anonymous to let anyone who can reach the port call tools as 'anonymous'"
        )


def _key_from(headers: Mapping[str, str]) -> str | None:
    auth = headers.get("authorization")
    if auth is not None:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    key = headers.get("x-api-key")
    return key.strip() if key and key.strip() else None


def authenticate(runtime: Runtime, headers: Mapping[str, str], insecure_anonymous: bool) -> str | AuthFailure:
    """The principal a request authenticates as, or why it does not.

    A key that matches no principal always fails, even with ``insecure_anonymous``.
    """
    key = _key_from(headers)
    if key is None:
        if insecure_anonymous:
            return ANONYMOUS
        return AuthFailure(
            "missing_api_key", "an API key is required: send 'Authorization: Bearer KEY' or 'X-API-Key: KEY'"
        )
    principal = runtime.policy.principal_for_api_key(key)
    if principal is None:
        return AuthFailure("unknown_api_key", "the API key matches no principal of the policy")
    return principal


def envelope_error(
    code: str, message: str, *, details: Mapping[str, Any] | None = None, meta: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """An envelope for a failure that happened before any call ran (auth, size, JSON)."""
    return {
        "ok": False,
        "error": {"code": code, "message": message, "retryable": False, "details": dict(details or {})},
        "meta": {"call_id": None, **(meta or {})},
    }
