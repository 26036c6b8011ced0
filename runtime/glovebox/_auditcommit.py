"""Appending audit rows: the chain head kept in memory, commits shared by threads.

One appending thread at a time is the leader: it takes every row waiting,
chains them onto the head and commits them in one transaction, while the
others wait for that commit; when it is done it hands the lead to the first
row that arrived meanwhile. A lone row is written with one statement that
inserts it only if the database's newest row is still the head kept in
memory; when another writer (another ``AuditLog``, another process) has
appended since, nothing is written and the head is read again under the write
lock. No ``append`` returns before its row is committed.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Any

from ._sqlite import Database

__all__ = ["GENESIS", "GroupCommit", "Pending"]

GENESIS = "0" * 64


class Pending:
    """One prepared row waiting for its place in the chain.

    ``head`` and ``tail`` are the UTF-8 canonical JSON of the row's hashed
    fields before and after its ``seq``, so that hashing at commit time needs
    no serialisation.
    """

    __slots__ = ("done", "error", "head", "lead", "row", "seq", "tail")

    def __init__(self, row: dict[str, Any], head: bytes, tail: bytes) -> None:
        self.row = row
        self.head = head
        self.tail = tail
        self.seq = 0
        self.error: BaseException | None = None
        self.done: threading.Event | None = None
        self.lead = False

    def chain(self, seq: int, prev: str) -> str:
        """Take place ``seq`` after the row hashed ``prev``; return this row's hash."""
        digest = hashlib.sha256(prev.encode("ascii"))
        digest.update(self.head)
        digest.update(str(seq).encode("ascii"))
        digest.update(self.tail)
        self.seq = seq
        self.row["seq"], self.row["prev_hash"], self.row["hash"] = seq, prev, digest.hexdigest()
        return self.row["hash"]  # type: ignore[no-any-return]

    def result(self) -> int:
        if self.error is not None:
            raise self.error
        return self.seq


class GroupCommit:
    """Commits the rows of concurrent ``append`` calls together, in arrival order."""

    def __init__(self, database: Database, columns: Sequence[str]) -> None:
        self._database = database
        self._columns = tuple(columns)
        self._lock = threading.Lock()
        self._queue: list[Pending] = []
        self._leading = False
        self._head: tuple[int, str] | None = None
        names, marks = ", ".join(columns), ", ".join("?" * len(columns))
        self._insert = f"INSERT INTO audit ({names}) VALUES ({marks})"
        # The one-statement append relies on ``hash NOT NULL``; a table without it takes the locked path.
        self._insert_at_head = _insert_at_head(names, self._columns) if _hash_required(database) else None

    def append(self, pending: Pending) -> int:
        """Commit ``pending`` at the end of the chain; return its ``seq``."""
        with self._lock:
            self._queue.append(pending)
            follower = self._leading
            self._leading = True
            if follower:
                pending.done = threading.Event()
        if follower:
            assert pending.done is not None
            pending.done.wait()
            if not pending.lead:
                return pending.result()
        self._lead()
        return pending.result()

    def _lead(self) -> None:
        with self._lock:
            batch, self._queue = self._queue, []
        try:
            self._commit(batch)
        except BaseException as exc:  # every row of the batch reports it; the lead still passes on
            for pending in batch:
                pending.error = exc
        with self._lock:
            successor = self._queue[0] if self._queue else None
            self._leading = successor is not None
        for pending in batch:
            if pending.done is not None:
                pending.done.set()
        if successor is not None:
            assert successor.done is not None
            successor.lead = True
            successor.done.set()

    def _commit(self, batch: list[Pending]) -> None:
        head = self._head
        if head is not None and len(batch) == 1 and self._insert_at_head is not None:
            seq, prev = head
            values = self._chain(head, batch)[0]
            with self._database.connection() as db:
                inserted = db.execute(self._insert_at_head, [*values, seq, GENESIS, prev]).rowcount
            if inserted == 1:
                self._head = (seq + 1, batch[0].row["hash"])
                return
        with self._database.write() as db:  # another writer appended since: read the head again
            last = db.execute("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
            head = (int(last[0]), str(last[1])) if last else (0, GENESIS)
            db.executemany(self._insert, self._chain(head, batch))
        self._head = (head[0] + len(batch), batch[-1].row["hash"])

    def _chain(self, head: tuple[int, str], batch: list[Pending]) -> list[list[Any]]:
        seq, prev = head
        rows = []
        for pending in batch:
            seq += 1
            prev = pending.chain(seq, prev)
            rows.append([pending.row[name] for name in self._columns])
        return rows


def _hash_required(database: Database) -> bool:
    """Whether the audit table refuses a NULL ``hash`` (every table this module creates does)."""
    with database.connection() as db:
        return any(row[1] == "hash" and row[3] for row in db.execute("PRAGMA table_info(audit)"))


def _insert_at_head(names: str, columns: tuple[str, ...]) -> str:
    """The one-statement append of a lone row: inserted only while the chain head is still ``(seq, prev)``.

    Parameters: the row's values in ``columns`` order (its ``seq`` being
    ``seq + 1``), then ``seq``, ``GENESIS`` and ``prev``. The row's ``hash``
    is NULL, which its NOT NULL constraint refuses and ``OR IGNORE`` turns
    into "nothing inserted", unless no row from ``seq + 1`` on exists and row
    ``seq`` (none: the genesis) still has the hash ``prev``. Unlike
    ``INSERT ... SELECT`` from the same table, this needs no temporary copy.
    """
    count = len(columns)
    at, genesis, prev = count + 1, count + 2, count + 3
    seq = columns.index("seq") + 1
    check = (
        f"NOT EXISTS (SELECT 1 FROM audit WHERE seq >= ?{seq})"
        f" AND coalesce((SELECT hash FROM audit WHERE seq = ?{at}), ?{genesis}) = ?{prev}"
    )
    values = [f"CASE WHEN {check} THEN ?{i} END" if name == "hash" else f"?{i}" for i, name in enumerate(columns, 1)]
    return f"INSERT OR IGNORE INTO audit ({names}) VALUES ({', '.join(values)})"
