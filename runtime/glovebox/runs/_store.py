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
(``reran``).

Statuses: ``running`` (or a process died while it was), ``paused`` (waiting for
an approval), ``done``, ``failed``, ``cancelled``.
"""

from __future__ import annotations

import builtins
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..storage._sqlite import Database

__all__ = ["FINISHED", "JournalStep", "RecordedStep", "RunRecord", "RunStore"]

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
    journal_bytes INTEGER NOT NULL DEFAULT 0
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
    PRIMARY KEY (run_id, seq)
);
"""


@dataclass
class RunRecord:
    """One run as the store holds it."""

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

    def close(self) -> None:
        """Close the database's connections."""
        self._db.close()

    def create(self, principal: str, lang: str, source: str, script: str, input: Any) -> str:
        """A new ``running`` run; its id."""
        run_id = uuid.uuid4().hex
        now = time.time()
        with self._db.write() as db:
            db.execute(
                "INSERT INTO runs (run_id, principal, status, lang, source, script, input, created, updated)"
                " VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                (run_id, principal, lang, source, script, json.dumps(input), now, now),
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
        self, run_id: str, status: str, result: dict[str, Any] | None = None, *, only_from: str | None = None
    ) -> bool:
        """Record how the run stands now (and, once it ended, its result); with ``only_from``, only
        when it still stands there (a run cancelled meanwhile stays cancelled). Whether it changed."""
        text = None if result is None else json.dumps(result)
        query = "UPDATE runs SET status = ?, result = ?, updated = ? WHERE run_id = ?"
        args: tuple[Any, ...] = (status, text, time.time(), run_id)
        if only_from is not None:
            query, args = query + " AND status = ?", (*args, only_from)
        with self._db.write() as db:
            return db.execute(query, args).rowcount > 0

    def claim(self, run_id: str, statuses: tuple[str, ...]) -> RunRecord | None:
        """Mark the run ``running`` again (one more attempt) if it is in one of ``statuses``; else None."""
        marks = ", ".join("?" * len(statuses))
        with self._db.write() as db:
            changed = db.execute(
                f"UPDATE runs SET status = 'running', attempts = attempts + 1, updated = ?"
                f" WHERE run_id = ? AND status IN ({marks})",
                (time.time(), run_id, *statuses),
            ).rowcount
        return self.get(run_id) if changed else None

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

    def begin_step(self, run_id: str, seq: int, kind: str, request_text: str, call_id: str | None) -> None:
        """Write step ``seq`` as ``started`` (replacing one left ``started`` by a crash: it runs again)."""
        with self._db.write() as db:
            reran = db.execute(
                "SELECT 1 FROM journal WHERE run_id = ? AND seq = ? AND state = 'started'", (run_id, seq)
            ).fetchone()
            db.execute(
                "INSERT OR REPLACE INTO journal (run_id, seq, kind, request, state, call_id, reran, started)"
                " VALUES (?, ?, ?, ?, 'started', ?, ?, ?)",
                (run_id, seq, kind, request_text, call_id, 1 if reran else 0, time.time()),
            )
            db.execute(
                "UPDATE runs SET steps = MAX(steps, ?), journal_bytes = journal_bytes + ?, updated = ?"
                " WHERE run_id = ?",
                (seq + 1, len(request_text), time.time(), run_id),
            )

    def record_step(self, run_id: str, seq: int, kind: str, request_text: str, result_text: str) -> None:
        """Write step ``seq`` ``done`` at once (the clock, the random seed, a search: nothing to run twice)."""
        now = time.time()
        with self._db.write() as db:
            db.execute(
                "INSERT OR REPLACE INTO journal (run_id, seq, kind, request, result, state, started, finished)"
                " VALUES (?, ?, ?, ?, ?, 'done', ?, ?)",
                (run_id, seq, kind, request_text, result_text, now, now),
            )
            db.execute(
                "UPDATE runs SET steps = MAX(steps, ?), journal_bytes = journal_bytes + ?, updated = ?"
                " WHERE run_id = ?",
                (seq + 1, len(request_text) + len(result_text), now, run_id),
            )

    def finish_step(self, run_id: str, seq: int, result_text: str) -> None:
        """Write step ``seq``'s result (committed before the program sees it)."""
        with self._db.write() as db:
            db.execute(
                "UPDATE journal SET result = ?, state = 'done', finished = ? WHERE run_id = ? AND seq = ?",
                (result_text, time.time(), run_id, seq),
            )
            db.execute("UPDATE runs SET journal_bytes = journal_bytes + ? WHERE run_id = ?", (len(result_text), run_id))

    def forget_step(self, run_id: str, seq: int) -> None:
        """Drop step ``seq`` (a call that paused the run: after the approval it is made again)."""
        with self._db.write() as db:
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
                "SELECT seq, kind, request, result, state FROM journal WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall()
        return [RecordedStep(*row) for row in rows]


_COLUMNS = (
    "run_id, principal, status, lang, source, script, input, result, created, updated, attempts, steps, journal_bytes"
)


def _record(row: tuple[Any, ...]) -> RunRecord:
    run_id, principal, status, lang, source, script, input_text, result, created, updated, attempts, steps, size = row
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
