"""The console's sign-in sessions and CSRF tokens, kept in the server's memory.

A session is an opaque random id (the cookie's value) mapped to the principal,
the SHA-256 of the key it signed in with and a per-session CSRF token. The API
key itself is never kept: each request checks that the policy still holds the
key's digest for that principal, so a key removed from the policy ends its
sessions at once. Sessions end after :data:`SESSION_TTL_S`, on sign-out, or
when the server stops; at most :data:`MAX_SESSIONS` are kept (the oldest go first).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from ..policy import Policy

__all__ = ["COOKIE", "MAX_SESSIONS", "SESSION_TTL_S", "Session", "Sessions", "same_token"]

#: The session cookie's name.
COOKIE = "glovebox_session"
#: Seconds a session lasts after sign-in.
SESSION_TTL_S = 8 * 3600
#: Sessions kept at once.
MAX_SESSIONS = 10_000


@dataclass(frozen=True)
class Session:
    """One signed-in browser: who, with which key (its digest), and the token its forms carry."""

    principal: str
    key_sha256: str
    csrf: str
    expires_at: float


def same_token(given: str | None, expected: str) -> bool:
    """Whether a submitted token equals the expected one (in constant time)."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


class Sessions:
    """Opaque session ids to :class:`Session` (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: OrderedDict[str, Session] = OrderedDict()

    def start(self, principal: str, api_key: str) -> str:
        """A new session for ``principal`` signed in with ``api_key``; returns its id."""
        session_id = secrets.token_urlsafe(32)
        digest = hashlib.sha256(api_key.encode("utf-8")).hexdigest()
        session = Session(principal, digest, secrets.token_urlsafe(32), time.time() + SESSION_TTL_S)
        with self._lock:
            self._by_id[session_id] = session
            while len(self._by_id) > MAX_SESSIONS:
                self._by_id.popitem(last=False)
        return session_id

    def get(self, session_id: str | None, policy: Policy) -> Session | None:
        """The live session ``session_id`` names, or None (unknown, expired, or its key left the policy)."""
        if not session_id:
            return None
        with self._lock:
            session = self._by_id.get(session_id)
            if session is not None and session.expires_at <= time.time():
                del self._by_id[session_id]
                session = None
        if session is None:
            return None
        entry = policy.principals.get(session.principal)
        if entry is None or not any(hmac.compare_digest(k, session.key_sha256) for k in entry.api_key_sha256):
            self.end(session_id)
            return None
        return session

    def end(self, session_id: str | None) -> None:
        """Forget a session (sign-out). Unknown ids are ignored."""
        with self._lock:
            self._by_id.pop(session_id or "", None)
