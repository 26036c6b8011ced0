"""Making a connection: discovery and registration, then the authorization-code flow or the device flow.

:func:`prepare` finds the authorization server (RFC 9728 from the resource,
or the issuer given), holds it to the policy's allowlist, reads its RFC 8414
metadata and registers a client (RFC 7591) unless a client id is given.

The browser flow is two halves, so that the console can serve the callback:
:func:`begin` keeps a pending authorization (its PKCE verifier, under a hash of
its ``state``, for :data:`PENDING_TTL_S`) and returns the URL to open;
:func:`finish` takes the callback's query, finds the pending authorization by
its state (once: it is deleted as it is read), checks ``iss`` (RFC 9207),
redeems the code with the verifier and stores the tokens.
The device flow (RFC 8628, for a terminal) is :mod:`._device`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from ._discovery import ServerMetadata, authorization_server, check_issuer, protected_resource
from ._errors import ConnectError
from ._http import Backchannel, check_secure
from ._store import DEFAULT_ACCOUNT, ConnectionRecord, ConnectionStore, check_name, pending_dir
from ._tokens import check_token_response, client_auth, token_request

__all__ = [
    "CALLBACK_PATH",
    "DEVICE_GRANT",
    "PENDING_TTL_S",
    "ConnectSettings",
    "Prepared",
    "begin",
    "complete",
    "finish",
    "prepare",
    "wait",
]

#: The console's callback path (the redirect URI is the console's origin + this).
CALLBACK_PATH = "/ui/connections/callback"
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
#: Seconds a browser authorization may take.
PENDING_TTL_S = 600.0


@dataclass(frozen=True)
class ConnectSettings:
    """What ``glovebox connect`` is told."""

    name: str
    resource: str | None = None
    issuer: str | None = None
    account: str = DEFAULT_ACCOUNT
    scope: str = ""
    client_id: str | None = None
    #: A secret reference (``env://...``, ``keyring://...``) holding the client secret of ``client_id``.
    client_secret_ref: str | None = None

    def __post_init__(self) -> None:
        check_name(self.name, "connection")
        check_name(self.account, "account")
        if self.resource is None and self.issuer is None:
            raise ValueError("a connection needs the resource's URL (--resource) or the issuer (--issuer)")


@dataclass(frozen=True)
class Prepared:
    """A connection's server and client, ready for a flow."""

    settings: ConnectSettings
    metadata: ServerMetadata
    record: ConnectionRecord
    tokens: dict[str, str]


def prepare(
    settings: ConnectSettings,
    allowed_issuers: Sequence[str],
    redirect_uri: str | None,
    transport: Any = None,
) -> Prepared:
    """Discover, check the issuer against ``allowed_issuers`` and register (or use the given client)."""
    with Backchannel(transport) as channel:
        issuer = settings.issuer
        if settings.resource is not None:
            try:
                document = protected_resource(settings.resource, channel)
            except ConnectError as exc:
                if issuer is None or exc.code != "discovery_failed":
                    raise
            else:
                servers = [str(s) for s in document["authorization_servers"]]
                if issuer is None:
                    issuer = servers[0]
                elif not any(s.rstrip("/") == issuer.rstrip("/") for s in servers):
                    raise ConnectError(
                        "issuer_mismatch", f"{settings.resource} names {', '.join(servers)}, not {issuer}"
                    )
        assert issuer is not None
        check_issuer(issuer, allowed_issuers)
        metadata = authorization_server(issuer, channel)
        client_id, secret = _client(settings, metadata, redirect_uri, channel)
    record = ConnectionRecord(
        name=settings.name,
        account=settings.account,
        issuer=issuer,
        token_endpoint=metadata.token_endpoint,
        client_id=client_id,
        resource=settings.resource,
        scope=settings.scope,
        revocation_endpoint=metadata.revocation_endpoint,
        client_secret=secret is not None,
    )
    return Prepared(settings, metadata, record, {"client": secret} if secret else {})


def _client(
    settings: ConnectSettings, metadata: ServerMetadata, redirect_uri: str | None, channel: Backchannel
) -> tuple[str, str | None]:
    if settings.client_id:
        if settings.client_secret_ref:
            from ..capabilities._providers import SecretUnavailable, get_secret

            try:
                return settings.client_id, get_secret(settings.client_secret_ref).decode("utf-8")
            except SecretUnavailable as exc:
                raise ConnectError("registration_failed", str(exc)) from None
        return settings.client_id, None
    if metadata.registration_endpoint is None:
        raise ConnectError(
            "registration_failed",
            f"{metadata.issuer} offers no dynamic client registration; give --client-id (and --client-secret-ref)",
        )
    body: dict[str, Any] = {
        "client_name": f"glovebox ({settings.name})",
        "grant_types": ["authorization_code", "refresh_token", DEVICE_GRANT],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "redirect_uris": [redirect_uri] if redirect_uri else [],
    }
    if settings.scope:
        body["scope"] = settings.scope
    status, document = channel.json("POST", metadata.registration_endpoint, "client registration", json=body)
    client_id = document.get("client_id")
    if status not in (200, 201) or not isinstance(client_id, str) or not client_id:
        error = str(document.get("error", f"HTTP {status}"))[:64]
        raise ConnectError("registration_failed", f"{metadata.registration_endpoint} refused to register: {error}")
    secret = document.get("client_secret")
    if document.get("token_endpoint_auth_method", "none") == "none" or not isinstance(secret, str) or not secret:
        return client_id, None  # a public client: PKCE is its proof
    return client_id, secret


def _state_file(store: ConnectionStore, state: str) -> Path:
    return pending_dir(store.home) / (hashlib.sha256(state.encode()).hexdigest() + ".json")


def begin(prepared: Prepared, redirect_uri: str, store: ConnectionStore) -> tuple[str, str]:
    """Keep a pending authorization; the URL to open in the browser and its ``state``."""
    metadata = prepared.metadata
    if metadata.authorization_endpoint is None:
        raise ConnectError("discovery_failed", f"{metadata.issuer} has no authorization endpoint; use --device")
    check_secure(redirect_uri, "redirect URI")
    state, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(64)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    sealed = None
    if prepared.tokens.get("client"):  # a client secret waits sealed in the store, never in the pending file
        sealed = "pending." + hashlib.sha256(state.encode()).hexdigest()[:32]
        store.vault.set(sealed, prepared.tokens["client"].encode("utf-8"))
    pending = {
        "record": asdict(prepared.record),
        "sealed_client": sealed,
        "verifier": verifier,
        "redirect_uri": redirect_uri,
        "iss_parameter": metadata.iss_parameter,
        "created": time.time(),
    }
    folder = pending_dir(store.home)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    _sweep(folder)
    descriptor = os.open(_state_file(store, state), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(pending, handle)
    query = {
        "response_type": "code",
        "client_id": prepared.record.client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    if prepared.settings.scope:
        query["scope"] = prepared.settings.scope
    if prepared.record.resource:
        query["resource"] = prepared.record.resource
    separator = "&" if "?" in metadata.authorization_endpoint else "?"
    return metadata.authorization_endpoint + separator + urlencode(query), state


def _sweep(folder: Path) -> None:
    """Forget authorizations (and outcomes) older than twice :data:`PENDING_TTL_S`: nobody waits for them."""
    oldest = time.time() - 2 * PENDING_TTL_S
    for path in folder.iterdir():
        try:
            if path.stat().st_mtime < oldest:
                path.unlink()
        except OSError:
            pass


def _take_pending(store: ConnectionStore, state: str) -> dict[str, Any]:
    path = _state_file(store, state)
    try:
        text = path.read_text(encoding="utf-8")
        path.unlink()
    except FileNotFoundError:
        raise ConnectError(
            "state_mismatch", "the callback's state names no pending authorization (forged, replayed or expired)"
        ) from None
    pending: dict[str, Any] = json.loads(text)
    pending["tokens"] = {}
    if pending.get("sealed_client"):
        pending["tokens"]["client"] = store.vault.get(pending["sealed_client"]).decode("utf-8")
        store.vault.remove(pending["sealed_client"])
    if time.time() - float(pending["created"]) > PENDING_TTL_S:
        raise ConnectError("state_mismatch", "the authorization took over 10 minutes; run glovebox connect again")
    return pending


def finish(params: Mapping[str, str], store: ConnectionStore, transport: Any = None) -> ConnectionRecord:
    """Complete an authorization from its callback's query (``code``, ``state``, ``iss``, or ``error``)."""
    pending = _take_pending(store, str(params.get("state", "")))
    record = ConnectionRecord(**pending["record"])
    iss = params.get("iss")
    if (iss is not None or pending["iss_parameter"]) and (iss or "").rstrip("/") != record.issuer.rstrip("/"):
        raise ConnectError("iss_mismatch", f"the authorization response came from {iss!r}, not {record.issuer}")
    if params.get("error"):
        raise ConnectError("access_denied", f"{record.issuer} answered {str(params['error'])[:64]}")
    code = params.get("code")
    if not code:
        raise ConnectError("access_denied", f"{record.issuer} sent no code")
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": pending["redirect_uri"],
        "code_verifier": pending["verifier"],
    }
    if record.resource:
        form["resource"] = record.resource
    return _redeem(store, record, pending["tokens"], form, transport)


def complete(params: Mapping[str, str], store: ConnectionStore, transport: Any = None) -> ConnectionRecord:
    """:func:`finish`, leaving its outcome (code and message, never a token) for :func:`wait` to read."""
    state = str(params.get("state", ""))
    pending = _state_file(store, state)
    known = pending.exists()  # an outcome is left only for a flow that began here (a forged state leaves nothing)
    outcome: dict[str, Any]
    try:
        record = finish(params, store, transport)
    except ConnectError as exc:
        outcome = {"ok": False, "code": exc.code, "message": exc.message}
        raise
    else:
        outcome = {"ok": True, "name": record.name, "account": record.account}
        return record
    finally:
        if known:
            done = pending.with_suffix(".done")
            descriptor = os.open(done, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                json.dump(outcome, handle)


def wait(
    store: ConnectionStore, state: str, timeout_s: float, sleep: Callable[[float], None] = time.sleep
) -> ConnectionRecord:
    """Wait for the callback of the authorization ``state`` (served by the console) to complete it."""
    done = _state_file(store, state).with_suffix(".done")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            outcome = json.loads(done.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            sleep(0.2)
            continue
        done.unlink(missing_ok=True)
        if not outcome.get("ok"):
            raise ConnectError(str(outcome.get("code")), str(outcome.get("message")))
        return store.get(str(outcome["name"]), str(outcome["account"]))
    _state_file(store, state).unlink(missing_ok=True)
    raise ConnectError("access_denied", f"no callback came within {timeout_s:.0f} s; run glovebox connect again")


def _redeem(
    store: ConnectionStore, record: ConnectionRecord, kept: dict[str, str], form: dict[str, str], transport: Any
) -> ConnectionRecord:
    if kept.get("client"):
        store.save(record, {"client": kept["client"]})
    with Backchannel(transport) as channel:
        document = token_request(channel, record.token_endpoint, form, client_auth(store, record))
    updated, tokens = check_token_response(document, record)
    return store.save(updated, tokens)
