"""A run's journal in the store: one row per host call the program made, in order.

Each row holds the call's kind (``call``, ``search``, ``now``, ``random``), its
request and, once answered, its result, ``seq`` from 0. A step is written
``started`` before a live tool call runs (:func:`begin_step`) and ``done`` with
its result before the program sees it (:func:`finish_step`), each in its own
committed transaction, so a process killed at any point leaves a journal that a
resume can trust: every ``done`` step is answered from the journal, and a
``started`` one (in flight at the crash) runs again and says so (``reran``). A
step also keeps the texts a replay answers from without parsing anything: the
request as the program sent it (``asked``), what the program was sent back
(``answer``, a tool call's output or error) and the call's summary. The
journal's byte bound counts every text a step holds (``runs.journal_bytes``).

Each write seals the step it writes (:func:`._seal.seal_step`: a MAC over its texts chained to
the step before, with the home's run ``key``), in the same transaction.

With ``owner``, every write here is fenced by the run's lease
(:func:`._claims.fenced_update`): it happens only while that attempt holds it.
"""

from __future__ import annotations

import json
import time

from ..storage._sqlite import Database
from ._claims import fenced_update
from ._records import JournalStep, RecordedStep
from ._seal import seal_head, seal_step

__all__ = ["begin_step", "finish_step", "forget_step", "read", "read_recorded", "record_step"]

_STEP_GROWS = "steps = MAX(steps, ?), journal_bytes = journal_bytes + ?, updated = ?"


def read(database: Database, run_id: str) -> list[JournalStep]:
    """The run's steps in order."""
    with database.connection() as db:
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


def read_recorded(database: Database, run_id: str) -> list[RecordedStep]:
    """The run's steps in order, as a replay reads them: one query, the texts as stored, nothing parsed."""
    with database.connection() as db:
        rows = db.execute(
            "SELECT seq, kind, request, result, state, asked, answer, summary,"
            " LENGTH(request) + IFNULL(LENGTH(result), 0) + IFNULL(LENGTH(asked), 0)"
            " + IFNULL(LENGTH(answer), 0) + IFNULL(LENGTH(summary), 0)"
            " FROM journal WHERE run_id = ? ORDER BY seq",
            (run_id,),
        ).fetchall()
    return [RecordedStep(*row) for row in rows]


def begin_step(
    database: Database,
    key: bytes,
    run_id: str,
    seq: int,
    kind: str,
    request_text: str,
    call_id: str | None,
    *,
    asked: str | None,
    owner: str | None,
) -> None:
    """Write step ``seq`` as ``started`` (replacing one left ``started`` by a crash: it runs again);
    ``asked`` is the request as the program sent it."""
    now = time.time()
    with database.write() as db:
        fenced_update(db, run_id, owner, _STEP_GROWS, (seq + 1, len(request_text) + len(asked or ""), now))
        db.execute(
            "INSERT OR REPLACE INTO journal (run_id, seq, kind, request, state, call_id, reran, started, asked)"
            " VALUES (?, ?, ?, ?, 'started', ?,"
            " EXISTS (SELECT 1 FROM journal WHERE run_id = ? AND seq = ? AND state = 'started'), ?, ?)",
            (run_id, seq, kind, request_text, call_id, run_id, seq, now, asked),
        )
        seal_step(db, key, run_id, seq)


def record_step(
    database: Database,
    key: bytes,
    run_id: str,
    seq: int,
    kind: str,
    request_text: str,
    result_text: str,
    *,
    asked: str | None,
    owner: str | None,
) -> None:
    """Write step ``seq`` ``done`` at once (the clock, the random seed, a search: nothing to run twice);
    ``asked`` is the request as the program sent it (the program is answered ``result_text`` itself)."""
    now = time.time()
    size = len(request_text) + len(result_text) + len(asked or "")
    with database.write() as db:
        fenced_update(db, run_id, owner, _STEP_GROWS, (seq + 1, size, now))
        db.execute(
            "INSERT OR REPLACE INTO journal (run_id, seq, kind, request, result, state, started, finished, asked)"
            " VALUES (?, ?, ?, ?, ?, 'done', ?, ?, ?)",
            (run_id, seq, kind, request_text, result_text, now, now, asked),
        )
        seal_step(db, key, run_id, seq)


def finish_step(
    database: Database,
    key: bytes,
    run_id: str,
    seq: int,
    result_text: str,
    *,
    answer: str | None,
    summary: str | None,
    owner: str | None,
) -> None:
    """Write step ``seq``'s result (committed before the program sees it): the envelope
    (``result_text``), what the program is sent of it (``answer``) and the call's summary."""
    size = len(result_text) + len(answer or "") + len(summary or "")
    with database.write() as db:
        fenced_update(db, run_id, owner, "journal_bytes = journal_bytes + ?", (size,))
        db.execute(
            "UPDATE journal SET result = ?, state = 'done', finished = ?, answer = ?, summary = ?"
            " WHERE run_id = ? AND seq = ?",
            (result_text, time.time(), answer, summary, run_id, seq),
        )
        seal_step(db, key, run_id, seq)


def forget_step(database: Database, key: bytes, run_id: str, seq: int, *, owner: str | None) -> None:
    """Drop step ``seq`` (a call that paused the run: after the approval it is made again); the run's
    count of steps goes back to the steps its journal holds."""
    with database.write() as db:
        fenced_update(db, run_id, owner, "steps = MIN(steps, ?)", (seq,))
        db.execute("DELETE FROM journal WHERE run_id = ? AND seq = ?", (run_id, seq))
        seal_head(db, key, run_id)
