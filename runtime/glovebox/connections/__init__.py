"""OAuth 2.1 connections: an account's tokens for an imported API or a remote MCP server.

``glovebox connect NAME`` makes one (:mod:`._flows`: discovery, registration,
the authorization-code flow with PKCE through the console's callback, or the
device flow); the tokens are kept in the home's encrypted store
(:mod:`._store`), refreshed by the host under a lock (:mod:`._tokens`) and
injected as ``connection://NAME[/ACCOUNT]`` secrets (:mod:`._provider`).
Every failure is a :class:`ConnectError` with a stable code.
"""

from __future__ import annotations

from ._device import device_flow
from ._errors import ConnectError
from ._flows import CALLBACK_PATH, ConnectSettings, Prepared, begin, complete, finish, prepare, wait
from ._store import DEFAULT_ACCOUNT, ConnectionRecord, ConnectionStore
from ._tokens import access_token, revoke

__all__ = [
    "CALLBACK_PATH",
    "DEFAULT_ACCOUNT",
    "ConnectError",
    "ConnectSettings",
    "ConnectionRecord",
    "ConnectionStore",
    "Prepared",
    "access_token",
    "begin",
    "complete",
    "device_flow",
    "finish",
    "prepare",
    "revoke",
    "wait",
]
