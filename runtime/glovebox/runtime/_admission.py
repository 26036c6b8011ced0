"""Admission control: how many calls a Runtime runs at once, and how many wait.

One :class:`Admission` per Runtime is the only gate every door goes through
(``call`` from any thread, ``acall``, the HTTP API and MCP). A call holds a
slot from the moment it is admitted until it has its result: while it runs,
and while it waits in a host function on an upstream. Up to ``max_in_flight``
calls hold slots; up to ``max_queued`` more wait, first come first served (a
slot that frees is handed to the oldest waiter); beyond that a call is refused
at once with :class:`~glovebox.Overloaded`, whose ``details.retry_after_ms`` is
an estimate from the recent call durations. A waiting ``acall`` holds no
thread: it waits on a future of its event loop.

``max_in_flight`` is also held to what the kernel lets the process map
(:func:`mapping_bound`): every call in flight needs a few memory mappings (its
thread's stack, wasmtime's signal stack, its instance's memory), and a process
past Linux's ``vm.max_map_count`` does not fail one call, it aborts. Beyond the
bound a call answers ``overloaded`` like any other refusal.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..core._errors import Overloaded

if TYPE_CHECKING:
    import asyncio

__all__ = ["DEFAULT_MAX_IN_FLIGHT", "DEFAULT_MAX_QUEUED", "Admission", "mapping_bound"]

logger = logging.getLogger("glovebox")

#: Calls a Runtime runs at once by default (the default instance pool holds 12,000).
DEFAULT_MAX_IN_FLIGHT = 10_000
#: Calls that may wait for a slot by default.
DEFAULT_MAX_QUEUED = 10_000
#: Memory mappings one call in flight may need: its thread's stack and guard page,
#: wasmtime's signal stack and guard page, its instance's memory reservation,
#: committed pages and data image, the allocator's arenas (8.4 measured with
#: 5,000 HTTP calls held; the rest is margin).
MAPS_PER_CALL = 10
#: Mappings kept for the rest of the process beyond those it has already.
MAPS_RESERVED = 4_096
_MAX_MAP_COUNT = Path("/proc/sys/vm/max_map_count")
_SELF_MAPS = Path("/proc/self/maps")
_FIRST_ESTIMATE_MS = 100.0
_MAX_RETRY_AFTER_MS = 60_000
_Wake = Callable[[], None]


class Admission:
    """A counting gate with a bounded FIFO of waiters.

    Args:
        max_in_flight: calls admitted at once (at least 1).
        max_queued: calls that may wait for a slot (0: refuse at once when full).
    """

    def __init__(self, max_in_flight: int, max_queued: int, *, maps: int | None = None) -> None:
        _check_bound("max_in_flight", max_in_flight, 1)
        _check_bound("max_queued", max_queued, 0)
        if maps is not None and max_in_flight > maps:
            if max_in_flight != DEFAULT_MAX_IN_FLIGHT:  # asked for explicitly: say why it is less
                logger.warning(
                    "max_in_flight=%d is more than this process can map (vm.max_map_count); using %d",
                    max_in_flight,
                    maps,
                )
            max_in_flight = maps
        self.max_in_flight = max_in_flight
        self.max_queued = max_queued
        self._lock = threading.Lock()
        self._in_flight = 0
        self._waiters: deque[_Wake] = deque()
        self._mean_ms = _FIRST_ESTIMATE_MS

    @property
    def in_flight(self) -> int:
        """Calls holding a slot right now."""
        return self._in_flight

    @property
    def queued(self) -> int:
        """Calls waiting for a slot right now."""
        return len(self._waiters)

    def _try_take(self) -> bool:
        """Take a free slot (lock held); refuse when the queue is full too."""
        if self._in_flight < self.max_in_flight and not self._waiters:
            self._in_flight += 1
            return True
        if len(self._waiters) >= self.max_queued:
            raise self._refusal()
        return False

    def enter(self) -> None:
        """Take a slot, waiting in line for one if need be.

        Raises:
            Overloaded: every slot is taken and the line is full.
        """
        with self._lock:
            if self._try_take():
                return
            event = threading.Event()  # only a call that waits needs one
            self._waiters.append(event.set)
        event.wait()  # a slot is handed over by `leave`

    async def aenter(self) -> None:
        """``enter`` for a coroutine: a call waiting in line holds no thread.

        Raises:
            Overloaded: every slot is taken and the line is full.
        """
        import asyncio  # imported here to keep `import glovebox` light

        loop = asyncio.get_running_loop()
        granted: asyncio.Future[None] = loop.create_future()

        def grant() -> None:  # on the loop: a cancelled waiter passes its slot on
            if granted.cancelled():
                self.leave()
            else:
                granted.set_result(None)

        def wake() -> None:
            loop.call_soon_threadsafe(grant)

        with self._lock:
            if self._try_take():
                return
            self._waiters.append(wake)
        try:
            await granted
        except asyncio.CancelledError:
            self._withdraw(wake, granted)
            raise

    def _withdraw(self, wake: _Wake, granted: asyncio.Future[None]) -> None:
        """A cancelled waiter leaves the line, or gives back the slot it was handed."""
        with self._lock:
            if wake in self._waiters:
                self._waiters.remove(wake)
                return
        if granted.done() and not granted.cancelled():
            self.leave()  # else `grant` sees the cancellation and passes the slot on

    def leave(self, duration_s: float | None = None) -> None:
        """Give a slot back (to the oldest waiter, if any); ``duration_s`` feeds the estimate."""
        with self._lock:
            if duration_s is not None:
                self._mean_ms += (duration_s * 1000.0 - self._mean_ms) / 16
            if not self._waiters:
                self._in_flight -= 1
                return
            wake = self._waiters.popleft()
        try:
            wake()
        except RuntimeError:  # its event loop is closed: pass the slot on
            self.leave()

    def _refusal(self) -> Overloaded:
        ahead = self._in_flight + len(self._waiters)
        retry_ms = self._mean_ms * max(1.0, ahead / self.max_in_flight)
        retry_after_ms = int(min(_MAX_RETRY_AFTER_MS, max(1.0, retry_ms)))
        return Overloaded(
            f"the host is at its bound of {self.max_in_flight} calls in flight and {self.max_queued} waiting; "
            f"retry in about {retry_after_ms} ms",
            details={
                "retry_after_ms": retry_after_ms,
                "max_in_flight": self.max_in_flight,
                "max_queued": self.max_queued,
            },
        )


def _check_bound(name: str, value: object, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < least:
        raise ValueError(f"{name} must be at least {least}, not {value}")


def mapping_bound(limit_file: Path = _MAX_MAP_COUNT, maps_file: Path = _SELF_MAPS) -> int | None:
    """Calls in flight the process can still map, or None where the kernel sets no such limit.

    ``(vm.max_map_count - mappings in use - MAPS_RESERVED) // MAPS_PER_CALL``, at least 1.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     limit, maps = Path(d, "max_map_count"), Path(d, "maps")
    ...     _ = limit.write_text("65530\\n"), maps.write_text("x\\n" * 1434)
    ...     mapping_bound(limit, maps), mapping_bound(Path(d, "absent"), maps)
    (6000, None)
    """
    try:
        limit = int(limit_file.read_text())
        with maps_file.open("rb") as lines:
            used = sum(1 for _ in lines)
    except (OSError, ValueError):
        return None
    return max(1, (limit - used - MAPS_RESERVED) // MAPS_PER_CALL)
