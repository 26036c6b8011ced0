"""The device flow (RFC 8628): a code the user enters on another device while the host polls for the token."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ._errors import ConnectError
from ._flows import DEVICE_GRANT, Prepared
from ._http import Backchannel
from ._store import ConnectionRecord, ConnectionStore
from ._tokens import check_token_response, client_auth, token_request

__all__ = ["device_flow"]


def device_flow(
    prepared: Prepared,
    store: ConnectionStore,
    show: Callable[[str, str, str | None], None],
    transport: Any = None,
    sleep: Callable[[float], None] = time.sleep,
) -> ConnectionRecord:
    """RFC 8628: ask for a device code, ``show(verification_uri, user_code, complete_uri)``, poll for the token."""
    metadata, record = prepared.metadata, prepared.record
    if metadata.device_authorization_endpoint is None:
        raise ConnectError("discovery_failed", f"{metadata.issuer} offers no device authorization endpoint")
    if prepared.tokens.get("client"):
        store.save(record, {"client": prepared.tokens["client"]})
    auth = client_auth(store, record)
    form = {"scope": prepared.settings.scope} if prepared.settings.scope else {}
    if record.resource:
        form["resource"] = record.resource
    with Backchannel(transport) as channel:
        status, grant = channel.json(
            "POST", metadata.device_authorization_endpoint, "the device endpoint",
            data={**form, **auth.get("data", {})}, auth=auth.get("auth"),
        )  # fmt: skip
        if status != 200 or not isinstance(grant.get("device_code"), str):
            raise ConnectError("token_refused", f"the device endpoint refused: {str(grant.get('error', status))[:64]}")
        show(
            str(grant.get("verification_uri", "")),
            str(grant.get("user_code", "")),
            grant.get("verification_uri_complete"),
        )
        interval = float(grant.get("interval", 5))
        deadline = time.monotonic() + float(grant.get("expires_in", 600))
        poll = {"grant_type": DEVICE_GRANT, "device_code": grant["device_code"], **form}
        while time.monotonic() < deadline:
            sleep(interval)
            try:
                document = token_request(channel, record.token_endpoint, poll, auth)
            except ConnectError as exc:
                if "authorization_pending" in exc.message:
                    continue
                if "slow_down" in exc.message:
                    interval += 5
                    continue
                if "expired_token" in exc.message:
                    break
                if "access_denied" in exc.message:
                    raise ConnectError(
                        "access_denied", f"the user refused the device authorization at {metadata.issuer}"
                    ) from None
                raise
            updated, tokens = check_token_response(document, record)
            return store.save(updated, tokens)
    raise ConnectError("device_expired", "the device code expired before it was approved")
