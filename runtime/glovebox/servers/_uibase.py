"""What the console's routers share: the backend, the sessions, the audit and approval stores, the templates.

Each router (``servers._ui*``) takes one :class:`ConsoleState`; handlers render
a page with :meth:`ConsoleState.page` and refuse by raising
``servers._refusals``, rendered once by ``servers._console``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from ..audit._log import AuditLog
from ..core._canonical import canonical_json, sha256_digest
from ..policy import ApprovalStore
from ..runtime._backend import CallBackend
from ..runtime._coderun import AUDIT_SCOPE
from ._identity import Viewer
from ._sessions import Sessions

__all__ = [
    "AUDIT_SCOPE",
    "PAGE_ROWS",
    "STEP_CHARS",
    "ConsoleState",
    "clip",
    "int_param",
    "iso",
    "moment",
    "local",
    "policy_digest",
    "pretty",
    "set_cookie",
]

#: Rows on one page of approvals, audit records or runs.
PAGE_ROWS = 50
#: Characters of a step's request or result, or a run's source, shown on a run's page.
STEP_CHARS = 4000
UI = Path(__file__).parent / "ui"
T = TypeVar("T")


def iso(seconds: float | None) -> str:
    """Unix seconds as ISO 8601 UTC (``2026-12-01T16:40:00Z``); empty for None."""
    if seconds is None:
        return ""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def moment(text: str | None) -> str:
    """An audit row's ISO 8601 time to the second, as the page shows it (``2026-12-01 16:40:00``)."""
    if not text:
        return ""
    return text[:19].replace("T", " ")


def shown(value: Any) -> Any:
    """What a page prints for a value: an em dash for None (Python's ``None`` is never shown)."""
    return "\u2014" if value is None else value


def policy_digest(runtime: CallBackend) -> str:
    """``sha256:`` of the policy in force, as canonical JSON."""
    return sha256_digest(canonical_json(runtime.policy.model_dump(mode="json")))


def pretty(value: Any) -> str:
    """A JSON value (or JSON text, as the audit stores it) indented; other text as it is."""
    if isinstance(value, str):
        text = value
        try:
            value = json.loads(text)
        except ValueError:
            return text
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def clip(text: str, limit: int = STEP_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how much more there was."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"… ({len(text) - limit} more characters)"


def int_param(text: str | None, default: int) -> int:
    """A query parameter as a non-negative integer, or ``default``."""
    return int(text) if text is not None and text.isdigit() and len(text) < 19 else default


def local(target: str | None) -> str:
    """``target`` when it is a console path, else the tools page (no open redirect)."""
    if target and target.startswith("/ui/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/ui/tools"


def set_cookie(request: Request, response: Response, name: str, value: str, *, path: str) -> None:
    """An ``HttpOnly``, ``SameSite=Strict`` cookie, ``Secure`` over TLS."""
    secure = request.url.scheme == "https"
    response.set_cookie(name, value, path=path, httponly=True, samesite="strict", secure=secure)


def viewer_of(request: Request) -> Viewer | None:
    """The request's authenticated viewer, or None (no session, or a route that authenticates no one)."""
    user = request.scope.get("user")
    return user if isinstance(user, Viewer) else None


class ConsoleState:
    """The console's shared state and its page renderer."""

    def __init__(self, runtime: CallBackend, pool: ThreadPoolExecutor, insecure_anonymous: bool) -> None:
        self.runtime = runtime
        self.pool = pool
        self.insecure_anonymous = insecure_anonymous
        self.sessions = Sessions()
        self.audit: AuditLog = runtime.audit
        # Pages of the home's requests are read here; approving goes through the backend (its scope check).
        self.requests = ApprovalStore(runtime.home)
        loader = jinja2.FileSystemLoader(str(UI / "templates"))
        self.templates = jinja2.Environment(
            loader=loader, autoescape=True, undefined=jinja2.StrictUndefined, finalize=shown
        )
        self.templates.filters["iso"] = iso
        self.templates.filters["moment"] = moment
        self.templates.filters["pretty"] = pretty

    def close(self) -> None:
        self.requests.close()

    @property
    def approver_scope(self) -> str:
        """The scope that approves and denies requests (the policy in force names it)."""
        return self.runtime.policy.approvals.approver_scope

    async def run(self, job: Callable[[], T]) -> T:
        """``job`` on the server's worker threads (the event loop never waits on a store)."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, job)

    def page(self, request: Request, name: str, *, status: int = 200, **values: Any) -> Response:
        """The template ``name`` rendered for the request's viewer."""
        viewer = values.setdefault("viewer", viewer_of(request))
        auth = request.scope.get("auth")
        scopes = set(auth.scopes) if viewer is not None and auth is not None else set()
        # The menu names only the pages the viewer's scopes open.
        menu = {
            "approvals": self.approver_scope in scopes,
            "audit": AUDIT_SCOPE in scopes,
            "health": AUDIT_SCOPE in scopes,
            "scopes": scopes,
        }
        template = self.templates.get_template(name)
        html = template.render(
            path=request.url.path, audit_scope=AUDIT_SCOPE, approver_scope=self.approver_scope, menu=menu, **values
        )
        return HTMLResponse(html, status_code=status)
