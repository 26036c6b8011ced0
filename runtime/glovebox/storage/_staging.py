"""Temporary files under a home, and the sweep that removes those a dead process left.

Registration stages its work in ``cache/compiled/.register-*`` folders and
``blobs/sha256/*.part`` files; a call that rebuilds a compiled component
stages ``*.cwasm.<pid>.<thread>`` files. A process killed mid-way (SIGKILL)
leaves them behind. Every writer of such files holds a shared lock on
``cache/staging.lock`` while they exist; the sweep takes that lock exclusively
without waiting, so it runs only when no live process, on this host, is
staging anything, and never touches what one is writing. The kernel drops a
dead process's lock, so a killed writer never blocks the sweep.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["StagingLock", "sweep_staging"]


class StagingLock:
    """Shared by the writers of temporary files under a home; exclusive for the sweep."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the lock shared (waiting while a sweep runs) for as long as staged files exist."""
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)

    @contextmanager
    def exclusive(self) -> Iterator[bool]:
        """Try to hold the lock alone, without waiting; yield whether it was taken."""
        fd = self._open()
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
            else:
                yield True
        finally:
            os.close(fd)

    def _open(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def sweep_staging(lock: StagingLock, blob_dir: Path, compiled_dir: Path) -> list[Path] | None:
    """Remove staged files no live process is writing; None when one is staging right now."""
    with lock.exclusive() as alone:
        if not alone:
            return None
        found = [
            *compiled_dir.glob(".register-*"),
            *compiled_dir.glob("*.cwasm.*"),
            *blob_dir.glob("*.part"),
        ]
        removed = []
        for path in found:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
        return removed
