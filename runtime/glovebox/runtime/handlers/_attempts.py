"""``Attempts``: run the call, again while the policy's retries say so, then its fallbacks.

The rules (deadlines, which codes, ``routed_from``) are ``glovebox.runtime._retry``'s.
"""

from __future__ import annotations

import time
from typing import Any

from ...model._result import CallResult
from ...sandbox._compute import waiting
from .._call import Call, Handler, Next
from .._envelope import RUN_CONTEXT
from .._retry import Attempts as Tries

__all__ = ["Attempts"]


class Attempts(Handler):
    """Each attempt is a call of its own below this handler (its own call id and audit row)."""

    __slots__ = ()

    def handle(self, call: Call) -> CallResult:
        next = self.next
        tries = Tries(call.started, run_deadline=None if RUN_CONTEXT.get() is None else run_deadline())
        call = call.attempted(tries)
        result = next(call)
        if tries.retries is not None:
            result = _retried(call, result, next)
        for route in tries.routes(result):
            tries = tries.routed(result)
            fallback = call._replace(tool=route, call_id=None, started=time.perf_counter(), attempts=tries)
            result = _retried(fallback, next(fallback), next)
            if not tries.moves_on(result):
                break
        return result


def _retried(call: Call, result: CallResult, next: Next) -> CallResult:
    """``result``, or the answer of the attempts the policy's retries add after it."""
    tries = call.attempts
    assert tries is not None
    while (wait_s := tries.next_wait(result)) is not None:
        with waiting():  # a backoff holds no compute slot
            time.sleep(wait_s)
        result = next(call._replace(call_id=None, started=time.perf_counter()))
    return result


def run_deadline() -> float | None:
    """The deadline (``time.perf_counter``) of the code-mode run making this call, from its context's
    ``deadline_at`` (epoch seconds: it crosses a process or a host), or None outside a run."""
    run: dict[str, Any] | None = RUN_CONTEXT.get()
    if run is None:
        return None
    at = run.get("deadline_at")
    if not isinstance(at, int | float) or isinstance(at, bool):
        return None
    return time.perf_counter() + (float(at) - time.time())
