"""The tamper-evident audit log: one hash-chained SQLite row per call.

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

Each record is written to the writer's journal (``_auditjournal``, one
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

import heapq
import json
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..core._canonical import canonical_json, json_encoder, sha256_hex
from ..core._jsonlimits import escape_surrogates
from ..storage._sqlite import Database
from ._chain import GENESIS, HEAD_TABLE, NotKept, Pending, append_rows, read_head, write_head
from ._foldproc import FoldSupervisor
from ._journal import Journal, Unfolded, journal_files, read_unfolded, remove_dead_staging

__all__ = ["AuditLog", "AuditVerification", "redact"]

FIELDS = (
    "seq",
    "call_id",
    "time",
    "principal",
    "tool",
    "digest",
    "input_digest",
    "decision",
    "outcome",
    "fuel_used",
    "duration_ms",
    "egress",
    "input",
    "output",
)
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
#: The filter columns of :meth:`AuditLog.page`, most selective first (each has an index).
_BY_SELECTIVITY = ("principal", "tool", "outcome")
#: Rows a fold prepares between two chances for other threads to take the GIL.
YIELD_ROWS = 8
#: Journal bytes one fold transaction reads at most per file (one longer line is still read whole).
FOLD_BYTES = 4 * 1024 * 1024
#: Fields a record must have (not None): the table refuses a row without them.
#: What a database refusing a row raises: its own errors, or a number too large for an INTEGER.
_REFUSED = (sqlite3.DatabaseError, OverflowError)
REQUIRED = ("call_id", "principal", "tool", "outcome", "fuel_used", "duration_ms", "egress")
_SECRET_KEY = re.compile(
    r"pass(word|wd|phrase)?|token|secret|api[-_]?key|authori[sz]ation|cookie|credential|private[-_]?key|session",
    re.IGNORECASE,
)
REDACTED = "[redacted]"
#: Characters kept of a JSON field (egress, input, output) in one row.
MAX_TEXT_CHARS = 1024 * 1024
#: Characters kept of any other text field (principal, tool, ...).
MAX_NAME_CHARS = 1024
_JSON_FIELDS = ("egress", "input", "output")
#: Rows ``records`` reads per query.
PAGE_ROWS = 500
#: Fields hashed only when set (not None, not empty): columns added after the first release.
OPTIONAL = ("truncated", "attempt", "first_call_id")
_COLUMNS = (*FIELDS, "prev_hash", "hash", *OPTIONAL)
# How egress is stored (not a wire format: the chain hashes the canonical form). Built once.
_SORTED = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode
_CANONICAL = canonical_json
_STORED = tuple(k for k in FIELDS if k != "seq")
#: The egress of a call that made no request and met no denial, and its JSON (stored as ``_SORTED`` writes it).
_NO_EGRESS: dict[str, Any] = {"denials": []}
_NO_EGRESS_JSON = _SORTED(_NO_EGRESS)
_SEQ_PLACE = b',"seq":0,'
#: Characters of a record's plain JSON past which its journal line is its bounded canonical body.
RAW_LINE_CHARS = 64 * 1024


def redact(value: Any) -> Any:
    """A copy of a JSON value with the values of secret-looking keys replaced.

    >>> redact({"user": "ann", "Password": "x", "nested": [{"api_key": 1}]})
    {'user': 'ann', 'Password': '[redacted]', 'nested': [{'api_key': '[redacted]'}]}
    """
    if isinstance(value, dict):
        return {k: REDACTED if _SECRET_KEY.search(str(k)) else redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(item) for item in value]
    return value


def row_hash(prev_hash: str, record: dict[str, Any]) -> str:
    """The chain hash of one record (every field of FIELDS, in canonical JSON)."""
    fields = {k: record.get(k) for k in FIELDS}
    for name in OPTIONAL:
        if record.get(name):
            fields[name] = record[name]
    return sha256_hex(prev_hash + _CANONICAL(fields))


def _body(record: dict[str, Any]) -> bytes:
    """The canonical JSON of ``record``'s row, bounded and escaped, with ``seq`` 0: one journal line's body.

    With its real ``seq`` in place, it is exactly the body :func:`row_hash` hashes.
    """
    row = {k: record.get(k) for k in _STORED}
    for name in ("attempt", "first_call_id"):
        if record.get(name):
            row[name] = record[name]
    row["time"] = row["time"] or datetime.now(UTC).isoformat(timespec="microseconds")
    for key in _JSON_FIELDS:
        value = row[key]
        if value is not None and not isinstance(value, str):
            row[key] = _NO_EGRESS_JSON if value == _NO_EGRESS else _SORTED(value)
    truncated = ",".join(filter(None, [record.get("truncated"), _bound(row)]))
    row["seq"] = 0
    if truncated:
        row["truncated"] = truncated
    return _CANONICAL(row).encode("utf-8")


#: ``json.dumps`` with its defaults (ASCII, NaN as ``NaN``), built once.
_PLAIN = json_encoder()


def _line(written: int, record: dict[str, Any]) -> bytes:
    """The journal line of ``record``: its JSON as given (``r`` and the C encoder's plain output),
    bounded, escaped and put in canonical form only by the fold, outside the call.

    A record whose plain JSON is longer than :data:`RAW_LINE_CHARS` (an input or
    output stored whole) is written as its bounded canonical body instead, so a
    line never holds much more than the row will.
    """
    raw = _PLAIN(record)  # ASCII: a lone surrogate is escaped, never a raw newline
    if len(raw) > RAW_LINE_CHARS:
        return b"%d %s\n" % (written, _body(record))
    return b"%d r%s\n" % (written, raw.encode("ascii"))


def _from_line(written: int, body: bytes) -> Pending:
    """The row of one journal line: a plain record (``r...``, see :func:`_line`) or a canonical body."""
    if not body.startswith(b"r"):
        return _pending(body)
    record = json.loads(body[1:])
    if not isinstance(record, dict):
        raise ValueError("a journal record is not an object")
    if not record.get("time"):  # the time it was journaled, as ``_body`` would have given it then
        seconds, nanos = divmod(written, 1_000_000_000)
        when = datetime.fromtimestamp(seconds, UTC).replace(microsecond=nanos // 1000)
        record["time"] = when.isoformat(timespec="microseconds")
    return _prepare(record)


def _pending(body: bytes) -> Pending:
    """The row of a journal line's body, with its hashed JSON cut around ``seq``.

    ``"seq"`` is never the first or last key, and a string's quotes are
    escaped, so the first ``,"seq":0,`` is the key itself.
    """
    cut = body.index(_SEQ_PLACE)
    row = json.loads(body)
    for name in OPTIONAL:
        row.setdefault(name, None)
    return Pending(row, body[:cut] + b',"seq":', body[cut + len(_SEQ_PLACE) - 1 :])


def _prepare(record: dict[str, Any]) -> Pending:
    """The row of ``record``, ready to be chained."""
    return _pending(_body(record))


@dataclass(frozen=True)
class AuditVerification:
    """The result of walking the chain: ``ok``, rows checked, and the first problem."""

    ok: bool
    rows: int
    head_hash: str
    problem: str | None = None
    seq: int | None = None


class AuditLog:
    """Appends, reads and verifies audit records (safe across threads and processes)."""

    def __init__(self, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.path = home / "audit.sqlite"
        self.journal_dir = home / "audit.journal"
        self.journal_dir.mkdir(mode=0o700, exist_ok=True)
        self._database = Database(self.path, _SCHEMA, text_factory=_text)
        self._upgrade()
        self._journal = Journal(self.journal_dir)
        self._folder: FoldSupervisor | None = None
        self._start = threading.Lock()
        self._closed = False
        self._swept = False

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
        with self._start:
            if self._closed:
                return
            self._closed = True
            folder = self._folder
        if folder is not None:
            folder.close()  # the fold process, if any, goes on for the home's other writers
            self._journal.close()
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
        if self._closed:
            raise ValueError("this audit log is closed")
        missing = [name for name in REQUIRED if record.get(name) is None]
        if missing:
            raise ValueError(f"an audit record needs {', '.join(missing)}")
        line = _line(time.time_ns(), record)
        folder = self._folder or self._start_folder()
        self._journal.write(line)
        folder.nudge()

    def _start_folder(self) -> FoldSupervisor:
        with self._start:
            if self._closed:
                raise ValueError("this audit log is closed")
            if self._folder is None:
                self._folder = FoldSupervisor(self.path.parent)
            return self._folder

    def fold(self) -> int:
        """Chain every complete journal line (of every writer) into the log; return how many rows.

        Raises:
            sqlite3.Error: the database refused the rows; they stay in the journal.
            NotKept: the database did not keep the rows as written (a trigger); they stay in the journal.
        """
        total = 0
        while True:
            added, more = self._fold_once()
            total += added
            if not more:
                return total

    def _fold_once(self) -> tuple[int, bool]:
        """One transaction: up to ``FOLD_BYTES`` of each journal file; whether more is left."""
        if not self._swept:  # once per log: a writer dies between creating and naming its file only rarely
            self._swept = remove_dead_staging(self.journal_dir)
        with self._database.write() as db:
            folded = dict(db.execute("SELECT name, folded FROM audit_journal").fetchall())
            files = []
            for path in journal_files(self.journal_dir):
                unfolded = read_unfolded(path, folded.get(path.name, 0), FOLD_BYTES)
                if unfolded is not None:
                    files.append(unfolded)
            rows = list(_in_order(files))
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

    def _fold_for_reading(self) -> None:
        """Fold before a read; a log that cannot be folded (read-only, locked) is read as it is."""
        try:
            self.fold()
        except (sqlite3.Error, OSError, NotKept) as exc:
            logger.warning("reading the audit log without folding its journal: %s", exc)

    def records(self, *, after: int = 0) -> Iterator[dict[str, Any]]:
        """Every record in chain order (with ``prev_hash`` and ``hash``), the journal folded first.

        Read a page at a time, each on a connection borrowed for that page
        only, so a reader that stops half-way holds none.
        """
        self._fold_for_reading()
        return self._pages(after)

    def _pages(self, after: int) -> Iterator[dict[str, Any]]:
        while True:
            with self._database.connection() as db:
                cursor = db.execute("SELECT * FROM audit WHERE seq > ? ORDER BY seq LIMIT ?", (after, PAGE_ROWS))
                names = [c[0] for c in cursor.description]
                page = cursor.fetchall()
            for values in page:
                yield dict(zip(names, values, strict=True))
            if len(page) < PAGE_ROWS:
                return
            after = page[-1][names.index("seq")]

    def tail(self, n: int = 20) -> list[dict[str, Any]]:
        """The newest ``n`` records, oldest first."""
        self._fold_for_reading()
        with self._database.connection() as db:
            newest = db.execute("SELECT max(seq) FROM audit").fetchone()[0] or 0
        return list(self._pages(max(0, newest - n)))

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
        unknown = sorted(set(equal) - {"principal", "tool", "outcome"})
        if unknown or limit < 1:
            raise ValueError(f"page() filters principal, tool and outcome, not {unknown}" if unknown else "limit < 1")
        self._fold_for_reading()
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
        with self._database.connection() as db:
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
        with self._database.connection() as db:
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
        self._fold_for_reading()
        start = self.seq_at(moment)
        with self._database.connection() as db:
            rows = db.execute(
                "SELECT time, tool, outcome, duration_ms FROM audit WHERE seq >= ? ORDER BY seq DESC LIMIT ?",
                (start, limit),
            ).fetchall()
        return [(str(t), str(tool), str(o), float(d)) for t, tool, o, d in reversed(rows)]

    def last_outcomes(self, tool: str, n: int = 10) -> list[tuple[str, str]]:
        """``(time, outcome)`` of the newest ``n`` calls of ``tool`` (``name@version``), newest first (its index)."""
        self._fold_for_reading()
        with self._database.connection() as db:
            rows = db.execute(
                "SELECT time, outcome FROM audit WHERE tool = ? ORDER BY seq DESC LIMIT ?", (tool, n)
            ).fetchall()
        return [(str(t), str(o)) for t, o in rows]

    def for_input(self, principal: str, tool: str, input_digest: str) -> dict[str, Any] | None:
        """The newest record of ``principal`` calling ``tool`` (``name@version``) on that input digest."""
        self._fold_for_reading()
        with self._database.connection() as db:
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
        self._fold_for_reading()
        with self._database.connection() as db:
            cursor = db.execute("SELECT * FROM audit WHERE call_id = ? LIMIT 1", (call_id,))
            names = [c[0] for c in cursor.description]
            row = cursor.fetchone()
        return dict(zip(names, row, strict=True)) if row else None

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
        with self._database.connection() as db:
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
        for record in self._pages(0):
            problem = _check(record, prev, expected)
            if problem is not None:
                return AuditVerification(False, count, prev, problem, record["seq"])
            prev, expected, count = record["hash"], record["seq"] + 1, count + 1
            anchored = anchored or prev == anchor
        with self._database.connection() as db:
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
            return append_rows(db, _COLUMNS, rows)
    except _REFUSED:
        pass
    for pending in rows:
        try:
            with _savepoint(db):
                append_rows(db, _COLUMNS, [pending])
        except _REFUSED:
            logger.error("the audit row of call %s is kept bare: the database refused it", pending.row["call_id"])
            append_rows(db, _COLUMNS, [_prepare(_bare(pending.row))])
    return len(rows)


def _bare(row: dict[str, Any]) -> dict[str, Any]:
    """The facts of a row without what can be large (no egress, input or output), numbers SQLite can store."""
    bare = {**{k: row[k] for k in _STORED}, "egress": {}, "input": None, "output": None, "truncated": "all"}
    for name in ("attempt", "first_call_id"):
        bare[name] = row.get(name)
    if not (isinstance(bare["fuel_used"], int) and -(2**63) <= bare["fuel_used"] < 2**63):
        bare["fuel_used"] = 0
    return bare


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


def _in_order(files: list[Unfolded]) -> Iterator[Pending]:
    """The rows of every file, merged by the time they were written (each file keeps its own order)."""
    streams = [_parsed(unfolded) for unfolded in files if unfolded.lines]
    for _, pending in heapq.merge(*streams, key=lambda entry: entry[0]):
        yield pending


def _parsed(unfolded: Unfolded) -> Iterator[tuple[int, Pending]]:
    for index, line in enumerate(unfolded.lines, 1):
        if index % YIELD_ROWS == 0:
            time.sleep(0)  # give the GIL to the calls running meanwhile: a batch must not stall them
        try:
            written, _, body = line.partition(b" ")
            pending = _from_line(int(written), body)
            if any(pending.row.get(name) is None for name in REQUIRED):
                raise ValueError("a required field is missing")
            yield int(written), pending
        except (ValueError, TypeError, AttributeError):  # not written by ``append``: kept out of the chain
            logger.error("skipping an unreadable line of %s: %.200r", unfolded.path, line)


def _bound(row: dict[str, Any]) -> str:
    """Escape lone surrogates (``\\udXXX``, so every row can be hashed and stored as UTF-8) and cut
    oversized text fields, in place; return the names of those cut, comma-separated."""
    cut = []
    for key, value in row.items():
        if not isinstance(value, str):
            continue
        if not value.isascii():
            value = row[key] = escape_surrogates(value)
        limit = MAX_TEXT_CHARS if key in _JSON_FIELDS else MAX_NAME_CHARS
        if len(value) > limit:
            cut.append(key)
            if key in _JSON_FIELDS:
                head = value[: limit // 8]  # JSON-escaped, at most 6 characters each
                row[key] = json.dumps({"truncated_chars": len(value), "head": head}, ensure_ascii=False)
            else:
                row[key] = value[: limit - 16] + "…(truncated)"
    return ",".join(cut)


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


def _text(raw: bytes) -> str | bytes:
    """A TEXT value as read: its string, or its bytes when they are not UTF-8 (no row is written so)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def record_json(record: dict[str, Any]) -> str:
    """One record as a line of JSON (``audit export``, ``audit tail --json``).

    Every value glovebox writes is text, a number or null; a value changed
    underneath into bytes (a BLOB, or TEXT that is not UTF-8) is shown as
    ``{"blob": "<hex>"}``, which no written value can be.
    """
    return json.dumps(record, ensure_ascii=False, default=_blob)


def _blob(value: object) -> dict[str, str]:
    if isinstance(value, bytes):
        return {"blob": value.hex()}
    raise TypeError(f"{type(value).__name__} is not JSON")


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
