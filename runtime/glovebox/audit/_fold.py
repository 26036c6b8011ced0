"""The chain's keeper: folding the journal into the hash chain, and verifying the chain.

A fold (:meth:`Chain.fold`) reads every journal file's complete lines
(``_journal``), merges them by the time they were written, prepares each row
(``_rowform``) and chains them onto the head (``_chain``), up to
:data:`FOLD_BYTES` of each file per transaction, one transaction per batch,
recording how far each file is folded in the same transaction; a file whose
writer is gone is removed once its rows are in. A row the database refuses on
its own is chained bare, so it never holds back the rows after it.

:meth:`Chain.verify` names any trigger or view (glovebox creates none),
folds, then walks the chain from its first row: each row's hash and
``prev_hash``, the head table, and an ``anchor`` (a head hash recorded
elsewhere) when one is given.
"""

from __future__ import annotations

import heapq
import logging
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..storage._sqlite import Database
from ._chain import GENESIS, NotKept, Pending, append_rows, read_head, write_head
from ._journal import Unfolded, journal_files, read_unfolded, remove_dead_staging
from ._rowform import COLUMNS, bare, from_line, prepare, required_values, row_hash

__all__ = ["FOLD_BYTES", "PAGE_ROWS", "YIELD_ROWS", "AuditVerification", "Chain"]

logger = logging.getLogger("glovebox.audit")
#: Rows a fold prepares between two chances for other threads to take the GIL.
YIELD_ROWS = 8
#: Journal bytes one fold transaction reads at most per file (one longer line is still read whole).
FOLD_BYTES = 4 * 1024 * 1024
#: Rows :meth:`Chain.pages` reads per query.
PAGE_ROWS = 500
#: What a database refusing a row raises: its own errors, or a number too large for an INTEGER.
_REFUSED = (sqlite3.DatabaseError, OverflowError)


@dataclass(frozen=True)
class AuditVerification:
    """The result of walking the chain: ``ok``, rows checked, and the first problem."""

    ok: bool
    rows: int
    head_hash: str
    problem: str | None = None
    seq: int | None = None


class Chain:
    """Folds the home's journal into ``database``'s chain and verifies it (safe across threads and processes)."""

    def __init__(self, database: Database, journal_dir: Path) -> None:
        self.database = database
        self.journal_dir = journal_dir
        self._swept = False

    def fold(self, *, alone: bool = False) -> int:
        """Chain every complete journal line (of every writer) into the log; return how many rows.

        Every :data:`YIELD_ROWS` rows prepared, the fold lets another thread take the GIL,
        unless ``alone`` (no thread of this process runs calls: the fold process).

        Raises:
            sqlite3.Error: the database refused the rows; they stay in the journal.
            NotKept: the database did not keep the rows as written (a trigger); they stay in the journal.
        """
        total = 0
        while True:
            added, more = self._fold_once(0 if alone else YIELD_ROWS)
            total += added
            if not more:
                return total

    def _fold_once(self, yield_rows: int) -> tuple[int, bool]:
        """One transaction: up to ``FOLD_BYTES`` of each journal file; whether more is left."""
        if not self._swept:  # once per log: a writer dies between creating and naming its file only rarely
            self._swept = remove_dead_staging(self.journal_dir)
        with self.database.write() as db:
            folded = dict(db.execute("SELECT name, folded FROM audit_journal").fetchall())
            files = []
            for path in journal_files(self.journal_dir):
                unfolded = read_unfolded(path, folded.get(path.name, 0), FOLD_BYTES)
                if unfolded is not None:
                    files.append(unfolded)
            rows = list(_in_order(files, yield_rows))
            if rows:  # a fold with nothing to chain reads no head: a broken one is for verify to name
                _catch_up(db)
            added = _chain(db, rows)
            db.executemany(
                "INSERT INTO audit_journal (name, folded) VALUES (?, ?)"
                " ON CONFLICT (name) DO UPDATE SET folded = excluded.folded",
                [(f.path.name, f.end) for f in files if f.end != folded.get(f.path.name, 0)],
            )
            present = {f.path.name for f in files}
            db.executemany("DELETE FROM audit_journal WHERE name = ?", [(n,) for n in folded if n not in present])
        for unfolded in files:  # after the commit: a file is removed only once its rows are in the chain
            if unfolded.finished:
                unfolded.path.unlink(missing_ok=True)
        return added, any(f.more for f in files)

    def fold_for_reading(self) -> None:
        """Fold before a read; a log that cannot be folded (read-only, locked) is read as it is."""
        try:
            self.fold()
        except (sqlite3.Error, OSError, NotKept) as exc:
            logger.warning("reading the audit log without folding its journal: %s", exc)

    def pages(self, after: int) -> Iterator[dict[str, Any]]:
        """Every row past ``after`` in chain order, a page at a time, each on a connection borrowed for
        that page only (a reader that stops half-way holds none). No fold first."""
        while True:
            with self.database.connection() as db:
                cursor = db.execute("SELECT * FROM audit WHERE seq > ? ORDER BY seq LIMIT ?", (after, PAGE_ROWS))
                names = [c[0] for c in cursor.description]
                page = cursor.fetchall()
            for values in page:
                yield dict(zip(names, values, strict=True))
            if len(page) < PAGE_ROWS:
                return
            after = page[-1][names.index("seq")]

    def verify(self, *, anchor: str | None = None) -> AuditVerification:
        """Check the schema, fold the journal, walk the chain and check its head (see ``AuditLog.verify``)."""
        with self.database.connection() as db:
            planted = db.execute(
                "SELECT type, name, tbl_name FROM sqlite_master WHERE type IN ('trigger', 'view') ORDER BY name"
            ).fetchall()
        if planted:
            kind, name, table = planted[0]
            problem = f"the database holds {kind} {name!r} on {table!r}, which glovebox never creates"
            return AuditVerification(False, 0, GENESIS, problem + ": it can change or drop rows as they are written")
        try:
            self.fold()
        except (sqlite3.OperationalError, OSError) as exc:
            if not _only_unwritable(exc):
                return AuditVerification(False, 0, GENESIS, f"journal rows could not be chained: {exc}")
            logger.warning("verifying the audit log without folding its journal: %s", exc)
        except (sqlite3.DatabaseError, NotKept) as exc:
            return AuditVerification(False, 0, GENESIS, f"journal rows could not be chained: {exc}")
        return self._walk(anchor)

    def _walk(self, anchor: str | None) -> AuditVerification:
        prev, expected, count, anchored = GENESIS, 1, 0, anchor is None
        for record in self.pages(0):
            problem = _check(record, prev, expected)
            if problem is not None:
                return AuditVerification(False, count, prev, problem, record["seq"])
            prev, expected, count = record["hash"], record["seq"] + 1, count + 1
            anchored = anchored or prev == anchor
        with self.database.connection() as db:
            heads = db.execute("SELECT seq, hash FROM audit_head").fetchall()
        problem = _check_head(heads, expected - 1, prev)
        if problem is not None:
            return AuditVerification(False, count, prev, problem, expected - 1 or None)
        if not anchored:
            problem = f"no row is hashed {anchor}: the chain was cut back or rewritten since that head was recorded"
            return AuditVerification(False, count, prev, problem)
        return AuditVerification(True, count, prev)


def _catch_up(db: sqlite3.Connection) -> None:
    """Move the head over rows chained onto it by an earlier glovebox, which kept no head table.

    Only rows that chain, one after the other, from the head are taken; the
    first that does not stays past the head (its insert then fails, and
    verify names it). A row deleted from the end never moves the head back.
    """
    seq, prev = read_head(db)
    cursor = db.execute("SELECT * FROM audit WHERE seq > ? ORDER BY seq", (seq,))
    names = [column[0] for column in cursor.description]
    start = seq
    for values in cursor:
        record = dict(zip(names, values, strict=True))
        if _check(record, prev, seq + 1) is not None:
            break
        seq, prev = record["seq"], record["hash"]
    if seq != start:
        logger.warning("the audit chain's head moves over rows %d..%d written without one", start + 1, seq)
        write_head(db, seq, prev)


def _chain(db: sqlite3.Connection, rows: list[Pending]) -> int:
    """Chain ``rows`` in one go, or, when the database refuses one, row by row.

    A row the database refuses on its own (longer than its length limit, say)
    is chained as its bare facts instead (no egress, input or output;
    ``truncated`` = ``all``), so one row never holds back the rows after it.

    Raises:
        sqlite3.DatabaseError: the database refuses even a bare row; nothing of this fold is kept.
        NotKept: the database did not keep what was written; nothing of this fold is kept.
    """
    if not rows:
        return 0
    try:
        with _savepoint(db):
            return append_rows(db, COLUMNS, rows)
    except _REFUSED:
        pass
    for pending in rows:
        try:
            with _savepoint(db):
                append_rows(db, COLUMNS, [pending])
        except _REFUSED:
            logger.error("the audit row of call %s is kept bare: the database refused it", pending.row["call_id"])
            append_rows(db, COLUMNS, [prepare(bare(pending.row))])
    return len(rows)


@contextmanager
def _savepoint(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("SAVEPOINT fold")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK TO fold")
        db.execute("RELEASE fold")
        raise
    db.execute("RELEASE fold")


def _in_order(files: list[Unfolded], yield_rows: int) -> Iterator[Pending]:
    """The rows of every file, merged by the time they were written (each file keeps its own order);
    every ``yield_rows`` rows of a file (0: never), the GIL is offered to another thread."""
    streams = [_parsed(unfolded, yield_rows) for unfolded in files if unfolded.lines]
    for _, pending in heapq.merge(*streams, key=lambda entry: entry[0]):
        yield pending


def _parsed(unfolded: Unfolded, yield_rows: int) -> Iterator[tuple[int, Pending]]:
    for index, line in enumerate(unfolded.lines, 1):
        if yield_rows and index % yield_rows == 0:
            time.sleep(0)  # give the GIL to the calls running meanwhile: a batch must not stall them
        try:
            written, _, body = line.partition(b" ")
            pending = from_line(int(written), body)
            if None in required_values(pending.row):
                raise ValueError("a required field is missing")
            yield int(written), pending
        except (ValueError, TypeError, AttributeError, KeyError):  # not written by ``append``: kept out of the chain
            logger.error("skipping an unreadable line of %s: %.200r", unfolded.path, line)


def _only_unwritable(exc: Exception) -> bool:
    """Whether a fold failed only because the database is locked or read-only (nothing was refused)."""
    text = str(exc)
    return isinstance(exc, OSError) or any(word in text for word in ("locked", "busy", "readonly", "read-only"))


def _check_head(heads: list[tuple[Any, Any]], last: int, last_hash: str) -> str | None:
    """Whether the chain's head names its last row (``last``, hashed ``last_hash``)."""
    if not heads:
        return "the chain's head record is missing (deleted)"
    if len(heads) > 1:
        return f"the chain's head is not one row: {heads[:2]!r}"
    seq, head_hash = heads[0]
    if (seq, head_hash) == (last, last_hash):
        return None
    if isinstance(seq, int) and seq > last:
        return f"row(s) {last + 1}..{seq} were deleted from the end: the chain's head is row {seq}"
    return f"row {last}: is not the chain's head (row {seq!r}): rows were added past the head, or it was changed"


def _check(record: dict[str, Any], prev: str, expected: int) -> str | None:
    seq = record["seq"]
    retyped = [name for name, value in record.items() if isinstance(value, bytes)]
    if retyped:
        return f"row {seq}: contents changed ({', '.join(retyped)} no longer text or a number)"
    if seq != expected:
        return f"row {seq}: expected row {expected} next; row(s) {expected}..{seq - 1} were deleted or renumbered"
    if record["prev_hash"] != prev:
        return f"row {seq}: prev_hash does not match row {seq - 1}; a row was inserted, deleted or changed before it"
    if row_hash(prev, record) != record["hash"]:
        return f"row {seq}: contents changed (hash mismatch)"
    return None
