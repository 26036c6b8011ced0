"""The HTTP API's refusals and its answers to requests that reach no handler, in the envelope shape.

A :class:`~glovebox.servers._refusals.Refused` a handler or guard raises is
answered here, once: its status, and an envelope with its code, message,
details and meta (a 401 adds how to send a key and a ``WWW-Authenticate``
challenge). Starlette answers an unknown route (404), a method a route does not serve
(405) and an exception escaping a handler (500) in plain text; these handlers
answer the envelope instead, with ``meta.call_id`` null since no call ran. A
500 is opaque: the traceback goes to the ``glovebox`` logger, never to the
caller, and the connection stays usable (Starlette's own error middleware
would re-raise to the server, which drops the connection).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..core._errors import ToolNotFound
from ._auth import CHALLENGE, envelope_error, unauthorized_body
from ._refusals import NotFound, Refused, Unauthenticated

__all__ = ["ROUTES_HINT", "Renderer", "answer_failures", "exception_handlers", "not_visible"]

#: A page renderer for a path prefix (the console's): ``(request, exception) -> answer``.
Renderer = Callable[[Request, Exception], Awaitable[Response]]

logger = logging.getLogger("glovebox")

ROUTES_HINT = "GET /v1/tools, GET /v1/tools/{name}, POST /v1/tools/{name}/call, GET /healthz, GET /metrics"


def not_visible(name: str, principal: str) -> NotFound:
    """The ``tool_not_found`` refusal for a tool ``principal`` may not see or that does not exist.

    It names no other tool: what a caller may see is ``GET /v1/tools``.
    """
    error = ToolNotFound(f"no tool named {name!r} is visible to {principal!r}")
    meta = {"tool": name, "principal": principal}
    return NotFound(error.message, code=error.code, details={"tool": name}, meta=meta)


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refused)
    if isinstance(exc, Unauthenticated):
        body = unauthorized_body(exc.failure) if exc.failure is not None else envelope_error(exc.code, exc.message)
        return JSONResponse(body, status_code=exc.status, headers={"WWW-Authenticate": CHALLENGE})
    body = envelope_error(exc.code, exc.message, details=exc.details, meta=exc.meta)
    return JSONResponse(body, status_code=exc.status)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    headers: Mapping[str, str] | None = exc.headers
    details: dict[str, Any] = {"status": exc.status_code}
    if exc.status_code == 404:
        message = f"no such route; the API serves {ROUTES_HINT}"
    elif exc.status_code == 405:
        allowed = sorted(method.strip() for method in (headers or {}).get("Allow", "").split(",") if method.strip())
        message = f"{request.method} is not allowed on this route; it serves {', '.join(allowed)}"
        details["allowed"] = allowed
    else:
        message = str(exc.detail)
    code = "internal_error" if exc.status_code >= 500 else "invalid_input"
    return JSONResponse(envelope_error(code, message, details=details), status_code=exc.status_code, headers=headers)


def exception_handlers(pages: Mapping[str, Renderer] | None = None) -> dict[Any, Any]:
    """Starlette ``exception_handlers`` for every ``Refused`` and ``HTTPException``.

    ``pages`` maps a path prefix (``"/ui"``) to the renderer of the pages under
    it; every other path is answered with the envelope.
    """
    prefixes = dict(pages or {})

    def dispatch(api: Renderer) -> Renderer:
        async def handle(request: Request, exc: Exception) -> Response:
            path = request.url.path
            for prefix, render in prefixes.items():
                if path == prefix or path.startswith(prefix + "/"):
                    return await render(request, exc)
            return await api(request, exc)

        return handle

    return {Refused: dispatch(_refused), HTTPException: dispatch(_http_error)}


def answer_failures(app: Callable[..., Any]) -> Callable[..., Any]:
    """ASGI middleware answering an exception that escapes ``app`` with an opaque 500 envelope."""

    async def middleware(scope: dict[str, Any], receive: Any, send: Any) -> None:
        started = False

        async def send_watched(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await app(scope, receive, send_watched)
        except Exception:
            if scope["type"] != "http" or started:
                raise
            logger.exception("unexpected error answering %s %s", scope.get("method"), scope.get("path"))
            message = "internal error; the server's log holds the detail"
            await JSONResponse(envelope_error("internal_error", message), status_code=500)(scope, receive, send)

    return middleware
