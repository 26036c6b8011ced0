"""A run's rollback in the store: its lease on the finished run, and one row per compensation.

A rollback (:mod:`._rollback`) holds the run's lease (the same columns an
attempt holds, :mod:`._claims`; a run is rolled back only once it finished, so
no attempt can hold it meanwhile) from its claim to its end, and writes each
compensation ``started`` (with its call id) before it is called and ``done``
(or ``failed``) with its envelope after, each in its own committed transaction,
fenced by that lease. A rollback killed at any point leaves rows a later one can
trust: a ``done`` compensation is never called again, a ``started`` one (in
flight at the crash) is called again under the same call id and marked
``reran``, a ``failed`` one is tried again. The run keeps how its rollback
stands (``rollback``: ``rolling_back``, ``rolled_back`` or ``incomplete``).

Each row is sealed when it is written (:func:`._seal.seal_compensation`: a MAC
with the home's run key over its tool, input, state, call id and result, bound
to the run and the step it undoes, and the run's head over them all), in the
same transaction; a rollback checks them before it calls anything, so a row
edited in ``runs.sqlite`` (a ``failed`` one made ``done`` to skip it, an input
changed) or dropped is refused with ``journal_tampered``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from ..storage._sqlite import Database
from ._claims import fenced_update
from ._records import FINISHED, Lease
from ._seal import seal_compensation

__all__ = ["Compensation", "begin", "claim", "finish", "forget", "read", "release"]


@dataclass(frozen=True)
class Compensation:
    """One compensation of a rollback, as the store holds it (``seq``: the journal step it undoes)."""

    seq: int
    tool: str
    input: Any
    state: str
    call_id: str
    result: dict[str, Any] | None
    reran: bool


def claim(database: Database, run_id: str, lease: Lease, dead: str | None) -> bool:
    """Take the finished run's lease for a rollback (none live held, or ``dead``'s); whether it did."""
    marks = ", ".join("?" * len(FINISHED))
    now = time.time()
    with database.write() as db:
        changed: int = db.execute(
            f"UPDATE runs SET lease_owner = ?, lease_expires = ?, rollback = 'rolling_back'"
            f" WHERE run_id = ? AND status IN ({marks})"
            f" AND (lease_owner IS NULL OR lease_expires IS NULL OR lease_expires < ? OR lease_owner = ?)",
            (lease.owner, now + lease.seconds, run_id, *FINISHED, now, dead),
        ).rowcount
    return changed > 0


def release(database: Database, run_id: str, owner: str, status: str) -> None:
    """End the rollback: record how it stands (``status``) and give the lease up."""
    with database.write() as db:
        fenced_update(db, run_id, owner, "rollback = ?, lease_owner = NULL, lease_expires = NULL", (status,))


def read(database: Database, run_id: str) -> dict[int, Compensation]:
    """The run's compensations so far, by the step each undoes."""
    with database.connection() as db:
        rows = db.execute(
            "SELECT seq, tool, input, state, call_id, result, reran FROM compensations WHERE run_id = ?", (run_id,)
        ).fetchall()
    return {
        seq: Compensation(seq, tool, json.loads(text), state, call_id, _loads(result), bool(reran))
        for seq, tool, text, state, call_id, result, reran in rows
    }


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def begin(
    database: Database, key: bytes, run_id: str, seq: int, tool: str, input: Any, call_id: str, owner: str
) -> None:
    """Write the compensation of step ``seq`` ``started`` (again: ``reran`` when a crash left it so)."""
    with database.write() as db:
        fenced_update(db, run_id, owner, "updated = updated", ())
        db.execute(
            "INSERT OR REPLACE INTO compensations (run_id, seq, tool, input, state, call_id, reran, started)"
            " VALUES (?, ?, ?, ?, 'started', ?,"
            " EXISTS (SELECT 1 FROM compensations WHERE run_id = ? AND seq = ? AND state = 'started'), ?)",
            (run_id, seq, tool, json.dumps(input), call_id, run_id, seq, time.time()),
        )
        seal_compensation(db, key, run_id, seq)


def finish(database: Database, key: bytes, run_id: str, seq: int, envelope: dict[str, Any], owner: str) -> None:
    """Write the compensation's envelope: ``done`` when it succeeded, else ``failed`` (tried again next time)."""
    state = "done" if envelope.get("ok") else "failed"
    with database.write() as db:
        fenced_update(db, run_id, owner, "updated = updated", ())
        db.execute(
            "UPDATE compensations SET state = ?, result = ?, finished = ? WHERE run_id = ? AND seq = ?",
            (state, json.dumps(envelope), time.time(), run_id, seq),
        )
        seal_compensation(db, key, run_id, seq)


def forget(database: Database, key: bytes, run_id: str, seq: int, owner: str) -> None:
    """Drop the compensation of step ``seq`` (it waits for an approval: the next rollback makes it again)."""
    with database.write() as db:
        fenced_update(db, run_id, owner, "updated = updated", ())
        db.execute("DELETE FROM compensations WHERE run_id = ? AND seq = ?", (run_id, seq))
        seal_compensation(db, key, run_id, seq)  # the head, without it
