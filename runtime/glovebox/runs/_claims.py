"""Claims on a run in the store: take its lease, renew it, end it, and fence a write by it.

A run is executed by one attempt at a time: the attempt holds the run's lease
(``lease_owner``, ``lease_expires``), taken with one atomic ``UPDATE ... WHERE``
(by ``RunStore.create``, or by :func:`claim` only when no live lease is held)
and renewed (:func:`renew`) while it executes. Every journal write of a leased
attempt is fenced (:func:`fenced_update`, :func:`hold`): it happens only while
``lease_owner`` is still that attempt's, in the same transaction, else it
raises :class:`~glovebox.RunBusy` and writes nothing. So two processes resuming
one run cannot both make its next live call, and an attempt that stalled past
its expiry while another took the run over writes nothing more. A holder killed
by SIGKILL stops renewing; once its lease expires the run can be claimed, and
at once from the same host, where a holder whose process is gone is known dead
(``claim(dead=)``). An attempt's end (:func:`settle` with its owner) releases
the lease; so does a cancel, which stops the holder at its next host call.

The runner's side of a lease (who owns one, renewing it in the background,
whether its holder still lives) is :mod:`._leases`.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from ..core._errors import RunBusy
from ..storage._sqlite import Database
from ._records import Lease

__all__ = ["claim", "fenced_update", "hold", "renew", "settle"]


def claim(
    database: Database,
    run_id: str,
    statuses: tuple[str, ...],
    *,
    lease: Lease | None,
    by: str | None,
    call_id: str | None,
    dead: str | None,
) -> bool:
    """Mark the run ``running`` again (one more attempt, by ``by``, audited as ``call_id``) if it is in
    one of ``statuses`` and no live lease is held on it (``dead``'s counts as expired), taking ``lease``:
    one atomic ``UPDATE ... WHERE``, so of two processes claiming at once one wins. Whether it did."""
    marks = ", ".join("?" * len(statuses))
    now = time.time()
    owner, expires = (None, None) if lease is None else (lease.owner, now + lease.seconds)
    with database.write() as db:
        changed: int = db.execute(
            f"UPDATE runs SET status = 'running', attempts = attempts + 1, updated = ?,"
            f" lease_owner = ?, lease_expires = ?, resumed_by = ?, attempt_call_id = ?,"
            f" first_call_id = COALESCE(first_call_id, ?)"
            f" WHERE run_id = ? AND status IN ({marks})"
            f" AND (lease_owner IS NULL OR lease_expires IS NULL OR lease_expires < ? OR lease_owner = ?)",
            (now, owner, expires, by, call_id, call_id, run_id, *statuses, now, dead),
        ).rowcount
    return changed > 0


def renew(database: Database, run_id: str, lease: Lease) -> bool:
    """Push the lease's expiry on while ``lease`` still holds the run; whether it does."""
    with database.write() as db:
        changed: int = db.execute(
            "UPDATE runs SET lease_expires = ? WHERE run_id = ? AND lease_owner = ?",
            (time.time() + lease.seconds, run_id, lease.owner),
        ).rowcount
    return changed > 0


def settle(
    database: Database,
    run_id: str,
    status: str,
    result: dict[str, Any] | None,
    *,
    only_from: str | None,
    owner: str | None,
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
    with database.write() as db:
        changed: int = db.execute(query, args).rowcount
    return changed > 0


def fenced_update(
    db: sqlite3.Connection, run_id: str, owner: str | None, assignments: str, args: tuple[Any, ...]
) -> None:
    """``UPDATE runs SET assignments`` for ``run_id`` inside a write transaction, fenced (only while
    ``owner`` holds the lease, else :class:`~glovebox.RunBusy` and nothing is written; None: not
    fenced): the fence and the write are one statement."""
    query = f"UPDATE runs SET {assignments} WHERE run_id = ?"
    if owner is None:
        db.execute(query, (*args, run_id))
    elif db.execute(query + " AND lease_owner = ?", (*args, run_id, owner)).rowcount == 0:
        hold(db, run_id, owner)  # raises, naming who holds it now
        raise AssertionError("unreachable: the lease changed hands inside one write transaction")


def hold(db: sqlite3.Connection, run_id: str, owner: str | None) -> None:
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
