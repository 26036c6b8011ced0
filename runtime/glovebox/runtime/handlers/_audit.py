"""``Audit``: one attempt of a call, from its door checks to its envelope and audit row.

Below this handler a refusal is an exception; here it becomes the envelope (the
one place: ``glovebox.runtime._envelope.failure``) and every attempt, whatever
happened, leaves exactly one row.
"""

from __future__ import annotations

import time
from typing import Any

from ...core._errors import CallTimeout, InvalidInput
from ...core._jsonlimits import JsonRejected, checked_text, escape_surrogates
from ...model._result import CallResult
from .._call import Call, CallState, Handler
from .._envelope import failure, new_meta
from .._gate import CallTrace
from .._record import AuditRecorder

__all__ = ["Audit", "admissible"]


class Audit(Handler):
    """Makes the attempt's state, answers every refusal below as an envelope, and writes the row."""

    __slots__ = ("_recorder",)

    def __init__(self, recorder: AuditRecorder) -> None:
        super().__init__()
        self._recorder = recorder

    def handle(self, call: Call) -> CallResult:
        next = self.next
        tries = call.attempts
        assert tries is not None, "the attempts handler runs first"
        meta = new_meta(call.tool, call.principal, call.call_id)
        state = CallState(meta, CallTrace())
        try:
            state.encoded = admissible(call.tool, call.principal or meta["principal"], call.input)
            result = next(call.in_state(state))
        except CallTimeout as error:  # the run's deadline may have cut it short: it says so
            result = failure(tries.run_timeout(error), meta)
        except Exception as error:
            result = failure(error, meta)
        # In ms, 3 decimals: the float nearest a whole number of µs (``round(ms, 3)`` at a quarter of the cost).
        meta["duration_ms"] = round((time.perf_counter() - call.started) * 1_000_000) / 1000
        return self._recorder.record(result, call.input, state.trace)


def admissible(name: str, principal: Any, value: Any) -> tuple[str, int] | None:
    """Refuse, before anything else, what no later step may see: strings that are not
    valid Unicode and inputs that break the JSON rules. Return the input's JSON text and
    its UTF-8 size, made once here for the later steps (None when it is not JSON)."""
    for what, text in (("tool name", name), ("principal", principal)):
        if isinstance(text, str) and escape_surrogates(text) != text:
            raise InvalidInput(
                f"the {what} {escape_surrogates(text)!r} holds a lone surrogate: it must be valid Unicode"
            )
    try:
        return checked_text(value)
    except JsonRejected as exc:
        raise InvalidInput(f"input {exc}", details=exc.details) from exc
