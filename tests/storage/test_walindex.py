"""The wal-index header as a change signal: it moves with every commit of any connection."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from glovebox.storage._walindex import HEADER_BYTES, WalIndex


def _wal_db(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (x)")
    return db


def test_every_commit_changes_the_stamp_and_a_rollback_does_not(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    db, other = _wal_db(path), sqlite3.connect(path, isolation_level=None)
    index = WalIndex(path)
    seen = {index.stamp()}
    for n in range(5):
        (db if n % 2 else other).execute("INSERT INTO t VALUES (?)", (n,))
        stamp = index.stamp()
        assert stamp is not None and len(stamp) == HEADER_BYTES and stamp not in seen
        seen.add(stamp)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO t VALUES (9)")
    other.execute("ROLLBACK")
    assert index.stamp() == stamp
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the WAL restarts: the next commit still moves the header
    db.execute("INSERT INTO t VALUES (10)")
    assert index.stamp() not in seen
    index.close()
    db.close()
    other.close()


def test_no_file_a_short_file_or_a_closed_index_give_no_stamp(tmp_path: Path) -> None:
    assert WalIndex(tmp_path / "missing.sqlite").stamp() is None
    (tmp_path / "short.sqlite-shm").write_bytes(b"\1" * (HEADER_BYTES - 1))
    assert WalIndex(tmp_path / "short.sqlite").stamp() is None
    (tmp_path / "blank.sqlite-shm").write_bytes(b"\0" * 4096)  # not initialised
    assert WalIndex(tmp_path / "blank.sqlite").stamp() is None
    db = _wal_db(tmp_path / "db.sqlite")
    index = WalIndex(tmp_path / "db.sqlite")
    assert index.stamp() is not None
    index.close()
    index.close()
    assert index.stamp() is None
    db.close()
