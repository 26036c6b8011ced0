"""Reading the audit log: every record in order, the newest, a filtered page, a call's record.

Every query folds the journal first (``_fold``), so what a reader sees
includes every call that returned; a log that cannot be folded (read-only,
locked) is read as it is. The console's queries (:meth:`AuditQueries.page`,
``since``, ``last_outcomes``, ``for_input``) each go through one index, so a
page costs its rows, not the log's size.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from ..storage._sqlite import Database
from ._fold import Chain

__all__ = ["AuditQueries"]

#: The filter columns of :meth:`AuditQueries.page`, most selective first (each has an index).
_BY_SELECTIVITY = ("principal", "tool", "outcome")


class AuditQueries:
    """The read side of one audit log."""

    def __init__(self, database: Database, chain: Chain) -> None:
        self.database = database
        self.chain = chain

    def records(self, *, after: int = 0) -> Iterator[dict[str, Any]]:
        """Every record in chain order (with ``prev_hash`` and ``hash``), the journal folded first."""
        self.chain.fold_for_reading()
        return self.chain.pages(after)

    def tail(self, n: int = 20) -> list[dict[str, Any]]:
        """The newest ``n`` records, oldest first."""
        self.chain.fold_for_reading()
        with self.database.connection() as db:
            newest = db.execute("SELECT max(seq) FROM audit").fetchone()[0] or 0
        return list(self.chain.pages(max(0, newest - n)))

    def page(
        self,
        *,
        before: int | None = None,
        limit: int = 50,
        since: datetime | None = None,
        until: datetime | None = None,
        **equal: str | None,
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` records, newest first, with ``seq`` below ``before`` (see ``AuditLog.page``)."""
        unknown = sorted(set(equal) - {"principal", "tool", "outcome"})
        if unknown or limit < 1:
            raise ValueError(f"page() filters principal, tool and outcome, not {unknown}" if unknown else "limit < 1")
        self.chain.fold_for_reading()
        top = before if before is not None else 2**63 - 1
        if until is not None:
            top = min(top, self.seq_at(until))
        where = ["seq < ?", "seq >= ?"]
        args: list[object] = [top, self.seq_at(since) if since is not None else 0]
        for name, value in sorted(equal.items()):
            if value is not None:
                where.append(f"{name} = ?")
                args.append(value)
        # The most selective filter's index, named: left to itself the planner may take tool's (few values).
        index = next((f" INDEXED BY audit_{name}" for name in _BY_SELECTIVITY if equal.get(name) is not None), "")
        with self.database.connection() as db:
            query = f"SELECT * FROM audit{index} WHERE {' AND '.join(where)} ORDER BY seq DESC LIMIT ?"
            cursor = db.execute(query, (*args, limit))
            names = [c[0] for c in cursor.description]
            return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]

    def seq_at(self, moment: datetime) -> int:
        """The ``seq`` of the first record written at or after ``moment`` (one past the last when none).

        A binary search on the primary key (rows are chained in the order their
        calls were folded, so times rise with ``seq`` to within a fold's delay):
        about 20 look-ups for a million rows, and no index on the time.
        """
        wanted = moment.astimezone(UTC).isoformat(timespec="microseconds")
        with self.database.connection() as db:
            low, high = db.execute("SELECT coalesce(min(seq), 1), coalesce(max(seq), 0) + 1 FROM audit").fetchone()
            while low < high:
                middle = (low + high) // 2
                row = db.execute(
                    "SELECT seq, time FROM audit WHERE seq >= ? ORDER BY seq LIMIT 1", (middle,)
                ).fetchone()
                if row is None or row[1] >= wanted:
                    high = middle
                else:
                    low = row[0] + 1
        return int(low)

    def since(self, moment: datetime, *, limit: int) -> list[tuple[str, str, str, float]]:
        """``(time, tool, outcome, duration_ms)`` of the newest ``limit`` records from ``moment`` on, oldest first."""
        self.chain.fold_for_reading()
        start = self.seq_at(moment)
        with self.database.connection() as db:
            rows = db.execute(
                "SELECT time, tool, outcome, duration_ms FROM audit WHERE seq >= ? ORDER BY seq DESC LIMIT ?",
                (start, limit),
            ).fetchall()
        return [(str(t), str(tool), str(o), float(d)) for t, tool, o, d in reversed(rows)]

    def last_outcomes(self, tool: str, n: int = 10) -> list[tuple[str, str]]:
        """``(time, outcome)`` of the newest ``n`` calls of ``tool`` (``name@version``), newest first (its index)."""
        self.chain.fold_for_reading()
        with self.database.connection() as db:
            rows = db.execute(
                "SELECT time, outcome FROM audit WHERE tool = ? ORDER BY seq DESC LIMIT ?", (tool, n)
            ).fetchall()
        return [(str(t), str(o)) for t, o in rows]

    def for_input(self, principal: str, tool: str, input_digest: str) -> dict[str, Any] | None:
        """The newest record of ``principal`` calling ``tool`` (``name@version``) on that input digest."""
        self.chain.fold_for_reading()
        with self.database.connection() as db:
            cursor = db.execute(
                # INDEXED BY: without it the planner may walk the tool or principal index (one value for
                # most rows) in seq order instead of the input digest's, which is nearly unique.
                "SELECT * FROM audit INDEXED BY audit_input_digest"
                " WHERE input_digest = ? AND principal = ? AND tool = ? ORDER BY seq DESC LIMIT 1",
                (input_digest, principal, tool),
            )
            names = [c[0] for c in cursor.description]
            row = cursor.fetchone()
        return dict(zip(names, row, strict=True)) if row else None

    def find(self, call_id: str) -> dict[str, Any] | None:
        """The record of one call."""
        self.chain.fold_for_reading()
        with self.database.connection() as db:
            cursor = db.execute("SELECT * FROM audit WHERE call_id = ? LIMIT 1", (call_id,))
            names = [c[0] for c in cursor.description]
            row = cursor.fetchone()
        return dict(zip(names, row, strict=True)) if row else None
