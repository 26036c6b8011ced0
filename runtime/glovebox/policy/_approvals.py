"""Approval requests for ``require_approval`` calls, kept in SQLite.

``GLOVEBOX_HOME/approvals.sqlite`` holds one row per request. A request is
``pending`` until a principal holding the approver scope approves it (never
its own request); it is then ``approved`` and lets exactly one call with the
same principal, tool@version and input digest run once, before ``expires_at``;
that call marks it ``used``. A pending request can be ``denied`` instead (with
a reason): until it expires, that call is answered ``permission_denied`` with
the reason, and no new request is made for it. Tools cannot reach this table:
approvals happen only through ``Runtime.approve``/``Runtime.deny`` and
``glovebox approve``/``glovebox approvals deny``.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..core._errors import PermissionDenied
from ..storage._sqlite import Database

__all__ = ["Approval", "ApprovalStore", "iso_time"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    tool TEXT NOT NULL,
    input_digest TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    approved_by TEXT,
    approved_at REAL,
    used_at REAL,
    reason TEXT,
    statement TEXT
);
CREATE INDEX IF NOT EXISTS approvals_key ON approvals (principal, tool, input_digest, status);
"""
_COLUMNS = (
    "id, principal, tool, input_digest, status, created_at, expires_at, approved_by, approved_at, used_at, reason,"
    " statement"
)


def iso_time(seconds: float) -> str:
    """Unix seconds as ISO 8601 UTC, to the second, as a person reads them.

    >>> iso_time(0)
    '1970-01-01T00:00:00Z'
    """
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Approval:
    """One approval request. ``tool`` is ``name@version``; times are Unix seconds.

    ``approved_by`` and ``approved_at`` name who decided and when, for a
    denied request too; ``reason`` is the reason a denial gave. ``statement``
    is, for a SQL statement's request, what the approver is shown (JSON text:
    ``database``, ``kind``, ``fingerprint``, and ``statement`` and ``params``
    only when the policy stores inputs, redacted as the audit redacts them).
    """

    id: str
    principal: str
    tool: str
    input_digest: str
    status: str
    created_at: float
    expires_at: float
    approved_by: str | None = None
    approved_at: float | None = None
    used_at: float | None = None
    reason: str | None = None
    statement: str | None = None

    @property
    def shown(self) -> dict[str, Any] | None:
        """The SQL statement this request is for, as the approver sees it (None: a call's request)."""
        return json.loads(self.statement) if self.statement else None

    def to_dict(self) -> dict[str, Any]:
        """The request as JSON: the Unix times as they are, each with an ISO 8601 UTC twin (``*_iso``)."""
        data: dict[str, Any] = dict(vars(self))
        data["statement"] = self.shown
        for name in ("created_at", "expires_at", "approved_at", "used_at"):
            value = data[name]
            data[f"{name}_iso"] = iso_time(value) if value is not None else None
        return data


class ApprovalStore:
    """Creates, approves and consumes approval requests (safe across threads and processes)."""

    def __init__(self, home: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = home / "approvals.sqlite"
        #: Unix seconds now: what requests are stamped with and expire by.
        self.clock = clock
        self._database = Database(self.path, _SCHEMA)
        self._upgrade()

    def _upgrade(self) -> None:
        """Give a table made by an earlier glovebox the ``reason`` and ``statement`` columns."""
        with self._database.write() as db:
            present = {row[1] for row in db.execute("PRAGMA table_info(approvals)")}
            for column in ("reason", "statement"):
                if column not in present:
                    db.execute(f"ALTER TABLE approvals ADD COLUMN {column} TEXT")

    def close(self) -> None:
        self._database.close()

    def get(self, approval_id: str) -> Approval | None:
        with self._database.connection() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM approvals WHERE id = ?", (approval_id,)).fetchone()
        return Approval(*row) if row is not None else None

    def _live(self, principal: str, tool: str, input_digest: str, status: str, now: float) -> Any:
        """The oldest-approved unexpired request with ``status`` for exactly this call, if any."""
        with self._database.connection() as db:  # the caller's write transaction
            return db.execute(
                f"SELECT {_COLUMNS} FROM approvals WHERE principal = ? AND tool = ? AND input_digest = ?"
                " AND status = ? AND expires_at > ? ORDER BY approved_at LIMIT 1",
                (principal, tool, input_digest, status, now),
            ).fetchone()

    def consume(self, principal: str, tool: str, input_digest: str) -> Approval | None:
        """Mark one approved, unexpired request for exactly this call used; return it."""
        with self._database.write() as db:
            now = self.clock()
            row = self._live(principal, tool, input_digest, "approved", now)
            if row is None:
                return None
            db.execute("UPDATE approvals SET status = 'used', used_at = ? WHERE id = ?", (now, row[0]))
        return Approval(*row)

    def request(
        self, principal: str, tool: str, input_digest: str, ttl_s: int, statement: dict[str, Any] | None = None
    ) -> Approval:
        """The pending request for this call (an existing unexpired one, else a new one); ``statement``
        is what an approver is shown of a SQL statement's request (see :class:`Approval`).

        The look-up and the insert are one transaction holding the write lock,
        so identical requests made at once, by threads or processes, share one id.
        """
        with self._database.write() as db:
            now = self.clock()
            row = self._live(principal, tool, input_digest, "pending", now)
            if row is not None:
                return Approval(*row)
            shown = json.dumps(statement, ensure_ascii=False, sort_keys=True) if statement is not None else None
            approval = Approval(
                secrets.token_hex(8), principal, tool, input_digest, "pending", now, now + ttl_s, statement=shown
            )
            db.execute(
                "INSERT INTO approvals (id, principal, tool, input_digest, status, created_at, expires_at, statement)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (approval.id, principal, tool, input_digest, "pending", now, approval.expires_at, shown),
            )
        return approval

    def denied(self, principal: str, tool: str, input_digest: str) -> Approval | None:
        """The unexpired denial of exactly this call, if any."""
        row = self._live(principal, tool, input_digest, "denied", self.clock())
        return Approval(*row) if row is not None else None

    def approve(self, approval_id: str, approver: str) -> Approval:
        """Approve a pending request; the approver's scope is checked by the caller.

        Raises:
            PermissionDenied: ``approver`` made the request itself.
            ValueError: the id is unknown, expired, or not pending any more.
        """
        return self._decide(approval_id, approver, "approved", None)

    def deny(self, approval_id: str, approver: str, reason: str) -> Approval:
        """Deny a pending request with ``reason``; the approver's scope is checked by the caller.

        Raises:
            PermissionDenied: ``approver`` made the request itself.
            ValueError: the id is unknown, expired, or not pending any more.
        """
        return self._decide(approval_id, approver, "denied", reason)

    def _decide(self, approval_id: str, approver: str, status: str, reason: str | None) -> Approval:
        found = self.get(approval_id)
        if found is None:
            raise ValueError(f"no approval request {approval_id!r}")
        if found.principal == approver:
            raise PermissionDenied(
                f"principal {approver!r} cannot {'approve' if status == 'approved' else 'deny'} "
                f"its own request {approval_id}",
                details={"approval_id": approval_id},
            )
        if found.status != "pending":
            raise ValueError(f"approval request {approval_id} is {found.status}, not pending")
        now = self.clock()
        if found.expires_at <= now:
            raise ValueError(f"approval request {approval_id} expired")
        with self._database.connection() as db:
            changed = db.execute(
                "UPDATE approvals SET status = ?, approved_by = ?, approved_at = ?, reason = ?"
                " WHERE id = ? AND status = ?",
                (status, approver, now, reason, approval_id, "pending"),
            ).rowcount
        if changed != 1:
            raise ValueError(f"approval request {approval_id} is no longer pending")
        result = self.get(approval_id)
        assert result is not None
        return result

    def pending(self, *, offset: int = 0, limit: int | None = None) -> list[Approval]:
        """Unexpired pending requests, oldest first: ``limit`` of them (all when None) from ``offset`` on."""
        if offset < 0 or (limit is not None and limit < 0):
            raise ValueError("offset and limit must not be negative")
        with self._database.connection() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM approvals WHERE status = 'pending' AND expires_at > ? ORDER BY created_at"
                " LIMIT ? OFFSET ?",
                (self.clock(), -1 if limit is None else limit, offset),
            ).fetchall()
        return [Approval(*row) for row in rows]

    def pending_mark(self) -> str:
        """A short text that changes whenever the set of unexpired pending requests does (for live pages)."""
        with self._database.connection() as db:
            count, newest = db.execute(
                "SELECT count(*), max(created_at) FROM approvals WHERE status = 'pending' AND expires_at > ?",
                (self.clock(),),
            ).fetchone()
        return f"{count}:{newest or 0}"

    def pending_page(self, offset: int, limit: int) -> tuple[list[Approval], int]:
        """``limit`` unexpired pending requests from ``offset`` on (oldest first), and how many there are."""
        now = self.clock()
        with self._database.connection() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM approvals WHERE status = 'pending' AND expires_at > ?"
                " ORDER BY created_at LIMIT ? OFFSET ?",
                (now, limit, offset),
            ).fetchall()
            total = db.execute(
                "SELECT count(*) FROM approvals WHERE status = 'pending' AND expires_at > ?", (now,)
            ).fetchone()[0]
        return [Approval(*row) for row in rows], int(total)
