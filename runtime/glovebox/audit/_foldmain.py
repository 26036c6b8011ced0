"""The fold process's own code: ``python -I -c`` of ``_foldproc``'s boot runs :func:`main` (see ``_foldproc``)."""

from __future__ import annotations

import fcntl
import logging
import os
import time
from pathlib import Path

from ._foldproc import IDLE_EXIT_S, IDLE_POLL_S, LOG_NAME, POLL_S, QUIET_EXIT_S
from ._journal import journal_files
from ._log import AuditLog

__all__ = ["main"]


def main(argv: list[str]) -> int:
    """The fold process: ``<home> <locked fd> [quiet s]``; folds until the journal has been idle a while."""
    home, fd = Path(argv[0]), int(argv[1])
    quiet_s = float(argv[2]) if len(argv) > 2 else QUIET_EXIT_S
    handler = logging.FileHandler(home / LOG_NAME, delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(message)s"))
    logging.getLogger("glovebox").addHandler(handler)
    try:  # the descriptor the writer locked: the same open file, so this only confirms the lock
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # no descriptor, or not the lock: another folder is the home's

    log = AuditLog(home)  # a log that never appends starts no folder of its own
    try:
        return _fold_until_idle(log, quiet_s)
    finally:
        log.close()
        os.close(fd)


def _fold_until_idle(log: AuditLog, quiet_s: float) -> int:
    directory, seen, pause, empty_since = log.journal_dir, None, POLL_S, None
    busy_at = time.monotonic()  # when a fold last moved rows
    while True:
        try:
            sizes = [(path.name, path.stat().st_size) for path in journal_files(directory)]
        except FileNotFoundError:  # a file removed while listed; look again
            sizes = None
        if not directory.is_dir():
            return 0  # the home was removed
        now = time.monotonic()
        if sizes == []:
            empty_since = empty_since or now
            if now - empty_since >= IDLE_EXIT_S:
                return 0
        else:
            empty_since = None
        if now - busy_at >= quiet_s:
            return 0  # rows that stay (an idle writer's, or unfoldable): the next append starts a folder
        if sizes is not None and sizes != seen:
            try:
                log._fold_alone()
            except Exception:  # the rows stay in the journal; try again, less often
                logging.getLogger("glovebox.audit").warning("cannot fold the audit journal yet", exc_info=True)
                pause = min(pause * 2, IDLE_POLL_S * 4)
                time.sleep(pause)
                continue
            seen, pause, busy_at = sizes, POLL_S, now  # what changed since ``sizes`` was read is seen next time
        else:
            pause = min(pause * 2, IDLE_POLL_S)
        time.sleep(pause)
