"""``CallBackend``: what every call surface is, whatever runs the calls.

A :class:`~glovebox.Runtime` runs calls on its own threads; a
:class:`~glovebox.ProcessPool` in worker processes; a
``glovebox.ray.RayRuntime`` on Ray replicas. All three implement this
protocol in full, so the servers, the framework integrations and the CLI take
any of them and never ask which one they hold. Listing, describing, policy
decisions and approvals are answered from the backend's home (every worker
and replica shares it, or is fed from it); only ``call``/``acall`` run
elsewhere. Code mode (``run``/``arun``/``runs``) is on every backend: the
program runs in the backend's process, journaled in the home's
``runs.sqlite``, and each nested call takes the backend's call path, so a run
started on one backend resumes on any other on the same home.
:func:`glovebox.open_backend` makes one by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..audit._log import AuditLog
    from ..guards import BreakerState
    from ..model._result import CallResult, ToolInfo
    from ..policy import Approval, Decision, Policy
    from ..runs._result import RunResult
    from ._coderun import Runs

__all__ = ["CallBackend"]


@runtime_checkable
class CallBackend(Protocol):
    """Runs tool calls and answers for the tools of one home under one policy."""

    @property
    def home(self) -> Path:
        """The home whose registry, approvals and audit log the backend uses."""
        ...

    @property
    def policy(self) -> Policy:
        """The policy in force."""
        ...

    @property
    def policy_configured(self) -> bool:
        """Whether a policy was given (rather than the no-policy default)."""
        ...

    @property
    def policy_error(self) -> str | None:
        """Why the last policy reload failed, or None."""
        ...

    @property
    def live_instances(self) -> int:
        """Sandbox instances running in this process right now."""
        ...

    @property
    def in_flight(self) -> int:
        """Calls this backend has started and not answered yet (running, or waiting in a worker)."""
        ...

    @property
    def queued(self) -> int:
        """Calls waiting here for a slot (or a worker) before they start."""
        ...

    @property
    def audit(self) -> AuditLog:
        """The audit log of the home (every call's row, from every worker)."""
        ...

    def call(self, name: str, input: Any, *, principal: str | None = None) -> CallResult:
        """Run a tool; never raises for a failed call (see ``Runtime.call``)."""
        ...

    async def acall(self, name: str, input: Any, *, principal: str | None = None) -> CallResult:
        """``call`` for a coroutine."""
        ...

    def run(self, code: str, *, input: Any = None, principal: str | None = None, lang: str = "ts") -> RunResult:
        """Run a code-mode program (see ``Runtime.run``); never raises for a failed run."""
        ...

    async def arun(self, code: str, *, input: Any = None, principal: str | None = None, lang: str = "ts") -> RunResult:
        """``run`` for a coroutine."""
        ...

    @property
    def runs(self) -> Runs:
        """The home's runs: ``list``, ``show``, ``journal``, ``resume``, ``cancel`` (see ``Runtime.runs``)."""
        ...

    def tools(
        self, pattern: str | None = None, *, include_deprecated: bool = True, signed: bool | None = None
    ) -> list[ToolInfo]:
        """Registered tool versions, sorted by name, newest first."""
        ...

    def tool(self, ref: str) -> ToolInfo:
        """One tool (``name`` or ``name@version``); raises ToolNotFound."""
        ...

    def visible_tools(self, principal: str | None = None) -> list[ToolInfo]:
        """The tools ``principal`` may see."""
        ...

    def explain(self, name: str, *, principal: str | None = None) -> Decision:
        """What the policy decides for ``principal`` calling ``name``, and why."""
        ...

    def approve(self, approval_id: str, *, principal: str) -> Approval:
        """Approve a pending ``approval_required`` call on behalf of ``principal``."""
        ...

    def deny(self, approval_id: str, *, principal: str, reason: str) -> Approval:
        """Deny a pending ``approval_required`` call on behalf of ``principal``, with ``reason``."""
        ...

    def pending_approvals(self, *, offset: int = 0, limit: int | None = None) -> list[Approval]:
        """Approval requests waiting for an approver, oldest first (``limit`` of them from ``offset``)."""
        ...

    def breakers(self) -> list[BreakerState]:
        """The home's circuit breakers that are open, half-open, or closed with failures counted."""
        ...

    def close(self) -> None:
        """Release what the backend holds. Idempotent."""
        ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> None: ...
