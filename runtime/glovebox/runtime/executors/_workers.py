"""``Workers``: where a Runtime's calls run when they do not run on its own threads.

A :class:`~glovebox.ProcessPool` sends each call to one of its worker processes,
a ``glovebox.ray.RayRuntime`` to one of its replica actors; each of those runs
the whole chain there (its own Runtime on the same home) and answers the
envelope. Both are a Runtime in this process — the registry, the policy,
approvals, breakers, code mode and the audit log are its own — whose calls go
to its ``Workers`` instead of down its chain (``Runtime._run_on``). A call whose
worker is lost answers and is audited in one place (:meth:`AuditRecorder.lost`).
"""

from __future__ import annotations

from ...model._result import CallResult
from .._call import Call

__all__ = ["Workers"]


class Workers:
    """Runs calls elsewhere, each answered with its envelope."""

    def send(self, call: Call) -> CallResult:
        """Run ``call`` (its ``call_id`` chosen: the journal of a run may have written it first)."""
        raise NotImplementedError

    async def asend(self, call: Call) -> CallResult:
        """``send`` for a coroutine."""
        raise NotImplementedError

    @property
    def in_flight(self) -> int:
        """Calls sent and not answered yet."""
        raise NotImplementedError

    @property
    def queued(self) -> int:
        """Calls waiting here before they are sent."""
        raise NotImplementedError

    def close(self) -> None:
        """Let the calls in flight finish, then stop. Idempotent."""
        raise NotImplementedError
