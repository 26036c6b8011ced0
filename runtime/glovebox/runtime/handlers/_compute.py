"""``Compute``: an admitted call runs Python or wasm only while it holds a compute slot."""

from __future__ import annotations

import time

from ...model._result import CallResult
from ...sandbox._compute import ComputeSlots
from .._admission import Admission as Slots
from .._call import Call, Handler

__all__ = ["Compute"]


class Compute(Handler):
    """Starts the call's clock, holds a compute slot (see ``glovebox.sandbox._compute``), and gives
    both the compute slot and the admission slot back when the call ends."""

    __slots__ = ("_compute", "_slots")

    def __init__(self, slots: Slots, compute: ComputeSlots) -> None:
        super().__init__()
        self._slots = slots
        self._compute = compute

    def handle(self, call: Call) -> CallResult:
        next = self.next
        started = time.perf_counter()
        running = self._compute.enter()
        try:
            return next(call.started_at(started))
        finally:
            self._compute.leave(running)
            self._slots.leave(time.perf_counter() - started)
