"""The runs of a home and their journals, in ``HOME/runs.sqlite``.

A run row holds the program (its source and the script the runner is given),
its input, principal, status and, once it ended, its output or error. The
journal holds one row per host call the program made, in order (``seq`` from
0): the call's kind (``call``, ``search``, ``now``, ``random``), its request
and, once answered, its result. A step is written ``started`` before a live
tool call runs and ``done`` with its result before the program sees it, each
in its own committed transaction, so a process killed at any point leaves a
journal that a resume can trust: every ``done`` step is answered from the
journal, and a ``started`` one (in flight at the crash) runs again and says so
(``reran``). A step also keeps the texts a replay answers from without
parsing anything: the request as the program sent it (``asked``), what the
program was sent back (``answer``, a tool call's output or error) and the
call's summary; a step written before those columns has them NULL and is
replayed the slower way. The journal's byte bound counts every text a step
holds.

Statuses: ``running`` (or a process died while it was), ``paused`` (waiting for
an approval), ``done``, ``failed``, ``cancelled``.

**The lease.** A run is executed by one attempt at a time: the attempt holds the
run's lease (``lease_owner``, ``lease_expires``), taken with one atomic
``UPDATE ... WHERE`` (by :meth:`RunStore.create`, or by :meth:`RunStore.claim`
only when no live lease is held) and renewed while it executes. Every journal
write of a leased attempt is fenced: it happens only while ``lease_owner`` is
still that attempt's, in the same transaction, else it raises
:class:`~glovebox.RunBusy` and writes nothing. So two processes resuming one
run cannot both make its next live call, and an attempt that stalled past its
expiry while another took the run over writes nothing more. A holder killed
by SIGKILL stops renewing; once its lease expires the run can be claimed, and
at once from the same host, where a holder whose process is gone is known dead
(``claim(dead=)``). An
attempt's end (``set_status`` with its owner) releases the lease; so does a
cancel, which stops the holder at its next host call.
"""

from __future__ import annotations

import builtins
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core._errors import RunBusy
from ..storage._sqlite import Database

__all__ = ["FINISHED", "JournalStep", "Lease", "RecordedStep", "RunRecord", "RunStore"]

FINISHED = ("done", "failed", "cancelled")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    status TEXT NOT NULL,
    lang TEXT NOT NULL,
    source TEXT NOT NULL,
    script TEXT NOT NULL,
    input TEXT NOT NULL,
    result TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 1,
    steps INTEGER NOT NULL DEFAULT 0,
    journal_bytes INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_expires REAL,
    resumed_by TEXT,
    attempt_call_id TEXT,
    first_call_id TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_principal ON runs (principal, created);
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status, updated);
CREATE TABLE IF NOT EXISTS journal (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    request TEXT NOT NULL,
    result TEXT,
    state TEXT NOT NULL,
    call_id TEXT,
    reran INTEGER NOT NULL DEFAULT 0,
    started REAL NOT NULL,
    finished REAL,
    asked TEXT,
    answer TEXT,
    summary TEXT,
    PRIMARY KEY (run_id, seq)
);
"""


#: Columns added after the first release (a store made before them gets them on open).
_ADDED = (
    ("lease_owner", "TEXT"),
    ("lease_expires", "REAL"),
    ("resumed_by", "TEXT"),
    ("attempt_call_id", "TEXT"),
    ("first_call_id", "TEXT"),
)
#: Journal columns added after the first release: the texts a replay answers from without parsing
#: (NULL in a step written before them, which is then compared and answered the slower way).
_JOURNAL_ADDED = (("asked", "TEXT"), ("answer", "TEXT"), ("summary", "TEXT"))


@dataclass(frozen=True)
class Lease:
    """Who executes a run (``owner``: host, pid and a random id) and for how long without renewing."""

    owner: str
    seconds: float


@dataclass
class RunRecord:
    """One run as the store holds it.

    ``lease_owner`` and ``lease_expires`` (epoch seconds) name the attempt
    executing it (None once it ended); ``resumed_by`` who made the latest
    resume (None before the first); ``attempt_call_id`` and ``first_call_id``
    the audit call ids of its latest and first attempts.
    """

    run_id: str
    principal: str
    status: str
    lang: str
    source: str
    script: str
    input: Any
    result: dict[str, Any] | None
    created: float
    updated: float
    attempts: int
    steps: int
    journal_bytes: int
    lease_owner: str | None = None
    lease_expires: float | None = None
    resumed_by: str | None = None
    attempt_call_id: str | None = None
    first_call_id: str | None = None

    def leased(self, now: float | None = None) -> bool:
        """Whether an attempt holds a live lease on the run (it is executing somewhere now)."""
        expires = self.lease_expires
        return self.lease_owner is not None and expires is not None and expires >= (now or time.time())

    def summary(self) -> dict[str, Any]:
        """What ``runs list`` shows of it."""
        return {
            "run_id": self.run_id,
            "principal": self.principal,
            "status": self.status,
            "lang": self.lang,
            "steps": self.steps,
            "journal_bytes": self.journal_bytes,
            "attempts": self.attempts,
            "resumed_by": self.resumed_by,
            "created": self.created,
            "updated": self.updated,
        }


@dataclass
class JournalStep:
    """One host call of a run."""

    seq: int
    kind: str
    request: Any
    result: Any
    state: str
    call_id: str | None = None
    reran: bool = False
    started: float = 0.0
    finished: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The step as ``runs show`` prints it."""
        return {
            "seq": self.seq,
            "kind": self.kind,
            "request": self.request,
            "result": self.result,
            "state": self.state,
            "call_id": self.call_id,
            "reran": self.reran,
        }


class RunStore:
    """Runs and journals of one home (see the module docstring)."""

    def __init__(self, home: Path) -> None:
        self.path = home / "runs.sqlite"
        home.mkdir(parents=True, exist_ok=True)
        self._db = Database(self.path, _SCHEMA)
        self._upgrade()

    def _upgrade(self) -> None:
        """Give a store made by an earlier glovebox the columns it lacks (its rows stay as they are)."""
        with self._db.write() as db:
            columns = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
            for name, kind in _ADDED:
                if name not in columns:
                    db.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind}")
            columns = {row[1] for row in db.execute("PRAGMA table_info(journal)")}
            for name, kind in _JOURNAL_ADDED:
                if name not in columns:
                    db.execute(f"ALTER TABLE journal ADD COLUMN {name} {kind}")

    def close(self) -> None:
        """Close the database's connections."""
        self._db.close()

    def create(
        self,
        principal: str,
        lang: str,
        source: str,
        script: str,
        input: Any,
        *,
        lease: Lease | None = None,
        call_id: str | None = None,
    ) -> str:
        """A new ``running`` run (held by ``lease``, its first attempt's audit call id ``call_id``); its id."""
        run_id = uuid.uuid4().hex
        now = time.time()
        owner, expires = (None, None) if lease is None else (lease.owner, now + lease.seconds)
        with self._db.write() as db:
            db.execute(
                "INSERT INTO runs (run_id, principal, status, lang, source, script, input, created, updated,"
                " lease_owner, lease_expires, attempt_call_id, first_call_id)"
                " VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, principal, lang, source, script, json.dumps(input), now, now)
                + (owner, expires, call_id, call_id),
            )
        return run_id

    def get(self, run_id: str) -> RunRecord | None:
        """The run ``run_id``, or None."""
        with self._db.connection() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else _record(row)

    def list(
        self, *, principal: str | None = None, status: str | None = None, limit: int = 100, offset: int = 0
    ) -> builtins.list[RunRecord]:
        """Runs, newest first (``offset`` skips the newest ones: a page)."""
        where, args = [], []
        if principal is not None:
            where.append("principal = ?")
            args.append(principal)
        if status is not None:
            where.append("status = ?")
            args.append(status)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        with self._db.connection() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM runs {clause} ORDER BY created DESC, run_id LIMIT ? OFFSET ?",
                (*args, limit, offset),
            ).fetchall()
        return [_record(row) for row in rows]

    def starts_since(self, principal: str, since: float, limit: int) -> builtins.list[float]:
        """When ``principal`` started runs since ``since`` (epoch seconds): newest first, at most ``limit``."""
        with self._db.connection() as db:
            rows = db.execute(
                "SELECT created FROM runs WHERE principal = ? AND created >= ? ORDER BY created DESC LIMIT ?",
                (principal, since, limit),
            ).fetchall()
        return [float(row[0]) for row in rows]

    def set_status(
        self,
        run_id: str,
        status: str,
        result: dict[str, Any] | None = None,
        *,
        only_from: str | None = None,
        owner: str | None = None,
    ) -> bool:
        """Record how the run stands now (and, once it ended, its result), releasing its lease; with
        ``only_from``, only when it still stands there (a run cancelled meanwhile stays cancelled);
        with ``owner``, only while that attempt still holds the lease. Whether it changed."""
        text = None if result is None else json.dumps(result)
        query = "UPDATE runs SET status = ?, result = ?, updated = ?, lease_owner = NULL, lease_expires = NULL"
        query += " WHERE run_id = ?"
        args: tuple[Any, ...] = (status, text, time.time(), run_id)
        if only_from is not None:
            query, args = query + " AND status = ?", (*args, only_from)
        if owner is not None:
            query, args = query + " AND lease_owner = ?", (*args, owner)
        with self._db.write() as db:
            return db.execute(query, args).rowcount > 0

    def claim(
        self,
        run_id: str,
        statuses: tuple[str, ...],
        *,
        lease: Lease | None = None,
        by: str | None = None,
        call_id: str | None = None,
        dead: str | None = None,
    ) -> RunRecord | None:
        """Mark the run ``running`` again (one more attempt, made by ``by``, audited as ``call_id``) if it
        is in one of ``statuses`` and no live lease is held on it, taking ``lease``: one atomic
        ``UPDATE ... WHERE``, so of two processes claiming at once one wins. Else None.

        ``dead``: a lease owner known to have died (its process is gone); its lease counts as expired."""
        marks = ", ".join("?" * len(statuses))
        now = time.time()
        owner, expires = (None, None) if lease is None else (lease.owner, now + lease.seconds)
        with self._db.write() as db:
            changed = db.execute(
                f"UPDATE runs SET status = 'running', attempts = attempts + 1, updated = ?,"
                f" lease_owner = ?, lease_expires = ?, resumed_by = ?, attempt_call_id = ?,"
                f" first_call_id = COALESCE(first_call_id, ?)"
                f" WHERE run_id = ? AND status IN ({marks})"
                f" AND (lease_owner IS NULL OR lease_expires IS NULL OR lease_expires < ? OR lease_owner = ?)",
                (now, owner, expires, by, call_id, call_id, run_id, *statuses, now, dead),
            ).rowcount
        return self.get(run_id) if changed else None

    def renew(self, run_id: str, lease: Lease) -> bool:
        """Push the lease's expiry on while ``lease`` still holds the run; whether it does."""
        with self._db.write() as db:
            return (
                db.execute(
                    "UPDATE runs SET lease_expires = ? WHERE run_id = ? AND lease_owner = ?",
                    (time.time() + lease.seconds, run_id, lease.owner),
                ).rowcount
                > 0
            )

    def journal(self, run_id: str) -> builtins.list[JournalStep]:
        """The run's steps in order."""
        with self._db.connection() as db:
            rows = db.execute(
                "SELECT seq, kind, request, result, state, call_id, reran, started, finished"
                " FROM journal WHERE run_id = ? ORDER BY seq",
                (run_id,),
            ).fetchall()
        return [
            JournalStep(
                seq=seq,
                kind=kind,
                request=json.loads(request),
                result=None if result is None else json.loads(result),
                state=state,
                call_id=call_id,
                reran=bool(reran),
                started=started,
                finished=finished,
            )
            for seq, kind, request, result, state, call_id, reran, started, finished in rows
        ]

    def begin_step(
        self,
        run_id: str,
        seq: int,
        kind: str,
        request_text: str,
        call_id: str | None,
        *,
        asked: str | None = None,
        owner: str | None = None,
    ) -> None:
        """Write step ``seq`` as ``started`` (replacing one left ``started`` by a crash: it runs again);
        ``asked`` is the request as the program sent it.

        With ``owner``, every journal write here is fenced by the lease (see the module docstring).
        """
        now = time.time()
        with self._db.write() as db:
            _update_run(
                db, run_id, owner, "steps = MAX(steps, ?), journal_bytes = journal_bytes + ?, updated = ?",
                (seq + 1, len(request_text) + len(asked or ""), now),
            )  # fmt: skip
            db.execute(
                "INSERT OR REPLACE INTO journal (run_id, seq, kind, request, state, call_id, reran, started, asked)"
                " VALUES (?, ?, ?, ?, 'started', ?,"
                " EXISTS (SELECT 1 FROM journal WHERE run_id = ? AND seq = ? AND state = 'started'), ?, ?)",
                (run_id, seq, kind, request_text, call_id, run_id, seq, now, asked),
            )

    def record_step(
        self,
        run_id: str,
        seq: int,
        kind: str,
        request_text: str,
        result_text: str,
        *,
        asked: str | None = None,
        owner: str | None = None,
    ) -> None:
        """Write step ``seq`` ``done`` at once (the clock, the random seed, a search: nothing to run twice);
        ``asked`` is the request as the program sent it (the program is answered ``result_text`` itself)."""
        now = time.time()
        with self._db.write() as db:
            _update_run(
                db, run_id, owner, "steps = MAX(steps, ?), journal_bytes = journal_bytes + ?, updated = ?",
                (seq + 1, len(request_text) + len(result_text) + len(asked or ""), now),
            )  # fmt: skip
            db.execute(
                "INSERT OR REPLACE INTO journal (run_id, seq, kind, request, result, state, started, finished, asked)"
                " VALUES (?, ?, ?, ?, ?, 'done', ?, ?, ?)",
                (run_id, seq, kind, request_text, result_text, now, now, asked),
            )

    def finish_step(
        self,
        run_id: str,
        seq: int,
        result_text: str,
        *,
        answer: str | None = None,
        summary: str | None = None,
        owner: str | None = None,
    ) -> None:
        """Write step ``seq``'s result (committed before the program sees it): the envelope
        (``result_text``), what the program is sent of it (``answer``) and the call's summary."""
        size = len(result_text) + len(answer or "") + len(summary or "")
        with self._db.write() as db:
            _update_run(db, run_id, owner, "journal_bytes = journal_bytes + ?", (size,))
            db.execute(
                "UPDATE journal SET result = ?, state = 'done', finished = ?, answer = ?, summary = ?"
                " WHERE run_id = ? AND seq = ?",
                (result_text, time.time(), answer, summary, run_id, seq),
            )

    def forget_step(self, run_id: str, seq: int, *, owner: str | None = None) -> None:
        """Drop step ``seq`` (a call that paused the run: after the approval it is made again)."""
        with self._db.write() as db:
            _hold(db, run_id, owner)
            db.execute("DELETE FROM journal WHERE run_id = ? AND seq = ?", (run_id, seq))

    def collect(self, older_than: float) -> builtins.list[str]:
        """Delete finished runs last updated before ``older_than`` and their journals; their ids."""
        marks = ", ".join("?" * len(FINISHED))
        with self._db.write() as db:
            ids = [
                row[0]
                for row in db.execute(
                    f"SELECT run_id FROM runs WHERE status IN ({marks}) AND updated < ?", (*FINISHED, older_than)
                )
            ]
            for run_id in ids:
                db.execute("DELETE FROM journal WHERE run_id = ?", (run_id,))
                db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
        return ids

    def recorded_steps(self, run_id: str) -> builtins.list[RecordedStep]:
        """The run's steps in order, as a replay reads them: one query, the texts as stored, nothing parsed."""
        with self._db.connection() as db:
            rows = db.execute(
                "SELECT seq, kind, request, result, state, asked, answer, summary,"
                " LENGTH(request) + IFNULL(LENGTH(result), 0) + IFNULL(LENGTH(asked), 0)"
                " + IFNULL(LENGTH(answer), 0) + IFNULL(LENGTH(summary), 0)"
                " FROM journal WHERE run_id = ? ORDER BY seq",
                (run_id,),
            ).fetchall()
        return [RecordedStep(*row) for row in rows]


_COLUMNS = (
    "run_id, principal, status, lang, source, script, input, result, created, updated, attempts, steps, journal_bytes,"
    " lease_owner, lease_expires, resumed_by, attempt_call_id, first_call_id"
)


def _update_run(db: Any, run_id: str, owner: str | None, assignments: str, args: tuple[Any, ...]) -> None:
    """``UPDATE runs SET assignments`` for ``run_id``, fenced (only while ``owner`` holds the lease,
    else :class:`~glovebox.RunBusy` and nothing is written): the fence and the write are one statement."""
    query = f"UPDATE runs SET {assignments} WHERE run_id = ?"
    if owner is None:
        db.execute(query, (*args, run_id))
    elif db.execute(query + " AND lease_owner = ?", (*args, run_id, owner)).rowcount == 0:
        _hold(db, run_id, owner)  # raises, naming who holds it now
        raise AssertionError("unreachable: the lease changed hands inside one write transaction")


def _hold(db: Any, run_id: str, owner: str | None) -> None:
    """Nothing when ``owner`` (None: not fenced) still holds the run's lease; else :class:`~glovebox.RunBusy`."""
    if owner is None:
        return
    row = db.execute("SELECT lease_owner, status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is not None and row[0] == owner:
        return
    holder, status = (None, None) if row is None else row
    raise RunBusy(
        f"run {run_id!r} is no longer held by this attempt ({owner}): "
        + (f"it was {status}" if holder is None else f"{holder} took it over after the lease expired")
        + "; nothing more of this attempt is written",
        details={"run_id": run_id, "holder": holder, "lost_by": owner},
        retryable=False,
    )


def _record(row: tuple[Any, ...]) -> RunRecord:
    run_id, principal, status, lang, source, script, input_text, result, created, updated, attempts, steps, size = row[
        :13
    ]
    owner, expires, resumed_by, attempt_call_id, first_call_id = row[13:]
    return RunRecord(
        run_id=run_id,
        principal=principal,
        status=status,
        lang=lang,
        source=source,
        script=script,
        input=json.loads(input_text),
        result=None if result is None else json.loads(result),
        created=created,
        updated=updated,
        attempts=attempts,
        steps=steps,
        journal_bytes=size,
        lease_owner=owner,
        lease_expires=expires,
        resumed_by=resumed_by,
        attempt_call_id=attempt_call_id,
        first_call_id=first_call_id,
    )


@dataclass(slots=True)
class RecordedStep:
    """One step of a journal as a replay reads it: its request and result as the texts stored."""

    seq: int
    kind: str
    #: ``{"kind": ..., **request}`` with sorted keys, as ``RunHost`` compares requests.
    request_text: str
    result_text: str | None
    state: str
    #: The request as the program sent it (None in a step written before this column).
    asked: str | None = None
    #: What the program was sent: a tool call's output or error, else ``result_text`` itself (None then).
    answer: str | None = None
    #: A tool call's summary (``RunResult.calls``) as it reads on a replay.
    summary: str | None = None
    #: The characters the step holds, all its texts together (what the journal's bound counts).
    size: int = 0
