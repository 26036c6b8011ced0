"""Collecting finished runs: a run that ended (``done``, ``failed``, ``cancelled``) and was not
touched since a cutoff is deleted with its journal (``glovebox runs gc``; the policy's
``runs.retention_days`` is the default age). A run still ``running`` or ``paused`` is never
collected, however old: it may be resumed."""

from __future__ import annotations

from ..storage._sqlite import Database
from ._records import FINISHED

__all__ = ["collect"]


def collect(database: Database, older_than: float) -> list[str]:
    """Delete finished runs last updated before ``older_than`` (epoch seconds) and their journals; their ids."""
    marks = ", ".join("?" * len(FINISHED))
    with database.write() as db:
        ids = [
            row[0]
            for row in db.execute(
                f"SELECT run_id FROM runs WHERE status IN ({marks}) AND updated < ?", (*FINISHED, older_than)
            )
        ]
        for run_id in ids:
            db.execute("DELETE FROM journal WHERE run_id = ?", (run_id,))
            db.execute("DELETE FROM compensations WHERE run_id = ?", (run_id,))
            db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
    return ids
