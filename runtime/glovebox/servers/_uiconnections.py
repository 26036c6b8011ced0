"""The console's connections: the OAuth callback of ``glovebox connect`` and the connections page.

``GET /ui/connections/callback`` is the redirect URI ``glovebox connect``
registers (the console's origin + ``CALLBACK_PATH``). The browser arrives there
from the authorization server; the pending authorization its ``state`` names
(kept in the home by ``glovebox connect``, which waits for it) is completed:
``iss`` checked, the code redeemed with the PKCE verifier, the tokens stored
encrypted. It asks for no sign-in (the state, random, single-use and short
lived, is what binds the answer to the flow that began it) and shows no token.

``GET /ui/connections`` lists connections and their status (valid,
refreshable, expired, revoked): the viewer's own accounts (account = principal),
every one with ``glovebox:audit``. ``POST /ui/connections/{name}/{account}/revoke``
revokes one (RFC 7009 when offered), for the account's principal or an auditor.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ..connections import CALLBACK_PATH, ConnectError, ConnectionStore, complete, revoke
from ._refusals import BadRequest, Forbidden, NotFound, requires
from ._uibase import AUDIT_SCOPE, ConsoleState

__all__ = ["ConnectionPages"]


class ConnectionPages:
    """``GET /ui/connections``, ``GET /ui/connections/callback``, ``POST /ui/connections/{n}/{a}/revoke``."""

    def __init__(self, ui: ConsoleState) -> None:
        self.ui = ui

    def routes(self, viewers: list[Middleware], forms: list[Middleware]) -> list[BaseRoute]:
        return [
            Route(CALLBACK_PATH, self.callback, methods=["GET"], middleware=viewers),
            Route("/ui/connections", self.listing, methods=["GET"], middleware=viewers),
            Route("/ui/connections/{name}/{account}/revoke", self.revoke, methods=["POST"], middleware=forms),
        ]

    def _store(self) -> ConnectionStore:
        return ConnectionStore(self.ui.runtime.home)

    async def callback(self, request: Request) -> Response:
        params = {key: value for key, value in request.query_params.items()}
        try:
            record = await self.ui.run(functools.partial(complete, params, self._store()))
        except ConnectError as error:
            raise BadRequest(f"the connection was not made: {error.code}: {error.message}", code=error.code) from None
        return self.ui.page(request, "connected.html", record=record, status_text=record.status())

    @requires()
    async def listing(self, request: Request) -> Response:
        records = await self.ui.run(self._store().records)
        everyone = AUDIT_SCOPE in request.auth.scopes
        now = time.time()
        rows = [
            {"record": record, "status": record.status(now), "expires": record.expires_at}
            for record in records
            if everyone or record.account == request.user.identity
        ]
        return self.ui.page(request, "connections.html", rows=rows, everyone=everyone)

    @requires()
    async def revoke(self, request: Request) -> Response:
        name, account = request.path_params["name"], request.path_params["account"]
        if account != request.user.identity and AUDIT_SCOPE not in request.auth.scopes:
            raise Forbidden(f"principal {request.user.display_name!r} may revoke only its own connections")
        try:
            await self.ui.run(functools.partial(_revoke, self._store(), name, account))
        except ConnectError as error:
            raise NotFound(error.message) from None
        return RedirectResponse("/ui/connections", status_code=303)


def _revoke(store: ConnectionStore, name: str, account: str) -> Any:
    return revoke(store, name, account)
