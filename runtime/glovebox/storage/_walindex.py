"""A change signal for a WAL database that costs one ``pread``: its wal-index header.

Every process using a SQLite database in WAL mode shares the wal-index, the
``-shm`` file beside it, whose first 48 bytes are the header described in
SQLite's file-format documentation (https://www.sqlite.org/walformat.html):
each commit rewrites it (the change counter, the last valid frame, the
checksums; the salts when the WAL restarts). So while that header reads the
same, no transaction has committed since it was last read, in any process;
when it differs (or cannot be read, or is not initialised) the caller asks the
database itself. A header read while a commit is writing it differs from the
old one too, so a torn read only costs a database read.

The file is read with ``os.pread``, never memory-mapped: SQLite may truncate
it, and a read past its end returns fewer bytes where a mapping would raise
``SIGBUS``.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

__all__ = ["HEADER_BYTES", "WalIndex"]

#: The first copy of the wal-index header.
HEADER_BYTES = 48
_IS_INIT = 12  # offset of the header's isInit byte


class WalIndex:
    """Reads the wal-index header of the database at ``database`` (opened on first use)."""

    def __init__(self, database: Path) -> None:
        self.path = database.with_name(database.name + "-shm")
        self._fd: int | None = None
        self._lock = threading.Lock()
        self._closed = False

    def stamp(self) -> bytes | None:
        """The header as it is now, or None when there is no initialised one to read."""
        fd = self._fd if self._fd is not None else self._open()
        if fd is None:
            return None
        try:
            header = os.pread(fd, HEADER_BYTES, 0)
        except OSError:  # closed meanwhile, or an I/O error: ask the database
            return None
        return header if len(header) == HEADER_BYTES and header[_IS_INIT] else None

    def _open(self) -> int | None:
        if not hasattr(os, "pread"):
            return None
        with self._lock:
            if self._fd is None and not self._closed:
                try:
                    self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                except OSError:
                    return None
            return self._fd

    def close(self) -> None:
        """Close the file; later stamps are None. Idempotent."""
        with self._lock:
            fd, self._fd, self._closed = self._fd, None, True
        if fd is not None:
            os.close(fd)
