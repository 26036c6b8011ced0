"""SQLite databases shared by threads and processes: one connection per thread, WAL.

The registry, the audit log and the approval store each keep a file under
``GLOVEBOX_HOME``. Each thread gets its own connection (SQLite connections are
not for concurrent use), closed when that thread ends or when ``close()`` ends
them all, whichever comes first; after ``close()`` a thread gets a
``ValueError``, never a fresh connection. Opening a database is safe under any
concurrency: switching a fresh file to WAL and creating its tables are retried
with backoff while other processes hold its locks. Writers take the
database's write lock up front (``BEGIN IMMEDIATE``), so concurrent writers in
several processes serialise instead of failing half-way; writers in one
process first queue on a lock of their own, so thousands of threads writing
at once wait in line instead of polling SQLite's busy handler (which is not
fair, and would let some of them time out).
``synchronous=NORMAL`` in WAL mode keeps every committed transaction across a
process crash (SIGKILL); only power loss can drop the newest ones.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

__all__ = ["Database"]

T = TypeVar("T")

#: How long a connection waits for another's lock (seconds), and how long opening retries.
BUSY_TIMEOUT_S = 30.0


class _Holder:
    """One thread's connection; when the thread ends, its thread-local drops this and the connection closes."""

    __slots__ = ("__weakref__", "db")

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db


class Database:
    """A SQLite file opened once per thread."""

    def __init__(self, path: Path, schema: str) -> None:
        self.path = path
        self._local = threading.local()
        self._connections: dict[int, sqlite3.Connection] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.RLock()
        self._closed = False
        db = self.connection()
        retry_locked(lambda: _create(db, schema))

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use).

        Raises:
            ValueError: the database was closed.
        """
        holder: _Holder | None = getattr(self._local, "holder", None)
        if holder is not None:
            return holder.db
        db = _open(self.path)
        holder = _Holder(db)
        with self._lock:
            if self._closed:
                db.close()
                raise ValueError("this Runtime is closed")
            self._connections[id(db)] = db
        weakref.finalize(holder, self._retire, db)
        self._local.holder = holder
        return db

    def _retire(self, db: sqlite3.Connection) -> None:
        with self._lock:
            self._connections.pop(id(db), None)
        db.close()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A transaction holding the write lock from its first statement; rolled back on error."""
        db = self.connection()
        with self._write_lock:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    @property
    def open_connections(self) -> int:
        """How many threads hold a connection right now."""
        with self._lock:
            return len(self._connections)

    def close(self) -> None:
        """Close every connection any thread opened; later use raises ``ValueError``. Idempotent."""
        with self._lock:
            self._closed = True
            connections = list(self._connections.values())
            self._connections.clear()
        for db in connections:
            db.close()
        self._local = threading.local()


def _open(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    try:
        retry_locked(lambda: _wal(db))
        db.execute("PRAGMA synchronous=NORMAL")
    except BaseException:
        db.close()
        raise
    return db


def _wal(db: sqlite3.Connection) -> None:
    # The journal mode is stored in the file: only its first opener changes it,
    # which needs an exclusive lock that SQLite refuses at once (no busy wait)
    # while other connections hold shared ones.
    if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        db.execute("PRAGMA journal_mode=WAL")


def _create(db: sqlite3.Connection, schema: str) -> None:
    try:
        db.executescript(f"BEGIN IMMEDIATE;\n{schema}\nCOMMIT;")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def retry_locked(
    action: Callable[[], T], deadline_s: float = BUSY_TIMEOUT_S, sleep: Callable[[float], None] = time.sleep
) -> T:
    """Run ``action``, again with growing pauses while SQLite answers "locked" or "busy".

    Raises:
        sqlite3.OperationalError: another error, or still locked after ``deadline_s``.
    """
    give_up = time.monotonic() + deadline_s
    pause = 0.001
    while True:
        try:
            return action()
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if ("locked" not in text and "busy" not in text) or time.monotonic() >= give_up:
                raise
        sleep(pause * (0.5 + random.random()))
        pause = min(pause * 2, 0.1)
