"""Who is calling: API keys (``Authorization: Bearer KEY`` or ``X-API-Key: KEY``)
mapped to principals by the SHA-256 digests the policy holds.

Without a policy the HTTP servers refuse to start unless anonymous access is
asked for explicitly (``--insecure-anonymous``); then every request without a
key is the principal ``anonymous``.

A refused request answers 401 with an envelope saying how to send a key, and a
``WWW-Authenticate: Bearer realm="glovebox"`` challenge that points at no OAuth
metadata: glovebox takes API keys, and a client must not start an OAuth flow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..runtime._backend import CallBackend

__all__ = [
    "CHALLENGE",
    "KEY_HEADERS",
    "AuthFailure",
    "authenticate",
    "check_can_serve",
    "envelope_error",
    "unauthorized_body",
]

ANONYMOUS = "anonymous"
#: The ``WWW-Authenticate`` value of a 401: a bearer key, and no ``resource_metadata`` (no OAuth).
CHALLENGE = 'Bearer realm="glovebox"'
#: The two ways to send an API key, as a 401 body names them.
KEY_HEADERS = ("Authorization: Bearer KEY", "X-API-Key: KEY")


@dataclass(frozen=True)
class AuthFailure:
    """Why a request was not authenticated (answered with HTTP 401)."""

    reason: str
    message: str


def check_can_serve(runtime: CallBackend, insecure_anonymous: bool) -> None:
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


def authenticate(runtime: CallBackend, headers: Mapping[str, str], insecure_anonymous: bool) -> str | AuthFailure:
    """The principal a request authenticates as, or why it does not.

    A key that matches no principal always fails, even with ``insecure_anonymous``.
    """
    key = _key_from(headers)
    if key is None:
        if insecure_anonymous:
            return ANONYMOUS
        return AuthFailure(
            "missing_api_key",
            f"an API key is required: send the header '{KEY_HEADERS[0]}' or '{KEY_HEADERS[1]}' "
            "(this server takes API keys, not OAuth)",
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


def unauthorized_body(failure: AuthFailure) -> dict[str, Any]:
    """The envelope a 401 carries: why, and how to send a key."""
    details = {"reason": failure.reason, "send_one_of": list(KEY_HEADERS)}
    return envelope_error("permission_denied", failure.message, details=details)
