"""The one error of connections: :class:`ConnectError`, with a stable ``code``.

Codes (the message says what and where, never a token)::

    issuer_not_allowed   the authorization server is not in the policy's connections.issuers
    insecure_url         an OAuth URL is not https (plain http only to loopback)
    discovery_failed     no usable RFC 9728 / RFC 8414 metadata
    issuer_mismatch      the metadata's issuer is not the issuer it was fetched for (RFC 8414 §3.3)
    resource_mismatch    the protected-resource metadata names another resource (RFC 9728 §3.3)
    redirect_refused     an OAuth endpoint answered with a redirect (to another origin or not)
    registration_failed  dynamic client registration refused, and no --client-id given
    state_mismatch       a callback's state names no pending authorization (forged, replayed or expired)
    iss_mismatch         the authorization response's iss is not the issuer (RFC 9207)
    access_denied        the user or the server refused the authorization
    token_refused        the token endpoint refused (its OAuth error, e.g. invalid_grant on a PKCE mismatch)
    audience_mismatch    the access token is for another resource (RFC 8707)
    device_expired       the device code expired before the user approved it
    not_connected        no such connection (or account)
    revoked              the connection was revoked, or its refresh token no longer works
    expired              the access token expired and there is no refresh token
"""

from __future__ import annotations

__all__ = ["ConnectError"]


class ConnectError(Exception):
    """A connection could not be made, refreshed or used; ``code`` is one of the module's codes."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
