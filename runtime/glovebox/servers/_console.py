"""The operator console: server-rendered pages under ``/ui`` of ``glovebox serve``.

Pages (HTML; Jinja2 templates and a stylesheet shipped in ``servers/ui/``)::

    GET  /ui, /ui/                  the front door: to /ui/tools
    GET  /ui/signin                 the sign-in form (an API key)
    POST /ui/signin                 starts a session (cookie), then to /ui/tools
    POST /ui/signout                ends it
    GET  /ui/approvals              pending requests (the approver scope), kept live by ui/static/console.js
    GET  /ui/approvals/mark         {"mark": ...}, which changes whenever the pending requests do (the approver scope)
    POST /ui/approvals/{id}/approve approve one, as the viewer (the approver scope)
    POST /ui/approvals/{id}/deny    deny one with a reason the caller is told (the approver scope)
    GET  /ui/audit                  the log, newest first, filtered (principal, tool, outcome, since,
                                    until), paginated by seq (glovebox:audit)
    GET  /ui/audit/{seq}            one record (glovebox:audit)
    POST /ui/audit/verify           walk the chain, show the result (glovebox:audit)
    GET  /ui/audit/export.jsonl     the whole log as JSON Lines (glovebox:audit)
    GET  /ui/runs                   code-mode runs, newest first, paginated: the viewer's own; every
                                    principal's with glovebox:audit
    GET  /ui/runs/{id}              one run: its steps from the journal, its output or error (as the list)
    POST /ui/runs/{id}/resume       resume a paused run, as the run's own principal (its principal, or an
                                    approver who may see it; who pressed it is kept in the run and in
                                    the attempt's audit row)
    POST /ui/runs/{id}/cancel       cancel an unfinished run (as resume; who pressed it is kept in the run,
                                    ``cancelled_by``, and in the cancel's audit row)
    GET  /ui/tools                  the tools the viewer may see, each with its last calls' outcomes (any principal)
    GET  /ui/connections            the OAuth connections (the viewer's accounts; all with glovebox:audit)
    GET  /ui/connections/callback   the redirect URI of ``glovebox connect``: completes its authorization
    POST /ui/connections/{n}/{a}/revoke  revoke one (its account's principal, or glovebox:audit)
    GET  /ui/health                 policy digest and error, admission counters, breakers, and charts of
                                    the last 30 minutes' calls by outcome and p50/p99 (glovebox:audit)

Each area is its own router module: ``_uisignin`` (sign-in, sessions),
``_uitools``, ``_uiaudit`` (calls and the audit log), ``_uiapprovals``,
``_uiruns``, ``_uihealth``, ``_uiconnections``; ``_uibase`` holds what they share. Who the viewer
is comes from Starlette's ``AuthenticationMiddleware`` (``servers._identity``),
what it may open from the :func:`~glovebox.servers._refusals.requires` guard
each handler wears, and forms are checked by ``servers._guards.FormGuard``;
a handler refuses by raising (``servers._refusals``) and :meth:`Console.render_refusal`
renders every refusal, Starlette's own 404 and 405 under ``/ui`` included, as
one error page.

Who: a request with an API key header (``Authorization: Bearer KEY`` or
``X-API-Key``) is that key's principal; otherwise the session cookie names
one (``HttpOnly``, ``SameSite=Strict``, ``Secure`` over TLS; its value is an
opaque id, see ``servers._sessions``). A page asked for without either is
redirected to the sign-in form; a form posted without either answers 401.
Every form carries a CSRF token (the session's, or for the sign-in form a
double-submitted cookie) and a post whose token is missing or wrong answers
403, as does one whose ``Origin`` is another site. Pages a principal lacks the
scope for answer 403. Every answer carries ``Content-Security-Policy:
default-src 'self'`` (no inline script or style runs: the one script is
``ui/static/console.js``), ``X-Frame-Options:
DENY`` and ``Cache-Control: no-store``; every value is escaped by Jinja's
autoescape.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlencode

from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from ..runtime._backend import CallBackend
from ._guards import FormGuard
from ._identity import KeyOrSession, authentication
from ._refusals import Refused, Unauthenticated
from ._uiapprovals import ApprovalPages
from ._uiaudit import AuditPages
from ._uibase import AUDIT_SCOPE, PAGE_ROWS, UI, ConsoleState
from ._uiconnections import ConnectionPages
from ._uihealth import HealthPage
from ._uiruns import RunPages
from ._uisignin import SigninPages
from ._uitools import ToolPages

__all__ = ["AUDIT_SCOPE", "PAGE_ROWS", "Console"]

_ROUTERS = (SigninPages, ToolPages, AuditPages, ApprovalPages, RunPages, HealthPage, ConnectionPages)


class Console:
    """The console's routes over one backend, and the one renderer of their refusals."""

    def __init__(self, runtime: CallBackend, pool: ThreadPoolExecutor, insecure_anonymous: bool) -> None:
        self.state = ConsoleState(runtime, pool, insecure_anonymous)

    def close(self) -> None:
        """Release what the pages hold (the approval store's connection)."""
        self.state.close()

    def routes(self) -> list[BaseRoute]:
        """Every console route: pages authenticate their viewer, forms are guarded too."""
        viewers = [authentication(KeyOrSession(self.state.runtime, self.state.insecure_anonymous, self.state.sessions))]
        forms = [*viewers, Middleware(FormGuard)]
        routes: list[BaseRoute] = []
        for router in _ROUTERS:
            routes += router(self.state).routes(viewers, forms)
        routes.append(Mount("/ui/static", app=StaticFiles(directory=str(UI / "static")), name="console-static"))
        return routes

    async def render_refusal(self, request: Request, exc: Exception) -> Response:
        """The answer to a refusal under ``/ui``: a page asked for unsigned goes to the sign-in form,
        everything else is the error page with the refusal's status."""
        if isinstance(exc, Unauthenticated):
            if request.method == "GET":
                return RedirectResponse("/ui/signin?" + urlencode({"next": request.url.path}), status_code=303)
            return self._error(request, 401, "sign in first: no session or API key")
        if isinstance(exc, Refused):
            return self._error(request, exc.status, exc.message)
        assert isinstance(exc, HTTPException)
        headers = dict(exc.headers or {})
        if exc.status_code == 404:
            return self._error(request, 404, f"no console page {request.url.path!r}: the console starts at /ui/tools")
        if exc.status_code == 405:
            message = f"{request.method} is not allowed on this page; it answers {headers.get('Allow', 'nothing')}"
            return self._error(request, 405, message, headers)
        return self._error(request, exc.status_code, str(exc.detail), headers)

    def _error(self, request: Request, status: int, message: str, headers: dict[str, str] | None = None) -> Response:
        response = self.state.page(request, "error.html", status=status, message=message)
        response.headers.update(headers or {})
        return response
