"""The attempts of one call: when a failed call is tried again, and within which deadline.

A call whose tool has ``retries`` in the policy (an idempotent tool, see
``glovebox.policy._guards``) and that failed with a listed, retryable code is
run again from the start: resolved, admitted (quotas count every attempt),
validated and run in a fresh sandbox, with its own call id and audit row.
Every attempt's row and envelope carry ``attempt`` (1, 2, ...) and
``first_call_id``; the caller gets the last attempt's envelope.

All attempts share the deadline of the first: its ``timeout_ms``, counted
from when the call was admitted. A later attempt gets only the time left, a
wait (the backoff, or the error's ``details.retry_after_ms`` when longer)
that would leave less than :data:`MIN_ATTEMPT_MS` is not taken, and the last
failure is the answer. A ``require_approval`` call is never retried: its
approval covers one run.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from ..model._result import CallResult
from ..policy import Decision
from ..policy._guards import Retries

__all__ = ["MIN_ATTEMPT_MS", "Attempts"]

#: The least time worth starting another attempt with (milliseconds).
MIN_ATTEMPT_MS = 5


class Attempts:
    """Which attempt of a call is running, the first one's call id, and the call's deadline."""

    __slots__ = ("deadline", "first_call_id", "number", "retries", "started")

    def __init__(self, started: float) -> None:
        #: When the call was admitted (``time.perf_counter``).
        self.started = started
        self.number = 1
        self.first_call_id: str | None = None
        #: When the last attempt must end (``time.perf_counter``); set by the first decision.
        self.deadline: float | None = None
        self.retries: Retries | None = None

    def begin(self, decision: Decision, meta: dict[str, Any]) -> Decision:
        """Note an attempt the policy admitted; return its decision, its timeout cut to the time left."""
        if self.number == 1:
            self.first_call_id = meta["call_id"]
            self.deadline = self.started + decision.limits.timeout_ms / 1000
            if decision.action == "allow":
                self.retries = decision.guards.retries
        if self.retries is None:
            return decision
        meta["attempt"], meta["first_call_id"] = self.number, self.first_call_id
        if self.number == 1:  # the first attempt has the whole deadline
            return decision
        assert self.deadline is not None
        left_ms = int((self.deadline - time.perf_counter()) * 1000)
        if left_ms >= decision.limits.timeout_ms:
            return decision
        limits = decision.limits.model_copy(update={"timeout_ms": max(1, left_ms)})
        return dataclasses.replace(decision, limits=limits)

    def next_wait(self, result: CallResult) -> float | None:
        """Seconds to wait before the next attempt, or None when ``result`` is the answer."""
        retries, error = self.retries, result.error
        if retries is None or error is None or self.number >= retries.attempts:
            return None
        if not error.retryable or error.code not in retries.retry_on:
            return None
        wait_ms = retries.delay_ms(self.number + 1)
        after = error.details.get("retry_after_ms")
        if isinstance(after, int | float) and not isinstance(after, bool):
            wait_ms = max(wait_ms, float(after))
        assert self.deadline is not None
        if (self.deadline - time.perf_counter()) * 1000 - wait_ms < MIN_ATTEMPT_MS:
            return None
        self.number += 1
        return wait_ms / 1000
