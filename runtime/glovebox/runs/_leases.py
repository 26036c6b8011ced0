"""An attempt's hold on its run: the lease it owns, renewed while it runs, its writes fenced by it.

An attempt takes the run's lease when it starts or claims the run (the store's
atomic ``UPDATE ... WHERE``: :mod:`._claims`) and holds it until it ends:

- :func:`new_lease` names the owner (host, pid and a random id), so another
  process of the same host can tell whether the holder still lives;
- :class:`Heartbeats` renews it every third of its length, one thread for all
  the attempts a runner executes; a renewal that finds it gone stops the attempt;
- :class:`LeasedStore` is the store as the attempt's ``RunHost`` writes it: every
  journal write fenced by the lease, and a write refused stops the program;
- :func:`dead_holder` and :func:`gone`: a holder that is a process of this host
  that no longer exists (killed by SIGKILL, say) need not be waited out.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from ..core._errors import CallError, RunBusy
from ._host import RunHost
from ._records import Lease, RunRecord
from ._store import RunStore

__all__ = ["DEFAULT_LEASE_S", "Heartbeats", "LeasedStore", "dead_holder", "gone", "new_lease"]

logger = logging.getLogger("glovebox.runs")

#: How long an attempt's lease lasts without renewal (the policy's ``runs.lease_seconds``).
DEFAULT_LEASE_S = 30.0

#: Seconds the lease thread waits for another attempt before it ends.
_IDLE_S = 5.0

#: What stops an attempt that lost its lease (``LeasedStore.lose``).
Lose = Callable[[CallError], None]


def new_lease(seconds: float) -> Lease:
    """A lease of ``seconds`` owned by a new attempt of this process."""
    return Lease(f"{socket.gethostname()}/pid {os.getpid()}/{uuid.uuid4().hex[:8]}", float(seconds))


def dead_holder(record: RunRecord) -> str | None:
    """The lease owner of ``record`` when it is a process of this host that no longer exists (killed,
    say, by SIGKILL): its lease need not be waited out. None when the holder lives, may live (another
    host, another user's process), or there is no live lease."""
    owner = record.lease_owner
    if owner is None or not record.leased():
        return None
    return owner if gone(owner) else None


def gone(owner: str) -> bool:
    """Whether lease owner ``owner`` is a process of this host that no longer exists (whether or not
    its lease has expired); False when it lives or may live (another host, another user's process)."""
    host, _, rest = owner.partition("/pid ")
    pid = rest.partition("/")[0]
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists (another user's process)
        return False
    return False


class LeasedStore:
    """The run store as one attempt's :class:`~glovebox.runs._host.RunHost` writes it: every journal
    write fenced by the attempt's lease. A write refused (the lease is gone) stops the program: ``RunBusy``."""

    def __init__(self, store: RunStore, owner: str) -> None:
        self._store = store
        self._owner = owner
        self.host: RunHost | None = None
        #: Why the attempt lost its lease (None while it holds it).
        self.lost: CallError | None = None

    def lose(self, why: CallError) -> None:
        """Stop the attempt: its next host call answers ``stop``, and it ends with ``why``."""
        if self.lost is None:
            self.lost = why
        if self.host is not None and self.host.stopped is None:
            self.host.stopped = why

    def begin_step(
        self, run_id: str, seq: int, kind: str, request_text: str, call_id: str | None, **texts: Any
    ) -> None:
        self._fenced(self._store.begin_step, run_id, seq, kind, request_text, call_id, **texts)

    def record_step(self, run_id: str, seq: int, kind: str, request_text: str, result_text: str, **texts: Any) -> None:
        self._fenced(self._store.record_step, run_id, seq, kind, request_text, result_text, **texts)

    def finish_step(self, run_id: str, seq: int, result_text: str, **texts: Any) -> None:
        self._fenced(self._store.finish_step, run_id, seq, result_text, **texts)

    def forget_step(self, run_id: str, seq: int) -> None:
        self._fenced(self._store.forget_step, run_id, seq)

    def _fenced(self, write: Callable[..., None], *args: Any, **texts: Any) -> None:
        try:
            write(*args, **texts, owner=self._owner)
        except RunBusy as lost:
            self.lose(lost)
            raise


class Heartbeats:
    """One thread renewing the leases of every attempt a runner executes, each every third of its
    length; a renewal that finds a lease gone stops that attempt. The thread starts with the first
    attempt and ends once none has been held for :data:`_IDLE_S` (a thread per attempt cost ~1.6 ms
    of each run to start and join)."""

    def __init__(self, store: RunStore) -> None:
        self._store = store
        self._lock = threading.Condition()
        #: Each held lease: [when it is next renewed (monotonic), run_id, lease, lose].
        self._held: dict[int, list[Any]] = {}
        self._next_key = 0
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def hold(self, run_id: str, lease: Lease, lose: Lose) -> Iterator[None]:
        """Renew ``lease`` on ``run_id`` while the block runs; ``lose`` is told when it is gone."""
        with self._lock:
            key = self._next_key
            self._next_key += 1
            self._held[key] = [time.monotonic() + lease.seconds / 3, run_id, lease, lose]
            if self._thread is None:
                self._thread = threading.Thread(target=self._beat, name="glovebox-run-leases", daemon=True)
                self._thread.start()
            self._lock.notify()
        try:
            yield
        finally:
            with self._lock:
                self._held.pop(key, None)

    def _beat(self) -> None:
        while True:
            with self._lock:
                due = self._due()
                while due is None:
                    idle_since = time.monotonic()
                    while not self._held:
                        left = _IDLE_S - (time.monotonic() - idle_since)
                        if left <= 0:
                            self._thread = None
                            return
                        self._lock.wait(left)
                    due = self._due()
            for key, run_id, lease, lose in due:
                if not self._renew(run_id, lease, lose):
                    with self._lock:
                        self._held.pop(key, None)

    def _due(self) -> list[tuple[int, str, Lease, Lose]] | None:
        """The leases due for renewal now (each rescheduled), waiting (under the lock) until one is;
        None when none is held."""
        while self._held:
            now = time.monotonic()
            soonest = min(entry[0] for entry in self._held.values())
            if soonest > now:
                self._lock.wait(soonest - now)
                continue
            due = []
            for key, entry in self._held.items():
                if entry[0] <= now:
                    entry[0] = now + entry[2].seconds / 3
                    due.append((key, entry[1], entry[2], entry[3]))
            return due
        return None

    def _renew(self, run_id: str, lease: Lease, lose: Lose) -> bool:
        """Renew one lease; False once it is gone (the attempt was told to stop)."""
        try:
            held = self._store.renew(run_id, lease)
        except Exception:  # a locked or closed database: the fenced writes still decide
            logger.warning("cannot renew the lease of run %s", run_id, exc_info=True)
            return True
        if held:
            return True
        now = self._store.get(run_id)
        holder = None if now is None else now.lease_owner
        lose(
            RunBusy(
                f"run {run_id!r} is no longer held by this attempt ({lease.owner}):"
                + (" it was cancelled" if holder is None else f" {holder} took it over"),
                details={"run_id": run_id, "holder": holder, "lost_by": lease.owner},
                retryable=False,
            )
        )
        return False
