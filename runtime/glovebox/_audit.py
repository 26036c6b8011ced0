"""The tamper-evident audit log: one hash-chained SQLite row per call.

``GLOVEBOX_HOME/audit.sqlite`` (WAL). Each row stores ``prev_hash`` (the
previous row's ``hash``; 64 zeros for the first) and
``hash = sha256(prev_hash + canonical JSON of the row's other fields)``, so
changing, inserting or deleting a row breaks the chain at that row, which
:meth:`AuditLog.verify` reports.

No call loses its row to its size: a text field over :data:`MAX_TEXT_CHARS`
(``egress``, ``input``, ``output``) or :data:`MAX_NAME_CHARS` (the others) is
cut, a cut JSON field is replaced by ``{"truncated_chars": N, "head": "..."}``,
and the row's ``truncated`` column names the fields that were cut (NULL when
none; it is part of the hash when set, so rows written before the column
existed verify unchanged). Each record is committed before ``call``
returns: a process killed afterwards loses nothing it returned. Threads
appending at once share one commit, and the chain head is kept in memory and
checked by the insert itself (see ``_auditcommit``). (With
``synchronous=NORMAL`` a power loss may still drop the newest records.)
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ._auditcommit import GENESIS, GroupCommit, Pending
from ._jsonlimits import escape_surrogates
from ._sqlite import Database

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
    input TEXT, output TEXT, prev_hash TEXT NOT NULL, hash TEXT NOT NULL, truncated TEXT
);
CREATE INDEX IF NOT EXISTS audit_call_id ON audit (call_id);
"""
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
_COLUMNS = (*FIELDS, "prev_hash", "hash", "truncated")
# Built once: ``json.dumps`` with options builds an encoder per call.
_SORTED = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
_encode_str = json.encoder.encode_basestring  # what that encoder writes a str with
_BEFORE = tuple(sorted(k for k in FIELDS if k < "seq"))
_STORED = tuple(k for k in FIELDS if k != "seq")
#: The egress of a call that made no request and met no denial, and its JSON (stored as ``_SORTED`` writes it).
_NO_EGRESS: dict[str, Any] = {"denials": []}
_NO_EGRESS_JSON = _SORTED(_NO_EGRESS)
_AFTER = tuple(sorted([*(k for k in FIELDS if k > "seq"), "truncated"]))


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
    if record.get("truncated"):
        fields["truncated"] = record["truncated"]
    body = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((prev_hash + body).encode("utf-8")).hexdigest()


def _prepare(record: dict[str, Any]) -> Pending:
    """The row of ``record``, bounded and escaped, with its hashed JSON cut around ``seq``.

    ``head + seq + tail`` is exactly the body :func:`row_hash` hashes.
    """
    row = {k: record.get(k) for k in _STORED}
    row["time"] = row["time"] or datetime.now(UTC).isoformat(timespec="microseconds")
    for key in _JSON_FIELDS:
        value = row[key]
        if value is not None and not isinstance(value, str):
            row[key] = _NO_EGRESS_JSON if value == _NO_EGRESS else _SORTED(value)
    row["truncated"] = ",".join(filter(None, [record.get("truncated"), _bound(row)])) or None
    after = _AFTER if row["truncated"] else _AFTER[:-1]
    head = "{" + _members(row, _BEFORE) + ',"seq":'
    tail = "," + _members(row, after) + "}"
    return Pending(row, head.encode("utf-8"), tail.encode("utf-8"))


def _members(row: dict[str, Any], keys: tuple[str, ...]) -> str:
    """``"key":value,...`` of ``keys`` (sorted), exactly as the canonical JSON of ``row_hash`` writes them."""
    parts = []
    for key in keys:
        value = row[key]
        kind = type(value)
        if kind is str:
            text = _encode_str(value)
        elif value is None:
            text = "null"
        elif kind is int:
            text = int.__repr__(value)
        elif kind is float and math.isfinite(value):
            text = float.__repr__(value)
        else:  # anything else (a bool, an odd principal): the encoder itself
            return _CANONICAL({k: row[k] for k in keys})[1:-1]
        parts.append(f'"{key}":{text}')
    return ",".join(parts)


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
        self._database = Database(self.path, _SCHEMA)
        self._add_truncated_column()
        self._committer = GroupCommit(self._database, _COLUMNS)

    def _add_truncated_column(self) -> None:
        """Give a log made before rows could be truncated its ``truncated`` column."""
        with self._database.write() as db:
            columns = {row[1] for row in db.execute("PRAGMA table_info(audit)")}
            if "truncated" not in columns:
                db.execute("ALTER TABLE audit ADD COLUMN truncated TEXT")

    def close(self) -> None:
        self._database.close()

    def append(self, record: dict[str, Any]) -> int:
        """Commit one record at the end of the chain (oversized fields cut and marked); return its ``seq``.

        Threads appending at once share commits (see :class:`_GroupCommit`);
        the record is committed when this returns.
        """
        return self._committer.append(_prepare(record))

    def records(self, *, after: int = 0) -> Iterator[dict[str, Any]]:
        """Every record in chain order (with ``prev_hash`` and ``hash``).

        Read a page at a time, each on a connection borrowed for that page
        only, so a reader that stops half-way holds none.
        """
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
        with self._database.connection() as db:
            newest = db.execute("SELECT max(seq) FROM audit").fetchone()[0] or 0
        return list(self.records(after=max(0, newest - n)))

    def find(self, call_id: str) -> dict[str, Any] | None:
        """The record of one call."""
        with self._database.connection() as db:
            row = db.execute("SELECT seq FROM audit WHERE call_id = ?", (call_id,)).fetchone()
        return next(self.records(after=row[0] - 1), None) if row else None

    def verify(self) -> AuditVerification:
        """Walk the chain; report the first changed, inserted or deleted row."""
        prev, expected, count = GENESIS, 1, 0
        for record in self.records():
            problem = _check(record, prev, expected)
            if problem is not None:
                return AuditVerification(False, count, prev, problem, record["seq"])
            prev, expected, count = record["hash"], record["seq"] + 1, count + 1
        return AuditVerification(True, count, prev)


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


def _check(record: dict[str, Any], prev: str, expected: int) -> str | None:
    seq = record["seq"]
    if seq != expected:
        return f"row {seq}: expected row {expected} next; row(s) {expected}..{seq - 1} were deleted or renumbered"
    if record["prev_hash"] != prev:
        return f"row {seq}: prev_hash does not match row {seq - 1}; a row was inserted, deleted or changed before it"
    if row_hash(prev, record) != record["hash"]:
        return f"row {seq}: contents changed (hash mismatch)"
    return None
