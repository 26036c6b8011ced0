"""Tokens of a connection: the token response checked, refreshed before expiry, revoked.

:func:`access_token` is what injection calls: the stored access token, or,
within :data:`REFRESH_SKEW_S` of its expiry, a refreshed one. A refresh holds
the connection's lock and reads the record again once it has it, so when two
processes find a token due at once, one refreshes and the other uses what the
first stored: a (rotating) refresh token is sent once. A refresh the server
refuses with ``invalid_grant`` marks the connection ``revoked``.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import replace
from typing import Any

from ._errors import ConnectError
from ._http import Backchannel
from ._store import ConnectionRecord, ConnectionStore

__all__ = ["REFRESH_SKEW_S", "access_token", "check_token_response", "revoke", "token_request"]

#: A token this close to its expiry (seconds) is refreshed before it is used.
REFRESH_SKEW_S = 60.0


def _due(record: ConnectionRecord, now: float) -> bool:
    return record.expires_at is not None and record.expires_at - REFRESH_SKEW_S <= now


def client_auth(store: ConnectionStore, record: ConnectionRecord) -> dict[str, Any]:
    """The client's credentials for a token or revocation request (basic auth, or ``client_id`` in the form)."""
    if record.client_secret:
        secret = store.token(record, "client")
        if secret is None:
            raise ConnectError("not_connected", f"{record.key}: the client secret is missing from the store")
        return {"auth": (record.client_id, secret), "data": {}}
    return {"data": {"client_id": record.client_id}}


def token_request(channel: Backchannel, endpoint: str, form: dict[str, str], auth: dict[str, Any]) -> dict[str, Any]:
    """POST ``form`` to the token endpoint; the answer, or ``token_refused`` naming the OAuth error."""
    data = {**form, **auth.get("data", {})}
    status, document = channel.json("POST", endpoint, "the token endpoint", data=data, auth=auth.get("auth"))
    if status != 200 or "access_token" not in document:
        error = str(document.get("error", f"HTTP {status}"))[:64]
        raise ConnectError("token_refused", f"the token endpoint {endpoint} refused: {error}")
    return document


def _jwt_claims(token: str) -> dict[str, Any] | None:
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    return claims if isinstance(claims, dict) else None


def check_token_response(document: dict[str, Any], record: ConnectionRecord) -> tuple[ConnectionRecord, dict[str, str]]:
    """The record and tokens a token response gives; ``audience_mismatch`` for a token meant elsewhere.

    A JWT access token's ``aud`` (and a response's ``aud``/``resource``) must name the connection's resource.
    """
    token_type = str(document.get("token_type", "bearer")).lower()
    if token_type not in ("bearer", "dpop"):
        raise ConnectError("token_refused", f"the token endpoint sent a {token_type!r} token, not a bearer token")
    access = document["access_token"]
    if not isinstance(access, str) or not access or any(c in access for c in "\r\n\0 "):
        raise ConnectError("token_refused", "the token endpoint sent an access token that is not a token")
    if record.resource:
        claims = _jwt_claims(access) or {}
        audience = claims.get("aud", document.get("aud", document.get("resource")))
        audiences = audience if isinstance(audience, list) else [audience] if audience is not None else []
        if audiences and not any(str(a).rstrip("/") == record.resource.rstrip("/") for a in audiences):
            raise ConnectError(
                "audience_mismatch",
                f"the access token is for {', '.join(map(str, audiences))}, not {record.resource}",
            )
    tokens = {"access": access}
    refresh = document.get("refresh_token")
    if isinstance(refresh, str) and refresh:
        tokens["refresh"] = refresh
    lifetime = document.get("expires_in")
    expires = time.time() + float(lifetime) if isinstance(lifetime, (int, float)) and lifetime > 0 else None
    scope = document.get("scope")
    updated = replace(
        record,
        expires_at=expires,
        has_refresh=record.has_refresh or "refresh" in tokens,
        revoked=False,
        scope=scope if isinstance(scope, str) else record.scope,
    )
    return updated, tokens


def access_token(
    store: ConnectionStore, name: str, account: str, transport: Any = None
) -> tuple[str, ConnectionRecord]:
    """The connection's access token (refreshed first when due) and its record."""
    record = store.get(name, account)
    if not _due(record, time.time()) and not record.revoked:
        token = store.token(record, "access")
        if token is not None:
            return token, record
    with store.refreshing(name, account):
        record = store.get(name, account)  # another process may have refreshed meanwhile
        if record.revoked:
            raise ConnectError("revoked", f"the connection {record.key} was revoked; run glovebox connect again")
        token = store.token(record, "access")
        if token is not None and not _due(record, time.time()):
            return token, record
        return _refresh(store, record, transport)


def _refresh(store: ConnectionStore, record: ConnectionRecord, transport: Any) -> tuple[str, ConnectionRecord]:
    refresh = store.token(record, "refresh")
    if refresh is None:
        raise ConnectError("expired", f"the access token of {record.key} expired and there is no refresh token")
    form = {"grant_type": "refresh_token", "refresh_token": refresh}
    if record.resource:
        form["resource"] = record.resource
    with Backchannel(transport) as channel:
        try:
            document = token_request(channel, record.token_endpoint, form, client_auth(store, record))
        except ConnectError as exc:
            if "invalid_grant" in exc.message:
                store.mark_revoked(record)
                raise ConnectError(
                    "revoked", f"the refresh token of {record.key} no longer works (invalid_grant)"
                ) from None
            raise
    updated, tokens = check_token_response(document, record)
    updated = store.save(updated, tokens)
    return tokens["access"], updated


def revoke(store: ConnectionStore, name: str, account: str, transport: Any = None) -> tuple[ConnectionRecord, bool]:
    """Revoke at the server (RFC 7009, when it offers it) and mark revoked here; whether the server was told."""
    record = store.get(name, account)
    told = False
    if record.revocation_endpoint and not record.revoked:
        with Backchannel(transport) as channel, store.refreshing(name, account):
            auth = client_auth(store, record)
            for kind, hint in (("refresh", "refresh_token"), ("access", "access_token")):
                token = store.token(record, kind)
                if token is None:
                    continue
                form = {"token": token, "token_type_hint": hint, **auth.get("data", {})}
                status, _ = channel.json(
                    "POST", record.revocation_endpoint, "the revocation endpoint", data=form, auth=auth.get("auth")
                )
                told = told or status == 200
    return store.mark_revoked(record), told
