"""The fold process: one per home, chaining every writer's journal outside the writers' interpreters.

Folding (reading journal lines, parsing them, hashing, inserting) is Python
work; done by a thread of the writing process it competed with the calls for
the GIL and stretched their tail latency. So a home's journal is folded by a
process of its own, started by the first writer that needs one and watched by
every writer (:class:`FoldSupervisor`):

* **One per home.** The folder holds an exclusive ``flock`` on
  ``GLOVEBOX_HOME/audit.fold.lock`` for as long as it runs. A writer takes
  that lock itself (without waiting) before it starts a folder and hands the
  locked descriptor to the child, so the lock is held from before the child
  exists until it exits: two writers never start two folders, and a writer
  that finds the lock held knows a folder is alive.
* **Supervised.** A thread of each writer checks, at most every
  :data:`CHECK_S` seconds and only after an append, that its folder runs, or
  that another holds the lock, and starts one when none does (the folder was
  killed, or exited idle). The append itself only sets a flag. A folder that
  keeps failing is restarted with a growing pause (up to
  :data:`MAX_BACKOFF_S`), and the writer logs why.
* **Nothing depends on it.** A call's row is in the journal before the call
  returns (``_journal``); the folder only moves rows into the chain sooner.
  Readers fold first and ``AuditLog.close`` folds what is left, so a folder
  killed at any point (even mid-transaction: SQLite rolls it back, and the
  journal offsets commit with the rows) loses and repeats nothing.
* **Cheap when idle.** The folder polls the journal files' sizes every
  :data:`POLL_S` while rows arrive, backing off to :data:`IDLE_POLL_S` when
  none do, and exits once the journal directory has been empty (no live
  writer holds a file) for :data:`IDLE_EXIT_S`, or nothing in it has changed (or
  folding has kept failing) for :data:`QUIET_EXIT_S`: the next append starts another.
* **Short-lived writers start none.** A writer asks for a folder only
  :data:`START_DELAY_S` after its first append: a CLI call that closes sooner
  folds its own rows at ``close`` and never pays for a process.

The child (``_foldmain``) runs ``python -I`` with only the audit log's modules imported (not
the whole of glovebox): about 0.1 s of one core to start. What it logs goes to
``GLOVEBOX_HOME/audit.fold.log``, created only when there is something to say.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from ..core._settings import process_environment

__all__ = [
    "CHECK_S",
    "IDLE_EXIT_S",
    "IDLE_POLL_S",
    "QUIET_EXIT_S",
    "LOCK_NAME",
    "LOG_NAME",
    "POLL_S",
    "FoldSupervisor",
    "folder_running",
]

#: The lock a home's folder holds while it runs, beside ``audit.sqlite``.
LOCK_NAME = "audit.fold.lock"
#: Where a folder writes its warnings (opened on the first one).
LOG_NAME = "audit.fold.log"
#: How often (at most) a writer checks that its home has a folder (seconds).
CHECK_S = 0.1
#: How long after its first append a writer first asks for a folder (seconds).
START_DELAY_S = 0.5
#: The folder's pause between two looks at the journal while rows arrive (seconds).
POLL_S = 0.02
#: The longest pause between two looks when nothing arrives (seconds).
IDLE_POLL_S = 0.25
#: How long the journal directory stays empty before the folder exits (seconds).
IDLE_EXIT_S = 2.0
#: How long the folder stays when the journal holds rows but nothing changes, or folding keeps
#: failing (a writer idle with its file open, a dead writer's file it cannot fold): it exits, and
#: the next append starts another, so no folder outlives the work it has by more than this.
QUIET_EXIT_S = 30.0
#: The longest pause before restarting a folder that failed (seconds).
MAX_BACKOFF_S = 30.0
#: How long a folder runs before its death no longer counts towards the pause.
HEALTHY_S = 10.0
_CHILD_FD = 3  # where the child finds the locked descriptor
_PACKAGE = Path(__file__).resolve().parent.parent  # the glovebox package directory
# The child imports glovebox's audit modules without running glovebox/__init__ (which loads everything).
# posix_spawn hands the child every descriptor the writer did not mark close-on-exec (a ProcessPool
# worker's pipe to its pool, say): the child closes them first, so none is held open past its owner.
_BOOT = (
    "import os, sys, types\n"
    "os.closerange(4, max(4, os.sysconf('SC_OPEN_MAX')))\n"
    "package = types.ModuleType('glovebox')\n"
    "package.__path__ = [sys.argv[1]]\n"
    "sys.modules['glovebox'] = package\n"
    "from glovebox.audit._foldmain import main\n"
    "sys.exit(main(sys.argv[2:]))\n"
)
logger = logging.getLogger("glovebox.audit")


class FoldSupervisor:
    """A writer's watch over its home's fold process: a thread that checks after appends."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.pid: int | None = None  # the folder this writer started, until it is seen to exit
        self._failures = 0
        self._since = 0.0  # when it was started
        self._wanted = False  # an append since the last check
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="glovebox-audit-watch", daemon=True)
        self._thread.start()

    def nudge(self) -> None:
        """After an append (costs an attribute read): the watch checks the folder soon."""
        if not self._wanted:
            self._wanted = True
            self._wake.set()

    def _watch(self) -> None:
        self._stopping.wait(START_DELAY_S)
        while not self._stopping.is_set():
            self._wake.wait()
            self._wake.clear()
            self._wanted = False
            if self._stopping.is_set():
                return
            pause = self._check()
            if pause is not None:  # no folder yet: look again after the pause, appends or not
                self._wake.set()
            self._stopping.wait(max(pause or 0.0, CHECK_S))

    def _check(self) -> float | None:
        """See that the home has a folder; None when it has, else the pause before trying again."""
        if self.pid is not None:
            status = _reap(self.pid)
            if status is None:
                if time.monotonic() - self._since > HEALTHY_S:
                    self._failures = 0  # it ran a while: its next death is not part of a crash loop
                return None  # ours, alive
            self.pid = None
            if status != 0:
                pause = self._failed()
                logger.warning(
                    "the audit fold process exited with status %s (see %s); another starts in %.1f s",
                    status,
                    self.home / LOG_NAME,
                    pause,
                )
                if pause:
                    return pause
            else:
                self._failures = 0
        try:
            self.pid, self._since = _start(self.home), time.monotonic()
        except OSError as exc:
            pause = self._failed()
            logger.warning("cannot start the audit fold process (rows wait for the next reader): %s", exc)
            return max(pause, CHECK_S)
        return None

    def _failed(self) -> float:
        """Count a failure; the pause before the next start (none after the first, then growing)."""
        self._failures += 1
        return 0.0 if self._failures == 1 else min(MAX_BACKOFF_S, 2.0 ** (self._failures - 2))

    def stop(self) -> None:
        """Stop watching, and end the folder this writer started, if it still runs. Idempotent."""
        self.close()
        pid = self.pid
        if pid is not None and _reap(pid) is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            _started.discard(pid)
        self.pid = None

    def close(self) -> None:
        """Stop watching; a running folder goes on serving the home's other writers. Idempotent."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join()


#: Folders this process started and has not yet seen exit (reaped whenever a writer checks).
_started: set[int] = set()


def _reap(pid: int) -> int | None:
    """The exit status of a folder this process started, or None while it runs.

    Reaps every other folder this process started that has exited meanwhile, so none stays a zombie.
    """
    status = None
    for child in list(_started):
        try:
            done, code = os.waitpid(child, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere
            done, code = child, 0
        if done:
            _started.discard(child)
            if child == pid:
                status = os.waitstatus_to_exitcode(code)
    if pid not in _started and status is None:
        return 0  # reaped before: it exited
    return status


def _start(home: Path) -> int | None:
    """Start a folder holding the home's lock; its pid, or None when a folder already holds it."""
    _reap(-1)
    fd = os.open(home / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # a folder is alive
        if fd == _CHILD_FD:  # dup2 onto itself would keep close-on-exec, and the child would get no lock
            fd = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _CHILD_FD + 1)
            os.close(_CHILD_FD)
        # The child's copy (its fd 3, without close-on-exec) holds the lock from here on.
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_DUP2, fd, _CHILD_FD),
        ]
        argv = [sys.executable, "-I", "-c", _BOOT, str(_PACKAGE), str(home), str(_CHILD_FD), str(QUIET_EXIT_S)]
        # setsid: a terminal's ^C goes to the writer, which may not be the home's last one
        pid = os.posix_spawn(sys.executable, argv, process_environment(), file_actions=actions, setsid=True)
        _started.add(pid)
        return pid
    finally:
        os.close(fd)


def folder_running(home: Path) -> bool:
    """Whether a fold process holds ``home``'s lock now."""
    try:
        fd = os.open(home / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
