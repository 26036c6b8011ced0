"""What the runs of a home need from the system they run in: :class:`RunEnvironment`.

The runs package never imports the runtime: it is handed one object with the
few things a run needs (``glovebox.runtime._runenv`` makes it from a Runtime;
a test may hand another). A run's program runs in the environment's sandbox;
each of its nested calls is the environment's :meth:`~RunEnvironment.call`
of the run's principal under a call id the journal wrote first, with the run
context (``run_id``, ``step``, ``parent_call_id``, ``deadline_at``) on the
call, so the call's audit row names its run and attempt and the run's deadline
cuts it short; a scale-out backend's environment makes that call on a worker
or replica. A call of a tool the principal cannot see is refused here, as if
there were no such tool (:meth:`~RunEnvironment.refuse`, with the message of
:meth:`~RunEnvironment.not_found`), and still leaves its audit row. Each
attempt's facts go to :meth:`~RunEnvironment.audit_attempt`, which writes
the attempt's row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from ..core._errors import CallError
from ..model._result import CallResult, ToolInfo
from ..policy._models import Policy
from ..sandbox._sandbox import Sandbox
from ._attempt import RunAttempt

__all__ = ["RunEnvironment"]


class RunEnvironment(Protocol):
    """What a home's runs are given (see the module docstring)."""

    @property
    def home(self) -> Path:
        """The home whose ``runs.sqlite`` holds the runs."""
        ...

    @property
    def policy(self) -> Policy:
        """The policy now in force: its ``runs`` settings, approver scope and principals' scopes."""
        ...

    @property
    def sandbox(self) -> Sandbox:
        """Where each attempt runs the code runner (its engine compiles the runner)."""
        ...

    def visible_tools(self, principal: str | None) -> list[ToolInfo]:
        """The tools ``principal`` may see (a program's ``tools``, its ``.d.ts``, its search)."""
        ...

    def call(self, tool: str, input: Any, principal: str, call_id: str, run: dict[str, Any]) -> CallResult:
        """One nested call: a full call of ``principal`` under ``call_id``, carrying the run context ``run``."""
        ...

    def refuse(
        self, tool: str, input: Any, principal: str, call_id: str, run: dict[str, Any], error: CallError
    ) -> CallResult:
        """The answer, and the audit row, of a nested call refused with ``error`` before it ran."""
        ...

    def not_found(self, tool: str, principal: str, visible: list[str]) -> str:
        """What a call of an unknown tool answers (``visible``: what ``principal`` may see), as ``call`` says it."""
        ...

    def audit_attempt(self, attempt: RunAttempt) -> None:
        """Write one attempt's audit row (or a refused start's or resume's, or a cancel's); never raises."""
        ...
