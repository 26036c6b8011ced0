"""SQLite databases shared by threads and processes: a small pool of connections, WAL.

The registry, the audit log and the approval store each keep a file under
``GLOVEBOX_HOME``. A thread borrows a connection for one use
(``with database.connection() as db:``) and gives it back; at most
:data:`MAX_CONNECTIONS` are open per database (SQLite connections are not for
concurrent use), so thousands of calls in flight cost a handful of file
descriptors, not three per thread (the file, its ``-wal`` and its ``-shm``).
A thread that borrows again while it holds one gets the same connection, so
nested uses (a read inside a write) share one transaction and never wait for
a second. Threads that find every connection borrowed wait in line.
``close()`` closes the idle connections at once and each borrowed one when
it comes back; afterwards a borrow raises ``ValueError``, never opens a fresh
connection. Opening a database is safe under any concurrency: switching a
fresh file to WAL and creating its tables are retried with backoff while other
processes hold its locks. Writers take the database's write lock up front
(``BEGIN IMMEDIATE``), so concurrent writers in several processes serialise
instead of failing half-way; writers in one process first queue on a lock of
their own, so thousands of threads writing at once wait in line instead of
polling SQLite's busy handler (which is not fair, and would let some of them
time out). ``synchronous=NORMAL`` in WAL mode keeps every committed
transaction across a process crash (SIGKILL); only power loss can drop the
newest ones.

Hand-written on purpose: a general pool (SQLAlchemy's ``QueuePool``) neither
hands a thread back the connection it already holds (one transaction for nested
uses) nor queues one process's writers on a lock of their own ahead of
``BEGIN IMMEDIATE``, and glovebox would use nothing else of SQLAlchemy.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

__all__ = ["MAX_CONNECTIONS", "Database"]

T = TypeVar("T")

#: How long a connection waits for another's lock (seconds), and how long opening retries.
BUSY_TIMEOUT_S = 30.0
#: Connections one database keeps open at most (each holds three file descriptors).
MAX_CONNECTIONS = 4


class Database:
    """A SQLite file served by a bounded pool of connections."""

    def __init__(
        self,
        path: Path,
        schema: str,
        max_connections: int = MAX_CONNECTIONS,
        text_factory: Callable[[bytes], object] | None = None,
    ) -> None:
        """``text_factory`` turns a TEXT value's bytes into what a query returns (default: ``str``, strict UTF-8)."""
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, not {max_connections}")
        self.path = path
        self.max_connections = max_connections
        self._text_factory = text_factory
        self._local = threading.local()
        self._idle: list[sqlite3.Connection] = []
        self._open = 0
        self._free = threading.Condition(threading.Lock())
        self._write_lock = threading.RLock()
        self._closed = False
        with self.connection() as db:
            retry_locked(lambda: _create(db, schema))

    def connection(self) -> _Lease:
        """Borrow a connection for a ``with`` block (this thread's own if it holds one already).

        Raises:
            ValueError: on entering the block, when the database was closed.
        """
        return _Lease(self)

    def _borrow(self) -> sqlite3.Connection:
        with self._free:
            while True:
                if self._closed:
                    raise ValueError("this Runtime is closed")
                if self._idle:
                    return self._idle.pop()
                if self._open < self.max_connections:
                    self._open += 1
                    break
                self._free.wait()
        try:
            return _open(self.path, self._text_factory)
        except BaseException:
            with self._free:
                self._open -= 1
                self._free.notify()
            raise

    def _give_back(self, db: sqlite3.Connection) -> None:
        if db.in_transaction:  # a use that broke off mid-transaction leaves nothing behind
            db.execute("ROLLBACK")
        with self._free:
            if not self._closed:
                self._idle.append(db)
                self._free.notify()
                return
            self._open -= 1
        db.close()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A transaction holding the write lock from its first statement; rolled back on error."""
        with self.connection() as db, self._write_lock:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    @property
    def open_connections(self) -> int:
        """How many connections are open right now (idle or borrowed)."""
        with self._free:
            return self._open

    def close(self) -> None:
        """Close the idle connections now and the borrowed ones when given back; later use raises ``ValueError``.

        Idempotent.
        """
        with self._free:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._free.notify_all()
        for db in idle:
            db.close()


class _Lease:
    """``with database.connection() as db:`` — one borrowed connection, given back on exit."""

    __slots__ = ("_database", "_db")

    def __init__(self, database: Database) -> None:
        self._database = database
        self._db: sqlite3.Connection | None = None

    def __enter__(self) -> sqlite3.Connection:
        database = self._database
        held: sqlite3.Connection | None = getattr(database._local, "held", None)
        if held is not None:
            return held  # nested: the outer lease gives it back
        db = self._db = database._borrow()
        database._local.held = db
        return db

    def __exit__(self, *exc: object) -> None:
        db = self._db
        if db is not None:
            self._db = None
            self._database._local.held = None
            self._database._give_back(db)


def _open(path: Path, text_factory: Callable[[bytes], object] | None = None) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    if text_factory is not None:
        db.text_factory = text_factory
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
