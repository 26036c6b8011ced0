"""Refusals a handler raises, rendered once by the app's exception handlers.

A handler (or a guard) raises one of these instead of building an error
answer; ``servers._apierrors`` renders it as the API's envelope and the
console (``servers._uibase``) as its error page, each with the same status::

    Refused                 the root: a status, a message, and the API envelope's code, details, meta
     ├── BadRequest         400 (invalid_input)
     ├── Unauthenticated    401 (permission_denied; the console redirects a page to its sign-in form)
     ├── Forbidden          403 (permission_denied)
     ├── NotFound           404 (tool_not_found on the API)
     ├── Conflict           409 (invalid_input)
     └── TooLarge           413 (invalid_input)

:func:`requires` is the guard a handler wears: the caller must be
authenticated (``Unauthenticated``) and hold a scope (``Forbidden``).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from ._auth import AuthFailure

__all__ = [
    "BadRequest",
    "Conflict",
    "Forbidden",
    "NotFound",
    "Refused",
    "TooLarge",
    "Unauthenticated",
    "requires",
]


class Refused(Exception):
    """A request refused with ``status``; ``code``, ``details`` and ``meta`` shape the API's envelope."""

    status = 400
    code = "invalid_input"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        details: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or type(self).code
        self.details = dict(details or {})
        self.meta = dict(meta or {})


class BadRequest(Refused):
    """400: the request's content is refused."""


class Unauthenticated(Refused):
    """401: no session and no (known) API key; ``failure`` says which, when a key was looked at."""

    status = 401
    code = "permission_denied"

    def __init__(self, failure: AuthFailure | None) -> None:
        super().__init__(failure.message if failure is not None else "sign in first: no session or API key")
        self.failure = failure


class Forbidden(Refused):
    """403: the caller may not do this."""

    status = 403
    code = "permission_denied"


class NotFound(Refused):
    """404: nothing the caller may see is there."""

    status = 404
    code = "tool_not_found"


class Conflict(Refused):
    """409: the thing is no longer in a state that allows this (a replayed form)."""

    status = 409


class TooLarge(Refused):
    """413: the request's body is over the limit."""

    status = 413


S = TypeVar("S")
Handler = Callable[[S, Request], Awaitable[Response]]


def requires(scope: str | Callable[[Any], str] | None = None) -> Callable[[Handler[S]], Handler[S]]:
    """Guard a handler method: the request's user must be authenticated and hold ``scope``.

    ``scope`` is a scope, or a function of the handler's object giving it at
    request time (the approver scope comes from the policy in force), or None
    for any authenticated caller. The user and its scopes come from
    Starlette's ``AuthenticationMiddleware`` (``servers._identity``).
    """

    def decorate(handler: Handler[S]) -> Handler[S]:
        @functools.wraps(handler)
        async def guarded(owner: S, request: Request) -> Response:
            user = request.user
            if not user.is_authenticated:
                raise Unauthenticated(getattr(user, "failure", None))
            needed = scope(owner) if callable(scope) else scope
            if needed is not None and needed not in request.auth.scopes:
                raise Forbidden(f"principal {user.display_name!r} lacks the scope {needed!r} this page needs")
            return await handler(owner, request)

        return guarded

    return decorate
