"""The HTTP API's answers to requests that reach no handler, in the envelope shape.

Starlette answers an unknown route (404), a method a route does not serve
(405) and an exception escaping a handler (500) in plain text; these handlers
answer the envelope instead, with ``meta.call_id`` null since no call ran. A
500 is opaque: the traceback goes to the ``glovebox`` logger, never to the
caller, and the connection stays usable (Starlette's own error middleware
would re-raise to the server, which drops the connection).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..core._errors import ToolNotFound
from ._auth import envelope_error

__all__ = ["ROUTES_HINT", "answer_failures", "exception_handlers", "not_visible"]

logger = logging.getLogger("glovebox")

ROUTES_HINT = "GET /v1/tools, GET /v1/tools/{name}, POST /v1/tools/{name}/call, GET /healthz, GET /metrics"


def not_visible(name: str, principal: str) -> dict[str, Any]:
    """The ``tool_not_found`` envelope for a tool ``principal`` may not see or that does not exist.

    It names no other tool: what a caller may see is ``GET /v1/tools``.
    """
    error = ToolNotFound(f"no tool named {name!r} is visible to {principal!r}")
    meta = {"tool": name, "principal": principal}
    return envelope_error(error.code, error.message, details={"tool": name}, meta=meta)


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


def exception_handlers() -> dict[Any, Any]:
    """Starlette ``exception_handlers``: every ``HTTPException``."""
    return {HTTPException: _http_error}


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
