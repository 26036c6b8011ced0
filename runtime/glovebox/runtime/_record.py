"""The one place a call's audit row is written: a call that cannot be audited fails closed."""

from __future__ import annotations

import logging
import time
from typing import Any

from ..audit._log import AuditLog
from ..audit._row import bare_row, call_row
from ..core._errors import CallError, InternalError
from ..model._result import CallResult
from ._call import Call
from ._envelope import failure, new_meta
from ._gate import CallTrace, input_digest

__all__ = ["AuditRecorder"]

logger = logging.getLogger("glovebox")


class AuditRecorder:
    """Writes each call's row to the home's audit log."""

    __slots__ = ("log",)

    def __init__(self, log: AuditLog) -> None:
        self.log = log

    def record(self, result: CallResult, value: Any, trace: CallTrace) -> CallResult:
        """Commit the audit row of ``result``; a call that cannot be audited answers the failure instead."""
        try:
            self.log.append(trace.record(result, value))
        except Exception as error:
            call_id = result.meta["call_id"]
            logger.error("cannot write the audit record of call %s", call_id)
            failed = failure(error, result.meta)
            try:  # the call still leaves its row: the bare facts, marked as cut
                self.log.append(bare_row(failed, input_digest=trace.input_digest, decision=trace.decision))
            except Exception:
                logger.exception("cannot write even the bare audit record of call %s", call_id)
            return failed
        return result

    def refuse(self, call: Call, refusal: CallError) -> CallResult:
        """The answer (and the audit row) of a call refused before it ran (``overloaded``, say)."""
        return self.record(failure(refusal, new_meta(call.tool, call.principal, call.call_id)), call.input, CallTrace())

    def elsewhere(self, result: CallResult, value: Any) -> CallResult:
        """Write the row of a call answered outside the chain; a call that cannot be audited fails closed."""
        return self.record(result, value, CallTrace(input_digest=input_digest(value)))

    def lost(
        self,
        call: Call,
        *,
        what: str,
        where: dict[str, Any],
        recorded: bool | None = None,
        run: dict[str, Any] | None = None,
    ) -> CallResult:
        """The answer of a call whose worker ended before answering: ``internal_error``, retryable.

        ``where`` (who ran it: ``worker_pid``, ``replica``...) goes into ``meta`` and
        ``details``. The call's row is written unless one with its id is already
        there, or ``recorded`` says one was written elsewhere, so the call leaves
        exactly one row. ``run`` is the run context of a nested call of a
        code-mode run (its ``meta.run``). ``call.started`` is when it was sent.
        """
        assert call.call_id is not None
        meta = new_meta(call.tool, call.principal, call.call_id)
        if run is not None:
            meta["run"] = dict(run)
        meta["duration_ms"] = round((time.perf_counter() - call.started) * 1000, 3)
        meta.update(where)
        result = failure(InternalError(f"{what} ended before answering", retryable=True), meta, public=where)
        try:
            if not recorded and self.log.find(call.call_id) is None:
                self.log.append(call_row(result, None, input_digest=input_digest(call.input)))
        except Exception:
            logger.exception("cannot write the audit record of call %s", call.call_id)
        return result
