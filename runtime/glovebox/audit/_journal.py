"""The audit journal: append-only files of rows written before they are chained.

A call's audit record is one line appended to a file of the writer's own under
``GLOVEBOX_HOME/audit.journal/`` (one ``write``: the page cache keeps it when
the process is killed), and the log folds the lines into the hash chain in
``audit.sqlite`` in batches (see ``_audit``). One file per writing
``AuditLog``, so writers never wait for each other, and each file is named
once (``<pid>-<random>.jsonl``) and never reused; a writer moves to a fresh
file every :data:`ROTATE_BYTES`, so a long-running writer's folded lines do
not pile up.

A line is ``<time_ns> r<record>\\n``, the record as the writer gave it in
plain JSON, UTF-8 (orjson's, or the C encoder's ASCII where orjson would write it
differently: see ``_rowform.line``; the fold bounds it and puts it in canonical form), or, for a
record too large for that, ``<time_ns> <body>\\n``, where the body is the
row's canonical JSON (UTF-8) with ``"seq":0``: the bytes its hash covers once
its place is known (the only form older releases wrote). JSON escapes every
control character in a string, so a line never holds a raw newline. A writer
holds an exclusive ``flock`` on its file for as long as it writes it; a file
that nobody holds is dead, and once its complete lines are folded it is
removed. A file is created under a dot-name, locked, then
renamed, so a folder never sees a live file unlocked: folders read only
names that do not start with a dot, and a writer holds a shared ``flock`` on
the directory itself from creating its dot-named file until it has renamed it,
while the sweep of dot-named files a dead writer left takes that lock
exclusively, without waiting (skipping the sweep while any writer is naming a
file), so it never removes a file a live writer is about to name. A line cut short (a
writer killed mid-``write``, a full disk) is only ever at the end of a file
whose writer stopped writing it: the writer moves on to a fresh file after any
failed write, and a folder keeps only complete lines.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ROTATE_BYTES", "SUFFIX", "Journal", "Unfolded", "journal_files", "read_unfolded", "remove_dead_staging"]

SUFFIX = ".jsonl"
#: A writer moves to a fresh file once its file is this long, so folded files can be removed.
ROTATE_BYTES = 16 * 1024 * 1024
_CREATE = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


class Journal:
    """One AuditLog's own journal file, opened on the first write (safe across threads)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._written = 0

    def write(self, line: bytes) -> None:
        """Append one complete line.

        Raises:
            OSError: the line could not be written whole; later lines go to a fresh file.
        """
        with self._lock:
            fd = self._fd if self._fd is not None else self._open()
            try:
                done = os.write(fd, line)  # one call writes the whole line, bar a signal or a full disk
                if done < len(line):
                    view = memoryview(line)[done:]
                    while view:
                        view = view[os.write(fd, view) :]
            except BaseException:
                self._fd = None  # a cut line stays the last of a file no one writes again
                os.close(fd)
                raise
            self._written += len(line)
            if self._written >= ROTATE_BYTES:  # the full file becomes dead: folded, then removed
                self._fd = None
                os.close(fd)

    def close(self) -> None:
        """Stop writing this file (it becomes dead, and is removed once folded). Idempotent."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def _open(self) -> int:
        name = f"{os.getpid()}-{secrets.token_hex(8)}{SUFFIX}"
        staging = self.directory / f".{name}"
        with _naming(self.directory):  # no sweep runs until the file is locked and named
            fd = os.open(staging, _CREATE, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # held until close: "my writer is alive"
                os.rename(staging, self.directory / name)
            except BaseException:
                os.close(fd)
                with contextlib.suppress(OSError):
                    staging.unlink()
                raise
        self._fd, self._written = fd, 0
        return fd


@contextlib.contextmanager
def _naming(directory: Path) -> Iterator[None]:
    """Hold the directory's lock shared while a writer creates, locks and names its file."""
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def journal_files(directory: Path) -> list[Path]:
    """The named journal files of ``directory``, sorted (never a dot-named file still being created)."""
    return sorted(path for path in directory.glob(f"*{SUFFIX}") if not path.name.startswith("."))


@dataclass
class Unfolded:
    """The complete lines of one journal file past what was folded."""

    path: Path
    lines: list[bytes]
    end: int  # the offset just past the last complete line read
    finished: bool  # no writer holds the file, and everything up to its end has been read
    more: bool = False  # complete lines past ``end`` are left for the next read


def read_unfolded(path: Path, start: int, budget: int) -> Unfolded | None:
    """Read the complete lines of ``path`` from offset ``start``, at most ``budget`` bytes of them.

    Returns None when the file vanished (another folder removed it). A dead
    file's trailing bytes without a newline (a line cut short) are dropped
    once everything before them is read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        dead = _unheld(fd)
        size = os.fstat(fd).st_size
        if size <= start:
            return Unfolded(path, [], start, dead)
        data = os.pread(fd, min(size - start, budget), start)
        if b"\n" not in data and start + len(data) < size:  # one line longer than the budget
            data = os.pread(fd, size - start, start)
    finally:
        os.close(fd)
    cut = data.rfind(b"\n") + 1
    lines = data[:cut].splitlines()
    end = start + cut
    whole = start + len(data) == size
    if dead and whole:  # the cut tail of a dead file will never be completed
        return Unfolded(path, lines, size, True)
    return Unfolded(path, lines, end, False, more=not whole)


def _unheld(fd: int) -> bool:
    """Whether no writer holds the file (its writer closed it or died)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    return True  # the shared lock goes with the descriptor


def remove_dead_staging(directory: Path) -> bool:
    """Remove dot-named files left by a writer that died between creating and naming its file.

    Returns False, removing nothing, while a live writer is naming its file
    (it holds the directory's lock shared): the sweep is then left for later.
    """
    lock = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        for path in directory.glob(f".*{SUFFIX}"):
            path.unlink(missing_ok=True)  # no live writer holds a dot-named file now
        return True
    finally:
        os.close(lock)
