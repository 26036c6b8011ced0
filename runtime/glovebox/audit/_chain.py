"""Chaining audit rows: each prepared row hashed at its place after the chain's head.

Rows are chained only by a fold (``_log``), inside a transaction that holds
the database's write lock, so the head is read from the database itself and
two folders (threads, processes) can never fork the chain.

The head (the last row's ``seq`` and ``hash``) is kept in its own table,
``audit_head``, written in the same transaction as the rows: a row is given
its ``seq`` and ``prev_hash`` from that head before it is inserted, never from
whatever the ``audit`` table ends with. A row removed from the end of the table
(by hand, or by a trigger as it is inserted) therefore leaves a gap the next
row and :meth:`AuditLog.verify` show, instead of its place being given to the
next row. A fold also reads back what it inserted before it commits: when the
table did not keep every row exactly as written (a trigger changed or dropped
one), it raises :class:`NotKept` and the rows stay in the journal.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["GENESIS", "HEAD_TABLE", "NotKept", "Pending", "append_rows", "read_head", "write_head"]

GENESIS = "0" * 64
#: The table holding the chain's head: one row (``id`` 1), ``(0, GENESIS)`` while the chain is empty.
HEAD_TABLE = "CREATE TABLE audit_head (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL, hash TEXT NOT NULL)"


class NotKept(Exception):
    """The database did not keep the rows (or the head) a fold wrote exactly as written."""


class Pending:
    """One prepared row waiting for its place in the chain.

    ``head`` and ``tail`` are the UTF-8 canonical JSON of the row's hashed
    fields before and after its ``seq``, so that hashing at fold time needs
    no serialisation.
    """

    __slots__ = ("head", "row", "tail")

    def __init__(self, row: dict[str, Any], head: bytes, tail: bytes) -> None:
        self.row = row
        self.head = head
        self.tail = tail

    def chain(self, seq: int, prev: str) -> str:
        """Take place ``seq`` after the row hashed ``prev``; return this row's hash."""
        digest = hashlib.sha256(prev.encode("utf-8"))  # ASCII hex, unless the head was changed underneath
        digest.update(self.head)
        digest.update(str(seq).encode("ascii"))
        digest.update(self.tail)
        self.row["seq"], self.row["prev_hash"], self.row["hash"] = seq, prev, digest.hexdigest()
        return self.row["hash"]  # type: ignore[no-any-return]


def read_head(db: sqlite3.Connection) -> tuple[int, str]:
    """The chain's head as the database keeps it: ``(seq, hash)``, ``(0, GENESIS)`` before the first row.

    The head record exists from the moment its table does, so a missing one
    was deleted: nothing is chained onto a guess. A head hash changed
    underneath into bytes is chained onto as it reads (verify names it).

    Raises:
        NotKept: the head record is missing, or is not one row with a number.
    """
    rows = db.execute("SELECT seq, hash FROM audit_head").fetchall()
    if not rows:
        raise NotKept("the chain's head record is missing (deleted)")
    if len(rows) > 1 or not isinstance(rows[0][0], int):
        raise NotKept(f"the chain's head is not one row with a number: {rows[:2]!r}")
    seq, prev = rows[0]
    return seq, prev if isinstance(prev, str) else repr(prev)


def write_head(db: sqlite3.Connection, seq: int, hash: str) -> None:
    """Make row ``seq``, hashed ``hash``, the chain's head (``db`` in a write transaction)."""
    db.execute(
        "INSERT INTO audit_head (id, seq, hash) VALUES (1, ?, ?)"
        " ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
        (seq, hash),
    )


def append_rows(db: sqlite3.Connection, columns: Sequence[str], rows: Iterable[Pending]) -> int:
    """Chain ``rows`` onto the head, insert them, move the head, and read them back; return how many.

    ``db`` must be in a transaction holding the write lock (``BEGIN IMMEDIATE``).

    Raises:
        NotKept: the table or the head did not keep what was written (roll the transaction back).
        sqlite3.DatabaseError: the database refused a row.
    """
    start, prev = read_head(db)
    seq, values, chained = start, [], []
    for pending in rows:
        seq += 1
        prev = pending.chain(seq, prev)
        values.append([pending.row[name] for name in columns])
        chained.append((seq, prev))
    if not values:
        return 0
    names, marks = ", ".join(columns), ", ".join("?" * len(columns))
    db.executemany(f"INSERT INTO audit ({names}) VALUES ({marks})", values)
    write_head(db, seq, prev)
    kept = db.execute("SELECT seq, hash FROM audit WHERE seq > ? ORDER BY seq", (start,)).fetchall()
    if kept != chained:
        missing = sorted(set(chained) - set(kept))[:3]
        raise NotKept(f"the audit table did not keep rows {start + 1}..{seq} as written (first lost: {missing!r})")
    if db.execute("SELECT seq, hash FROM audit_head").fetchall() != [(seq, prev)]:
        raise NotKept(f"the chain's head did not keep row {seq}")
    return len(values)
