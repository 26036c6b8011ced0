"""ASGI middleware guarding every answer and every console form.

- :class:`SecureHeaders` (the whole app): every answer carries
  :data:`SECURITY_HEADERS` (a strict Content-Security-Policy, no framing, no
  sniffing, no caching), whatever made it: a page, a refusal, Starlette's own
  404 or 405, a static file, the opaque 500.
- :class:`FormGuard` (the console's POST routes): a form posted from another
  site (its ``Origin`` is not this server's) or without the CSRF token it
  must carry is refused with :class:`Forbidden` before any handler runs. The
  token is the session's; a form posted with a key in a header needs none
  (another site's page cannot send one); the sign-in form, posted before any
  session exists, carries a double-submitted cookie's value instead. The
  parsed form is left in ``request.state.form``.
"""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._refusals import Forbidden
from ._sessions import same_token

__all__ = ["FORM_BYTES", "SECURITY_HEADERS", "SIGNIN_COOKIE", "FormGuard", "SecureHeaders"]

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make a form's Origin "null"
    "Cache-Control": "no-store",
}
_RAW_HEADERS = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in SECURITY_HEADERS.items()]
#: The double-submitted cookie of the sign-in form.
SIGNIN_COOKIE = "glovebox_signin"
#: Bytes of a posted form that are read (a console form is a few hundred).
FORM_BYTES = 64 * 1024


class SecureHeaders:
    """Add :data:`SECURITY_HEADERS` to every HTTP answer of ``app`` (a header already set is replaced)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in _RAW_HEADERS}
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": [*kept, *_RAW_HEADERS]}
            await send(message)

        await self.app(scope, receive, send_secured)


class FormGuard:
    """Refuse a cross-site or token-less form post; leave the form in ``request.state.form``."""

    def __init__(self, app: ASGIApp, *, double_submit: bool = False) -> None:
        self.app = app
        self.double_submit = double_submit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        origin = request.headers.get("origin")
        if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
            raise Forbidden("a form posted from another site")
        body = await _read(receive)
        text = body[:FORM_BYTES].decode("utf-8", "replace")
        form = {k: v[0] for k, v in parse_qs(text, keep_blank_values=True).items()}
        expected = self._expected(request)
        if expected is not None and not same_token(form.get("csrf"), expected):
            raise Forbidden("the form's CSRF token is missing or wrong")
        request.state.form = form
        await self.app(scope, _replay(body, receive), send)

    def _expected(self, request: Request) -> str | None:
        if self.double_submit:  # no cookie: a value no form can carry
            return request.cookies.get(SIGNIN_COOKIE) or secrets.token_hex(16)
        session = getattr(request.user, "session", None)
        return session.csrf if session is not None else None


async def _read(receive: Receive) -> bytes:
    """The request's body: its first :data:`FORM_BYTES` bytes are kept, the rest is read and dropped."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        if size < FORM_BYTES:
            chunks.append(chunk[: FORM_BYTES - size])
        size += len(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, then whatever the connection says next (a disconnect)."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            message: dict[str, Any] = {"type": "http.request", "body": body, "more_body": False}
            return message
        return await receive()

    return replay
