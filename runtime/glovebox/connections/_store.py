"""The connections of a home: their records (no secret) and their tokens (in the encrypted store).

``HOME/connections/connections.json`` keeps, per ``NAME/ACCOUNT``, where the
connection's tokens come from (issuer, endpoints, client id, resource,
scope), when the access token expires and whether it was revoked. The
tokens, and a client secret a registration returned, are entries of the
home's encrypted store (:class:`~glovebox.capabilities._vault.SecretStore`):
``connection.NAME.ACCOUNT.access``, ``.refresh``, ``.client``.

Writes take ``connections.lock`` and replace the file atomically;
:meth:`ConnectionStore.refreshing` is the per-connection lock a refresh holds
(an ``flock`` on ``locks/NAME.ACCOUNT.lock``), so of two processes that find a
token due, one refreshes and the other reads the new token.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ..capabilities._providers import SecretUnavailable
from ..capabilities._vault import SecretStore
from ..core._settings import home_dir
from ..storage._private import exclusive, write_private_json
from ._errors import ConnectError

__all__ = ["DEFAULT_ACCOUNT", "NAME_PATTERN", "ConnectionRecord", "ConnectionStore", "check_name"]

NAME_PATTERN = r"[A-Za-z0-9_-]{1,64}"
DEFAULT_ACCOUNT = "default"


def check_name(value: str, what: str) -> str:
    """A connection or account name (``[A-Za-z0-9_-]{1,64}``), or ValueError."""
    if not isinstance(value, str) or not re.fullmatch(NAME_PATTERN, value):
        raise ValueError(f"{what} {value!r} is not a name: 1 to 64 of A-Z a-z 0-9 _ -")
    return value


@dataclass(frozen=True)
class ConnectionRecord:
    """One connection of one account (never a token)."""

    name: str
    account: str
    issuer: str
    token_endpoint: str
    client_id: str
    resource: str | None = None
    scope: str = ""
    revocation_endpoint: str | None = None
    #: The client authenticates with a secret (stored as ``.client``) by HTTP basic.
    client_secret: bool = False
    #: Seconds since the epoch when the access token expires (None: the server did not say).
    expires_at: float | None = None
    has_refresh: bool = False
    revoked: bool = False
    updated: float = field(default_factory=time.time)

    @property
    def key(self) -> str:
        return f"{self.name}/{self.account}"

    def status(self, now: float | None = None) -> str:
        """``revoked``, ``expired`` (no refresh token), ``refreshable`` (refreshed at next use) or ``valid``."""
        if self.revoked:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= (time.time() if now is None else now):
            return "refreshable" if self.has_refresh else "expired"
        return "valid"


class ConnectionStore:
    """The connections of one home."""

    def __init__(self, home: str | os.PathLike[str] | None = None) -> None:
        self.home = home_dir(home)
        self.folder = self.home / "connections"
        self.path = self.folder / "connections.json"
        self.vault = SecretStore(self.home)

    def records(self) -> list[ConnectionRecord]:
        """Every connection, by name then account."""
        return [self._record(entry) for _, entry in sorted(self._entries().items())]

    def get(self, name: str, account: str) -> ConnectionRecord:
        """One connection; ``not_connected`` when there is none."""
        entry = self._entries().get(f"{name}/{account}")
        if entry is None:
            raise ConnectError("not_connected", f"no connection {name!r} for account {account!r}; run glovebox connect")
        return self._record(entry)

    def save(self, record: ConnectionRecord, tokens: dict[str, str]) -> ConnectionRecord:
        """Store ``record`` and its tokens (``access``, ``refresh``, ``client``: those given replace those kept)."""
        with self._locked():
            for kind, value in tokens.items():
                self.vault.set(self.secret_name(record, kind), value.encode("utf-8"))
            entries = self._entries()
            record = replace(record, updated=time.time())
            entries[record.key] = asdict(record)
            self._write(entries)
        return record

    def token(self, record: ConnectionRecord, kind: str) -> str | None:
        """A stored token (``access``, ``refresh``, ``client``), or None."""
        try:
            return self.vault.get(self.secret_name(record, kind)).decode("utf-8")
        except SecretUnavailable:
            return None

    def mark_revoked(self, record: ConnectionRecord) -> ConnectionRecord:
        """Keep the record as ``revoked`` and drop its tokens."""
        with self._locked():
            for kind in ("access", "refresh"):
                self.vault.remove(self.secret_name(record, kind))
            entries = self._entries()
            revoked = replace(record, revoked=True, has_refresh=False, updated=time.time())
            entries[record.key] = asdict(revoked)
            self._write(entries)
        return revoked

    def remove(self, record: ConnectionRecord) -> None:
        """Forget a connection and every secret of it."""
        with self._locked():
            for kind in ("access", "refresh", "client"):
                self.vault.remove(self.secret_name(record, kind))
            entries = self._entries()
            entries.pop(record.key, None)
            self._write(entries)

    @staticmethod
    def secret_name(record: ConnectionRecord, kind: str) -> str:
        return f"connection.{record.name}.{record.account}.{kind}"

    @contextmanager
    def refreshing(self, name: str, account: str) -> Iterator[None]:
        """Hold the connection's refresh lock (across processes: an ``flock``)."""
        with exclusive(self.folder / "locks" / f"{name}.{account}.lock"):
            yield

    def _record(self, entry: dict[str, Any]) -> ConnectionRecord:
        known = ConnectionRecord.__dataclass_fields__
        return ConnectionRecord(**{key: value for key, value in entry.items() if key in known})

    def _entries(self) -> dict[str, dict[str, Any]]:
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            raise ConnectError("not_connected", f"the connections file {self.path} cannot be read") from None
        entries = document.get("connections") if isinstance(document, dict) else None
        return entries if isinstance(entries, dict) else {}

    def _write(self, entries: dict[str, dict[str, Any]]) -> None:
        write_private_json(self.path, {"version": 1, "connections": entries})

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with exclusive(self.folder / "connections.lock"):
            yield


def pending_dir(home: Path) -> Path:
    """Where authorizations in progress wait for their callback."""
    return home / "connections" / "pending"
