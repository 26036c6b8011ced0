"""The console's sign-in, sign-out and its front door (``/ui`` and ``/ui/``: the tools page)."""

from __future__ import annotations

import secrets

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ._guards import SIGNIN_COOKIE, FormGuard
from ._refusals import requires
from ._sessions import COOKIE
from ._uibase import ConsoleState, local, set_cookie

__all__ = ["SigninPages"]


class SigninPages:
    """``GET|POST /ui/signin``, ``POST /ui/signout``, ``GET /ui`` and ``GET /ui/``."""

    def __init__(self, ui: ConsoleState) -> None:
        self.ui = ui

    def routes(self, viewers: list[Middleware], forms: list[Middleware]) -> list[BaseRoute]:
        return [
            Route("/ui", self.index, methods=["GET"]),
            Route("/ui/", self.index, methods=["GET"]),
            Route("/ui/signin", self.signin_form, methods=["GET"]),
            Route("/ui/signin", self.signin, methods=["POST"], middleware=[Middleware(FormGuard, double_submit=True)]),
            Route("/ui/signout", self.signout, methods=["POST"], middleware=forms),
        ]

    async def index(self, request: Request) -> Response:
        return RedirectResponse("/ui/tools", status_code=303)

    async def signin_form(self, request: Request) -> Response:
        return self._form(request, local(request.query_params.get("next")))

    def _form(self, request: Request, next_page: str, *, status: int = 200, message: str | None = None) -> Response:
        token = secrets.token_urlsafe(32)
        extra = {} if message is None else {"message": message}
        response = self.ui.page(
            request, "signin.html", viewer=None, status=status, token=token, next=next_page, **extra
        )
        set_cookie(request, response, SIGNIN_COOKIE, token, path="/ui/signin")
        return response

    async def signin(self, request: Request) -> Response:
        form: dict[str, str] = request.state.form
        key = form.get("api_key", "").strip()
        principal = self.ui.runtime.policy.principal_for_api_key(key) if key else None
        if principal is None:
            message = "the API key matches no principal of the policy"
            return self._form(request, local(form.get("next")), status=401, message=message)
        response = RedirectResponse(local(form.get("next")), status_code=303)
        set_cookie(request, response, COOKIE, self.ui.sessions.start(principal, key), path="/ui")
        response.delete_cookie(SIGNIN_COOKIE, path="/ui/signin")
        return response

    @requires()
    async def signout(self, request: Request) -> Response:
        self.ui.sessions.end(request.user.session_id)
        response = RedirectResponse("/ui/signin", status_code=303)
        response.delete_cookie(COOKIE, path="/ui")
        return response
