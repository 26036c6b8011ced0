"""Who is asking: Starlette's ``AuthenticationMiddleware`` with one backend for keys and sessions.

A request with an API key header (``servers._auth``) is that key's principal
(a key that matches no principal is a :class:`Stranger` holding why, even
when anonymous access is on). Without a key, a console route also takes the
session cookie (``servers._sessions``); the API never does, so no other
site's page can call a tool with a browser's session. Without either, the
caller is ``anonymous`` when the server was started with
``insecure_anonymous``, else a :class:`Stranger`. An authenticated caller's
credentials hold the scopes the policy in force gives its principal.
"""

from __future__ import annotations

from starlette.authentication import AuthCredentials, AuthenticationBackend, BaseUser
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection

from ..runtime._backend import CallBackend
from ._auth import AuthFailure, _key_from, authenticate
from ._sessions import COOKIE, Session, Sessions

__all__ = ["KeyOrSession", "Stranger", "Viewer", "authentication"]


class Viewer(BaseUser):
    """An authenticated caller: its principal and, when it signed in with a form, its session."""

    def __init__(self, principal: str, session: Session | None = None, session_id: str | None = None) -> None:
        self.principal = principal
        self.session = session
        self.session_id = session_id

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def display_name(self) -> str:
        return self.principal

    @property
    def identity(self) -> str:
        return self.principal

    @property
    def csrf(self) -> str:
        """The token the session's forms carry (empty for a key in a header: it needs none)."""
        return self.session.csrf if self.session is not None else ""


class Stranger(BaseUser):
    """A caller not authenticated; ``failure`` says why when an API key was looked at."""

    def __init__(self, failure: AuthFailure | None) -> None:
        self.failure = failure

    @property
    def is_authenticated(self) -> bool:
        return False

    @property
    def display_name(self) -> str:
        return ""

    @property
    def identity(self) -> str:
        return ""


class KeyOrSession(AuthenticationBackend):
    """API keys for every route; with ``sessions``, the console's session cookie too."""

    def __init__(self, runtime: CallBackend, insecure_anonymous: bool, sessions: Sessions | None = None) -> None:
        self.runtime = runtime
        self.insecure_anonymous = insecure_anonymous
        self.sessions = sessions

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser]:
        if self.sessions is not None and _key_from(conn.headers) is None:
            session_id = conn.cookies.get(COOKIE)
            session = self.sessions.get(session_id, self.runtime.policy)
            if session is not None:
                return self._credentials(Viewer(session.principal, session, session_id))
        who = authenticate(self.runtime, conn.headers, self.insecure_anonymous)
        if isinstance(who, AuthFailure):
            return AuthCredentials(), Stranger(who)
        return self._credentials(Viewer(who))

    def _credentials(self, viewer: Viewer) -> tuple[AuthCredentials, BaseUser]:
        return AuthCredentials(sorted(self.runtime.policy.scopes_of(viewer.principal))), viewer


def authentication(backend: KeyOrSession) -> Middleware:
    """The route middleware that authenticates with ``backend`` (``request.user``, ``request.auth``)."""
    return Middleware(AuthenticationMiddleware, backend=backend)
