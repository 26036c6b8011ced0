"""SQLite databases shared by threads and processes: one connection per thread, WAL.

The registry, the audit log and the approval store each keep a file under
``GLOVEBOX_HOME``. Each thread gets its own connection (SQLite connections are
not for concurrent use); every connection is tracked so that ``close()`` ends
them all; writers take the database's write lock up front (``BEGIN
IMMEDIATE``), so concurrent writers in several processes serialise instead of
failing half-way. ``synchronous=NORMAL`` in WAL mode keeps every committed
transaction across a process crash (SIGKILL); only power loss can drop the
newest ones.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["Database"]


class Database:
    """A SQLite file opened once per thread."""

    def __init__(self, path: Path, schema: str) -> None:
        self.path = path
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self.connection().executescript(schema)

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use)."""
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
            with self._lock:
                self._connections.append(db)
        return db

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A transaction holding the write lock from its first statement; rolled back on error."""
        db = self.connection()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Close every connection any thread opened."""
        with self._lock:
            for db in self._connections:
                db.close()
            self._connections.clear()
        self._local = threading.local()
