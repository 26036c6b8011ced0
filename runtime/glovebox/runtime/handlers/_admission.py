"""``Admission``: a call takes one of the Runtime's ``max_in_flight`` slots, or answers ``overloaded``."""

from __future__ import annotations

from ...core._errors import Overloaded
from ...model._result import CallResult
from .._admission import Admission as Slots
from .._call import Call, Handler
from .._record import AuditRecorder

__all__ = ["Admission"]


class Admission(Handler):
    """Waits in line for a slot (see ``glovebox.runtime._admission``); a refused call still leaves its row.

    The slot is given back by :class:`~glovebox.runtime.handlers.Compute`, which also runs for
    ``acall`` (whose admission waits in the coroutine, not on a thread).
    """

    __slots__ = ("_recorder", "_slots")

    def __init__(self, slots: Slots, recorder: AuditRecorder) -> None:
        super().__init__()
        self._slots = slots
        self._recorder = recorder

    def handle(self, call: Call) -> CallResult:
        next = self.next
        try:
            self._slots.enter()
        except Overloaded as refusal:
            return self._recorder.refuse(call, refusal)
        return next(call)
