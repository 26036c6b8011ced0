"""Compute slots: how many admitted calls run Python or wasm at once.

Admission (:mod:`glovebox.runtime._admission`) lets thousands of calls be in flight,
each on a thread of its own, most of them waiting on an upstream. Were they all
free to run, an upstream that answers them all at once would wake them all at
once, and they would fight for the GIL; CPython's hand-over is not fair, so
some would starve until their deadline passed. A :class:`ComputeSlots` keeps
that bounded and fair: an admitted call holds one of ``max_running`` slots
while it runs (the policy check, the sandbox, its wasm, the host's Python, the
audit record), and gives it back while it waits for the network in a host
function — around each blocking socket operation of the HTTP capability (name
resolution, connect, TLS handshake, every ``send`` and ``recv``) and around a
remote MCP tool's whole exchange — see :func:`waiting`. A slot that frees is
handed to the oldest waiter, so calls run again in the order their answers
came.

The wait to run again counts against the call's deadline, which is wall-clock:
a call inside the sandbox waits at most until its deadline, and a call whose
deadline passes while it waits answers ``timeout`` (it then runs to its end
without a slot: its wasm traps at the next epoch check, and the host only
records the result). The first slot of a call is taken before its deadline
starts, like an admission slot. The store's epoch deadline is that same
wall-clock deadline and is not extended for the wait: the wait is bounded by
it instead, so a call that gets its slot back returns to its wasm with the
time it has left, and one that does not is a ``timeout`` either way.

No deadlock: a thread never waits for a slot while holding anything another
slot holder needs (a SQLite connection, the audit commit's lead); threads that
hold those either hold a slot already or need none.
"""

from __future__ import annotations

import os
import threading
from collections import deque

from ._callstate import current_call

__all__ = ["DEFAULT_MAX_RUNNING", "ComputeSlots", "waiting"]

#: Calls that run Python or wasm at once by default: two per core.
DEFAULT_MAX_RUNNING = 2 * (os.cpu_count() or 1)

_local = threading.local()


class ComputeSlots:
    """A fair (first come, first served) counting semaphore with a per-thread holder.

    Args:
        max_running: slots (at least 1).
    """

    def __init__(self, max_running: int) -> None:
        if isinstance(max_running, bool) or not isinstance(max_running, int):
            raise TypeError(f"max_running must be an int, not {type(max_running).__name__}")
        if max_running < 1:
            raise ValueError(f"max_running must be at least 1, not {max_running}")
        self.max_running = max_running
        self._lock = threading.Lock()
        self._free = max_running
        self._waiters: deque[threading.Lock] = deque()

    @property
    def running(self) -> int:
        """Slots held right now."""
        return self.max_running - self._free

    @property
    def waiting(self) -> int:
        """Threads waiting for a slot right now."""
        return len(self._waiters)

    def acquire(self, timeout: float | None = None) -> bool:
        """Take a slot, after every thread that asked before; False when ``timeout`` (s) passes first."""
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return True
            turn = threading.Lock()
            turn.acquire()
            self._waiters.append(turn)
        if turn.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            return True  # handed over by `release`
        with self._lock:
            if turn in self._waiters:
                self._waiters.remove(turn)
                return False
        return True  # handed over just as the wait ended: it is ours

    def release(self) -> None:
        """Give a slot back: to the oldest waiter, if any."""
        with self._lock:
            if self._waiters:
                self._waiters.popleft().release()
            else:
                self._free += 1

    def enter(self) -> bool:
        """Hold a slot on this thread; False (nothing taken) when the thread holds one already."""
        if getattr(_local, "slots", None) is self:
            return False
        self.acquire()
        _local.slots = self
        return True

    def leave(self, entered: bool) -> None:
        """Undo :meth:`enter` (give the slot back unless it was lost waiting past a deadline)."""
        if not entered:
            return
        if getattr(_local, "slots", None) is self:
            _local.slots = None
            self.release()


class _Waiting:
    """The context of :func:`waiting`."""

    __slots__ = ("_slots",)

    def __init__(self) -> None:
        self._slots: ComputeSlots | None = None

    def __enter__(self) -> None:
        slots = getattr(_local, "slots", None)
        if slots is not None:
            self._slots = slots
            _local.slots = None
            slots.release()

    def __exit__(self, *exc: object) -> None:
        slots = self._slots
        if slots is None:
            return
        self._slots = None
        state = current_call()
        if state is None:
            if slots.acquire():
                _local.slots = slots
            return
        if slots.acquire(state.remaining_s()):
            _local.slots = slots
        else:  # out of time waiting to run again: the call ends as `timeout`, without a slot
            state.timed_out = True


def waiting() -> _Waiting:
    """A context for blocking I/O: the thread's compute slot is given up inside, taken back after.

    Inside a sandboxed call the slot is waited for until the call's deadline;
    if that passes first, the call is marked timed out and runs on without a
    slot. With no slot held, the context does nothing.
    """
    return _Waiting()
