"""``connection://NAME[/ACCOUNT]``: a connection's access token, injected like any other secret.

The account is the reference's (``connection://github/ops``), else
``default``. The tokens are read from the call's home (the Runtime's), else
``GLOVEBOX_HOME``. Where a secret is named for a call (a policy's ``secrets``, a
remote MCP server's ``--header-secret``), ``{principal}`` in a reference is
replaced by the calling principal first, so ``connection://github/{principal}``
is each principal's own account; a grant that targets a group of principals
with ``connection://github/ops`` gives them one team account.

A token is kept in memory until :data:`REFRESH_SKEW_S` before it expires, and
for :data:`TTL_S` at most (a revocation in another process is seen within
that); when it is due, the host refreshes it (see :mod:`._tokens`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

from ..capabilities._providers import SecretProvider, SecretRef, SecretUnavailable
from ..core._settings import home_dir
from ._errors import ConnectError
from ._store import DEFAULT_ACCOUNT, ConnectionStore, check_name
from ._tokens import REFRESH_SKEW_S, access_token

__all__ = ["TTL_S", "ConnectionProvider"]

#: Seconds a token read is kept in memory at most.
TTL_S = 30.0


class ConnectionProvider(SecretProvider):
    """Reads (and refreshes) the access token of a connection of ``GLOVEBOX_HOME``."""

    name = "connection"
    ttl_s: ClassVar[float] = 0.0  # its own cache below, bounded by the token's expiry too

    def __init__(self) -> None:
        super().__init__()
        self._tokens: dict[tuple[str, str, str], tuple[float, bytes]] = {}

    def get(self, ref: SecretRef) -> bytes:
        return self.read_in(ref, None)

    def read_in(self, ref: SecretRef, home: Path | None) -> bytes:
        """The token of the connection in ``home`` (None: ``GLOVEBOX_HOME``), refreshed when due."""
        name, _, account = ref.rest.strip("/").partition("/")
        account = account or DEFAULT_ACCOUNT
        try:
            check_name(name, "connection")
            check_name(account, "account")
        except ValueError as exc:
            raise SecretUnavailable(f"{ref}: {exc}") from None
        where = str(home_dir(home))
        key, now = (where, name, account), time.monotonic()
        with self._lock:
            kept = self._tokens.get(key)
        if kept is not None and kept[0] > now:
            return kept[1]
        try:
            token, record = access_token(ConnectionStore(home), name, account)
        except ConnectError as exc:
            raise SecretUnavailable(f"{ref}: {exc}") from None
        until = now + TTL_S
        if record.expires_at is not None:
            until = min(until, now + record.expires_at - REFRESH_SKEW_S - time.time())
        value = token.encode("utf-8")
        with self._lock:
            if len(self._tokens) >= 1024:
                self._tokens.clear()
            self._tokens[key] = (until, value)
        return value

    def forget(self) -> None:
        with self._lock:
            self._tokens.clear()
        super().forget()
