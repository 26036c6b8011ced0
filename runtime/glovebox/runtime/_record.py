"""The one place a call's audit row is written: a call that cannot be audited fails closed."""

from __future__ import annotations

import logging
from typing import Any

from ..audit._log import AuditLog
from ..audit._row import bare_row
from ..model._result import CallResult
from ._envelope import failure
from ._gate import CallTrace

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
