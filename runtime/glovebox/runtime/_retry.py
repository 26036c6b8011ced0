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

**Fallbacks.** When the policy's guards name ``fallback`` tools and the call's
answer (after its retries) is a retryable failure, each fallback is called in
turn, for the same principal, until one answers something else. A tool that is
not idempotent falls back only on the codes that mean it did not run
(:data:`NOT_RUN`). A fallback is a call of its own (its own decision, retries,
breaker, checks and audit row), inside the first call's deadline, and its
envelope and row carry ``routed_from``: the tool, call id and code it stands in
for. Only the first tool's list is followed, so fallbacks never loop.

The Runtime also runs an evaluator tool (``glovebox.runtime._checks``) on an
``Attempts`` made ``within`` the judged call's deadline.

**A run's nested calls.** A call a code-mode run makes (its context names the
run's ``deadline_at``) is also held to the run's deadline (``run_deadline``):
its timeout is cut to the time the run has left, its retries and fallbacks
share that bound, and one that starts after it passed does not run
(:meth:`Attempts.check_run`). A call cut short this way answers ``timeout``
saying so (:meth:`Attempts.run_timeout`), so no nested call outlives its run.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from ..core._errors import CallTimeout
from ..model._result import CallResult
from ..policy import Decision
from ..policy._guards import Guards, Retries

__all__ = ["MIN_ATTEMPT_MS", "NOT_RUN", "Attempts"]

#: The least time worth starting another attempt with (milliseconds).
MIN_ATTEMPT_MS = 5
#: Retryable codes that mean the tool did not run: a tool that is not idempotent falls back only on these.
NOT_RUN = frozenset({"circuit_open", "overloaded", "rate_limited"})


class Attempts:
    """Which attempt of a call is running, the first one's call id, and the call's deadline."""

    __slots__ = (
        "by_run",
        "deadline",
        "first_call_id",
        "guards",
        "number",
        "retries",
        "routed_from",
        "run_deadline",
        "started",
        "timeout_ms",
        "within",
    )

    def __init__(
        self,
        started: float,
        *,
        within: float | None = None,
        routed_from: dict[str, Any] | None = None,
        run_deadline: float | None = None,
    ) -> None:
        #: When the call was admitted (``time.perf_counter``).
        self.started = started
        self.number = 1
        self.first_call_id: str | None = None
        #: When the last attempt must end (``time.perf_counter``); set by the first decision.
        self.deadline: float | None = None
        self.retries: Retries | None = None
        #: The deadline of the code-mode run that makes this call (``time.perf_counter``), or None.
        self.run_deadline = run_deadline
        if run_deadline is not None:
            within = run_deadline if within is None else min(within, run_deadline)
        #: A deadline the call must also keep (``time.perf_counter``): the call it stands in for, or judges,
        #: and the run that makes it.
        self.within = within
        #: Whether the run's deadline comes before the call's own (set by the first decision).
        self.by_run = False
        #: The tool's own timeout, as the first decision gave it (milliseconds).
        self.timeout_ms = 0
        #: The tool, call id and code this call stands in for, when it is a fallback.
        self.routed_from = routed_from
        #: The guards the policy gave the tool (see :meth:`note`).
        self.guards: Guards | None = None

    def begin(self, decision: Decision, meta: dict[str, Any]) -> Decision:
        """Note an attempt the policy admitted; return its decision, its timeout cut to the time left."""
        if self.number == 1:
            self.first_call_id = meta["call_id"]
            own = self.started + decision.limits.timeout_ms / 1000
            self.deadline = own if self.within is None else min(own, self.within)
            self.timeout_ms = decision.limits.timeout_ms
            self.by_run = self.run_deadline is not None and self.deadline == self.run_deadline < own
            if decision.action == "allow":
                self.retries = decision.guards.retries
        if self.routed_from is not None:
            meta["routed_from"] = self.routed_from
        if self.retries is not None:
            meta["attempt"], meta["first_call_id"] = self.number, self.first_call_id
        elif self.within is None:
            return decision
        if self.number == 1 and self.within is None:  # the first attempt has the whole deadline
            return decision
        assert self.deadline is not None
        left_ms = int((self.deadline - time.perf_counter()) * 1000)
        if left_ms >= decision.limits.timeout_ms:
            return decision
        limits = decision.limits.model_copy(update={"timeout_ms": max(1, left_ms)})
        return dataclasses.replace(decision, limits=limits)

    def check_run(self) -> None:
        """Refuse a nested call that would start after its run's deadline passed.

        Raises:
            CallTimeout: the run's deadline has passed.
        """
        if self.run_deadline is not None and time.perf_counter() >= self.run_deadline:
            raise CallTimeout(
                "the run's deadline passed before this call could start: it did not run",
                details={"timeout_ms": 0, "deadline": "run"},
            )

    def run_timeout(self, error: CallTimeout) -> CallTimeout:
        """The ``timeout`` of a call its run's deadline cut short: it says so, and names both timeouts."""
        if not self.by_run:
            return error
        assert self.deadline is not None
        left_ms = max(1, int((self.deadline - self.started) * 1000))
        return CallTimeout(
            f"the tool did not finish within the {left_ms} ms its run had left (its own timeout is"
            f" {self.timeout_ms} ms): the run's deadline cut it short",
            details={**error.details, "timeout_ms": left_ms, "tool_timeout_ms": self.timeout_ms, "deadline": "run"},
        )

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

    def note(self, guards: Guards | None) -> None:
        """The guards the policy gave the tool, known even when a quota refused the call before :meth:`begin`."""
        if self.guards is None:
            self.guards = guards

    def routes(self, result: CallResult) -> tuple[str, ...]:
        """The fallbacks to try in turn after ``result``: none unless it is a failure the guards route around."""
        if self.guards is None or not self.guards.fallback or not self.moves_on(result):
            return ()
        return self.guards.fallback

    def moves_on(self, result: CallResult) -> bool:
        """Whether ``result`` is a failure a fallback may stand in for (see :data:`NOT_RUN`)."""
        error = result.error
        if error is None or not error.retryable:
            return False
        return (self.guards is not None and self.guards.idempotent) or error.code in NOT_RUN

    def routed(self, result: CallResult) -> Attempts:
        """The attempts of a fallback standing in for ``result``: inside this call's deadline."""
        origin = {"tool": result.meta["tool"], "call_id": result.meta["call_id"], "code": result.code}
        return Attempts(time.perf_counter(), within=self.deadline, routed_from=origin, run_deadline=self.run_deadline)
