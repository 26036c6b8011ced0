"""The tamper-evident audit log: one hash-chained SQLite row per call. ``AuditLog`` is its facade.

The work is done in three parts, each its own module: the journal writer
(``_writer``: ``append``), the chain (``_fold``: ``fold`` and ``verify``), and
the read queries (``_queries``: ``records``, ``tail``, ``page``, ``find``, and
the console's). How a row is stored and hashed is ``_rowform``'s.

``GLOVEBOX_HOME/audit.sqlite`` (WAL). Each row stores ``prev_hash`` (the
previous row's ``hash``; 64 zeros for the first) and
``hash = sha256(prev_hash + canonical JSON of the row's other fields)``, so
changing, inserting or deleting a row breaks the chain at that row, which
:meth:`AuditLog.verify` reports. The chain's head is kept in its own table
(``audit_head``, see ``_chain``), so deleting the last row shows too, and a
fold reads back what it inserted, so a planted trigger cannot drop a row
unseen; verify also names any trigger or view (glovebox creates none) and
journal rows the database refused. The chain has no key: someone who can
write the database can still rewrite it from any row on with recomputed
hashes, which only a head hash recorded elsewhere finds (``verify(anchor=)``).
A value changed underneath into bytes (a BLOB, TEXT that is not UTF-8) is read
as ``bytes`` and named as a changed row.

No call loses its row to its size: a text field over :data:`MAX_TEXT_CHARS`
(``egress``, ``input``, ``output``) or :data:`MAX_NAME_CHARS` (the others) is
cut, a cut JSON field is replaced by ``{"truncated_chars": N, "head": "..."}``,
and the row's ``truncated`` column names the fields that were cut (NULL when
none; it is part of the hash when set, so rows written before the column
existed verify unchanged). The columns ``attempt`` and ``first_call_id`` (a
retried call: which attempt this row is, and the call id of its first attempt)
are hashed the same way, only when set, so rows without them, old or new,
hash as they always did.

Each record is written to the writer's journal (``_journal``, one
``write`` per call) before ``call`` returns: a process killed afterwards loses
nothing it returned; the line is the record's plain JSON, and bounding,
escaping and the canonical form wait for the fold. A process of the home's own
(``_foldproc``, started and watched by the writers) folds the journal into the
chain in batches, one transaction per batch, 20–250 ms behind the calls and
outside their GIL; every reader (``records``, ``tail``, ``find``, ``verify``)
folds first, and ``close`` folds what is left, so what a reader sees includes every
call that returned. The journal of a process that died is folded by the next
log that folds. Writers never wait for each other: the chain's write lock is
taken once per batch, not once per call. (With ``synchronous=NORMAL`` and no
``fsync`` of the journal, a power loss may still drop the newest records.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from ..storage._sqlite import Database
from ._chain import GENESIS, HEAD_TABLE, write_head
from ._fold import AuditVerification, Chain
from ._queries import AuditQueries
from ._rowform import FIELDS, MAX_NAME_CHARS, MAX_TEXT_CHARS, RAW_LINE_CHARS, REQUIRED, record_json, redact, text
from ._writer import JournalWriter

__all__ = [
    "FIELDS",
    "MAX_NAME_CHARS",
    "MAX_TEXT_CHARS",
    "RAW_LINE_CHARS",
    "REQUIRED",
    "AuditLog",
    "AuditVerification",
    "record_json",
    "redact",
]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY, call_id TEXT NOT NULL, time TEXT NOT NULL, principal TEXT NOT NULL,
    tool TEXT NOT NULL, digest TEXT, input_digest TEXT, decision TEXT, outcome TEXT NOT NULL,
    fuel_used INTEGER NOT NULL, duration_ms REAL NOT NULL, egress TEXT NOT NULL,
    input TEXT, output TEXT, prev_hash TEXT NOT NULL, hash TEXT NOT NULL, truncated TEXT,
    attempt INTEGER, first_call_id TEXT
);
CREATE INDEX IF NOT EXISTS audit_call_id ON audit (call_id);
CREATE INDEX IF NOT EXISTS audit_input_digest ON audit (input_digest);
CREATE INDEX IF NOT EXISTS audit_principal ON audit (principal);
CREATE INDEX IF NOT EXISTS audit_tool ON audit (tool);
CREATE INDEX IF NOT EXISTS audit_outcome ON audit (outcome);
CREATE TABLE IF NOT EXISTS audit_journal (name TEXT PRIMARY KEY, folded INTEGER NOT NULL);
"""
logger = logging.getLogger("glovebox.audit")


class AuditLog:
    """Appends, reads and verifies audit records (safe across threads and processes)."""

    def __init__(self, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.path = home / "audit.sqlite"
        self.journal_dir = home / "audit.journal"
        self.journal_dir.mkdir(mode=0o700, exist_ok=True)
        self._database = Database(self.path, _SCHEMA, text_factory=text)
        self._upgrade()
        self._writer = JournalWriter(home, self.journal_dir)
        self._chain = Chain(self._database, self.journal_dir)
        self._reads = AuditQueries(self._database, self._chain)

    def _upgrade(self) -> None:
        """Give a log made by an earlier glovebox what it lacks: the optional columns, the head table.

        A log made before the head had its own table gets one holding its
        last row (the rows themselves, and how they are hashed, are unchanged).
        """
        with self._database.write() as db:
            columns = {row[1] for row in db.execute("PRAGMA table_info(audit)")}
            for name, kind in (("truncated", "TEXT"), ("attempt", "INTEGER"), ("first_call_id", "TEXT")):
                if name not in columns:
                    db.execute(f"ALTER TABLE audit ADD COLUMN {name} {kind}")
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'audit_head'").fetchone() is None:
                db.execute(HEAD_TABLE)
                last = db.execute("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
                write_head(db, *(last or (0, GENESIS)))

    def close(self) -> None:
        """Fold what this log wrote, then close. Idempotent.

        A fold that fails here (the database is locked past the busy timeout,
        or refuses the rows) leaves the rows in the journal, where the next
        log to fold finds them.
        """
        wrote = self._writer.close()
        if wrote is None:
            return
        if wrote:
            try:
                self.fold()
            except Exception:
                logger.warning("audit rows stay in %s until the next fold", self.journal_dir, exc_info=True)
        self._database.close()

    def append(self, record: dict[str, Any]) -> None:
        """Write one record to the journal; it joins the chain at the next fold.

        The record is on its way to the chain when this returns: a process
        killed afterwards loses it only with the machine (see the module).

        Raises:
            ValueError: the record lacks a field the table requires (``REQUIRED``), or the log is closed.
            OSError: the journal could not be written (a full disk).
        """
        self._writer.append(record)

    def fold(self) -> int:
        """Chain every complete journal line (of every writer) into the log; return how many rows.

        Raises:
            sqlite3.Error: the database refused the rows; they stay in the journal.
            NotKept: the database did not keep the rows as written (a trigger); they stay in the journal.
        """
        return self._chain.fold()

    def _fold_alone(self) -> int:
        """:meth:`fold` in a process where no thread runs calls (the fold process): it never pauses for one."""
        return self._chain.fold(alone=True)

    def records(self, *, after: int = 0) -> Iterator[dict[str, Any]]:
        """Every record in chain order (with ``prev_hash`` and ``hash``), the journal folded first.

        Read a page at a time, each on a connection borrowed for that page
        only, so a reader that stops half-way holds none.
        """
        return self._reads.records(after=after)

    def tail(self, n: int = 20) -> list[dict[str, Any]]:
        """The newest ``n`` records, oldest first."""
        return self._reads.tail(n)

    def page(
        self,
        *,
        before: int | None = None,
        limit: int = 50,
        since: datetime | None = None,
        until: datetime | None = None,
        **equal: str | None,
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` records, newest first, with ``seq`` below ``before`` (all when None).

        ``equal`` filters on ``principal``, ``tool`` and ``outcome`` (a None value
        filters nothing), each through its index; ``since`` and ``until`` keep the
        records whose time is at or after / before them, found by :meth:`seq_at`.
        The query walks the primary key backwards from ``before``, so a page costs
        the rows it skips, not the log's size.

        Raises:
            ValueError: a filter other than those three, or ``limit`` below 1.
        """
        return self._reads.page(before=before, limit=limit, since=since, until=until, **equal)

    def seq_at(self, moment: datetime) -> int:
        """The ``seq`` of the first record written at or after ``moment`` (one past the last when none)."""
        return self._reads.seq_at(moment)

    def since(self, moment: datetime, *, limit: int) -> list[tuple[str, str, str, float]]:
        """``(time, tool, outcome, duration_ms)`` of the newest ``limit`` records from ``moment`` on, oldest first."""
        return self._reads.since(moment, limit=limit)

    def last_outcomes(self, tool: str, n: int = 10) -> list[tuple[str, str]]:
        """``(time, outcome)`` of the newest ``n`` calls of ``tool`` (``name@version``), newest first (its index)."""
        return self._reads.last_outcomes(tool, n)

    def for_input(self, principal: str, tool: str, input_digest: str) -> dict[str, Any] | None:
        """The newest record of ``principal`` calling ``tool`` (``name@version``) on that input digest."""
        return self._reads.for_input(principal, tool, input_digest)

    def find(self, call_id: str) -> dict[str, Any] | None:
        """The record of one call."""
        return self._reads.find(call_id)

    def verify(self, *, anchor: str | None = None) -> AuditVerification:
        """Check the schema, fold the journal, walk the chain and check its head.

        ``anchor`` is a head hash an earlier verify printed, kept outside this
        host: the chain must still hold that row, so a tail rewritten from an
        earlier row on (hashes recomputed), or cut back, is found too.

        Reports (``ok`` False, ``problem`` and, where it names one, ``seq``)
        the first of: a trigger or view in the database (glovebox creates
        none: either can change or drop rows as they are written); journal
        rows the database refused or did not keep (they stay in the journal);
        a changed, inserted or deleted row; a head that is not the last row
        (rows deleted from, or added past, the end); an ``anchor`` the chain
        does not hold. A database that is only locked or read-only is verified
        as it is, without its journal.
        """
        return self._chain.verify(anchor=anchor)
