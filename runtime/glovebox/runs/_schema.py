"""The tables of ``HOME/runs.sqlite``, and the columns a store made by an earlier glovebox gains on open.

A column is only ever added (nullable, or with a default), so a store written
by any earlier release opens, and its rows stay as they are: a journal step
written before the replay texts (``asked``, ``answer``, ``summary``) has them
NULL and is replayed the slower way. A store made before the seals (``program_digest``,
``seal``: :mod:`._seal`) has its runs sealed on open, as they stand then.
"""

from __future__ import annotations

from pathlib import Path

from ..storage._sqlite import Database
from ._seal import seal_all, seal_compensations

__all__ = ["open_database"]

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
    first_call_id TEXT,
    program_digest TEXT,
    seal TEXT,
    journal_head TEXT,
    rollback TEXT,
    compensations_head TEXT
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
    seal TEXT,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS compensations (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    tool TEXT NOT NULL,
    input TEXT NOT NULL,
    state TEXT NOT NULL,
    call_id TEXT NOT NULL,
    result TEXT,
    reran INTEGER NOT NULL DEFAULT 0,
    started REAL NOT NULL,
    finished REAL,
    seal TEXT,
    PRIMARY KEY (run_id, seq)
);
"""

#: Columns added after the first release, per table (a store made before them gets them on open).
_ADDED = {
    "runs": (
        ("lease_owner", "TEXT"),
        ("lease_expires", "REAL"),
        ("resumed_by", "TEXT"),
        ("attempt_call_id", "TEXT"),
        ("first_call_id", "TEXT"),
        ("program_digest", "TEXT"),
        ("seal", "TEXT"),
        ("journal_head", "TEXT"),
        ("rollback", "TEXT"),
        ("compensations_head", "TEXT"),
    ),
    # the texts a replay answers from without parsing (NULL in a step written before them)
    "journal": (("asked", "TEXT"), ("answer", "TEXT"), ("summary", "TEXT"), ("seal", "TEXT")),
    "compensations": (("seal", "TEXT"),),
}


def open_database(path: Path, key: bytes) -> Database:
    """The run store at ``path``, made if missing, upgraded if an earlier glovebox made it (its runs
    sealed with ``key`` as they stand: :mod:`._seal`)."""
    database = Database(path, _SCHEMA)
    try:
        _upgrade(database, key)
    except BaseException:
        database.close()
        raise
    return database


def _upgrade(database: Database, key: bytes) -> None:
    """Give a store made by an earlier glovebox the columns it lacks (its rows stay as they are), and
    seal the runs it holds that have no seal yet (made before the seals)."""
    with database.write() as db:
        unsealed = compensations_unsealed = False
        for table, added in _ADDED.items():
            columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
            for name, kind in added:
                if name not in columns:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
                    unsealed = unsealed or (name == "seal" and table != "compensations")
                    compensations_unsealed = compensations_unsealed or name == "compensations_head"
        if unsealed:  # only the once: a seal dropped later is tampering, never sealed again
            seal_all(db, key)
        if compensations_unsealed:  # the rollbacks' rows made before their seals, the once too
            seal_compensations(db, key)
