"""Quota counters: how much each principal is using of the quotas that match its calls.

Counters are kept per principal and per matching ``quotas[]`` entry, in this
process only (each process of a deployment counts on its own). Windows slide
in one-second steps: a call counts against ``calls_per_minute``, and its fuel
against ``fuel_per_minute``, from the second it started (fuel: ended) until
61 whole seconds later, so no 60-second span ever holds more than the quota.
Fuel is charged when a call ends, so a call admitted under ``fuel_per_minute``
may overrun it once; the calls after it wait. ``max_in_flight`` counts calls
from admission until their result is ready (before the audit record is written).

A refusal raises :class:`~glovebox.RateLimited` with ``details.quota`` (which
entry and which bound), ``details.limit`` and ``details.retry_after_ms``: for
a window, when enough of it expires for one more call; for calls in flight,
when the earliest of them reaches its deadline (``timeout_ms``).

Hand-written on purpose: rate-limit libraries (``limits``, ``pyrate-limiter``)
count hits at admission, while these quotas also charge fuel once a call has
ended, hold in-flight slots until its result, and derive ``retry_after_ms``
from the calls' deadlines, all under the one lock a call takes on its hot path.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..core._errors import RateLimited
from ._models import Policy, Quota

__all__ = ["QuotaTicket", "QuotaUsage"]

#: Seconds an event counts for, on top of the second it happened in.
WINDOW_S = 60
#: How often (in clock seconds) counters that hold nothing any more are dropped.
SWEEP_S = 60.0


class _Window:
    """Amounts in one-second buckets; a bucket ``b`` counts while ``now < b + WINDOW_S + 1``."""

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}

    def expire(self, now: float) -> None:
        for second in [b for b in self.buckets if b + WINDOW_S + 1 <= now]:
            del self.buckets[second]

    def add(self, now: float, amount: int) -> None:
        second = math.floor(now)
        self.buckets[second] = self.buckets.get(second, 0) + amount

    def wait_s(self, now: float, limit: int) -> float:
        """Seconds until the total is below ``limit`` again (0 when it already is)."""
        excess = sum(self.buckets.values()) - limit + 1
        for second in sorted(self.buckets):
            if excess <= 0:
                break
            excess -= self.buckets[second]
            if excess <= 0:
                return second + WINDOW_S + 1 - now
        return 0.0


@dataclass
class _Usage:
    """One principal's use of one quota entry."""

    running: int = 0  # admitted calls not yet released (their fuel is still to be charged here)
    deadlines: list[float] = field(default_factory=list)  # one per call in flight, when it counts
    calls: _Window = field(default_factory=_Window)
    fuel: _Window = field(default_factory=_Window)

    def idle(self, now: float) -> bool:
        self.calls.expire(now)
        self.fuel.expire(now)
        return not (self.running or self.calls.buckets or self.fuel.buckets)


@dataclass
class QuotaTicket:
    """What one admitted call holds: its in-flight slots and where its fuel is charged."""

    usages: list[_Usage]
    slots: list[tuple[_Usage, float]]
    fuel: list[_Usage]


class QuotaUsage:
    """The counters of one Runtime's policy gate (thread-safe).

    Attributes:
        clock: seconds on a monotonic clock (tests move it instead of sleeping).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._usage: dict[tuple[int, str, str], _Usage] = {}
        self._policy: Policy | None = None
        self._keys: list[str] = []
        self._swept = clock()

    def admit(
        self, policy: Policy, matches: Sequence[tuple[int, Quota]], principal: str, timeout_ms: int
    ) -> QuotaTicket | None:
        """Count one call of ``principal`` against every matching quota, or raise RateLimited.

        Either every matching quota admits the call and each counts it, or none does.
        """
        if not matches:
            return None
        with self._lock:
            now = self.clock()
            usages = [(index, quota, self._entry(policy, index, principal, now)) for index, quota in matches]
            _refuse_if_over(usages, now)
            ticket = QuotaTicket(usages=[], slots=[], fuel=[])
            for _, quota, usage in usages:
                usage.running += 1
                ticket.usages.append(usage)
                if quota.max_in_flight is not None:
                    deadline = now + timeout_ms / 1000
                    usage.deadlines.append(deadline)
                    ticket.slots.append((usage, deadline))
                if quota.calls_per_minute is not None:
                    usage.calls.add(now, 1)
                if quota.fuel_per_minute is not None:
                    ticket.fuel.append(usage)
            return ticket

    def release(self, ticket: QuotaTicket | None, fuel_used: int) -> None:
        """End a call: free its in-flight slots and charge the fuel it used."""
        if ticket is None:
            return
        with self._lock:
            now = self.clock()
            for usage in ticket.usages:
                usage.running -= 1
            for usage, deadline in ticket.slots:
                usage.deadlines.remove(deadline)
            if fuel_used > 0:
                for usage in ticket.fuel:
                    usage.fuel.add(now, fuel_used)
            ticket.usages, ticket.slots, ticket.fuel = [], [], []

    def _entry(self, policy: Policy, index: int, principal: str, now: float) -> _Usage:
        if policy is not self._policy:  # an entry keeps its counters across reloads while it is unchanged
            self._policy, self._keys = policy, [quota.model_dump_json() for quota in policy.quotas]
        if now - self._swept >= SWEEP_S:
            self._swept = now
            for key in [key for key, usage in self._usage.items() if usage.idle(now)]:
                del self._usage[key]
        usage = self._usage.setdefault((index, self._keys[index], principal), _Usage())
        usage.calls.expire(now)
        usage.fuel.expire(now)
        return usage


def _refuse_if_over(usages: Sequence[tuple[int, Quota, _Usage]], now: float) -> None:
    """Raise RateLimited naming the bound that frees up last, when any matching bound is reached."""
    over: list[tuple[float, str, int]] = []
    for index, quota, usage in usages:
        if quota.max_in_flight is not None and len(usage.deadlines) >= quota.max_in_flight:
            # the call that must end for a slot to free up, if each ends by its deadline
            wait = sorted(usage.deadlines)[len(usage.deadlines) - quota.max_in_flight] - now
            over.append((wait, f"quotas[{index}].max_in_flight", quota.max_in_flight))
        for name, window in (("calls_per_minute", usage.calls), ("fuel_per_minute", usage.fuel)):
            limit: int | None = getattr(quota, name)
            if limit is not None and sum(window.buckets.values()) >= limit:
                over.append((window.wait_s(now, limit), f"quotas[{index}].{name}", limit))
    if not over:
        return
    wait, name, limit = max(over)
    retry_after_ms = max(1, math.ceil(wait * 1000))
    raise RateLimited(
        f"quota {name} ({limit}) is used up for this principal; retry in {retry_after_ms} ms",
        details={"quota": name, "limit": limit, "retry_after_ms": retry_after_ms},
    )
