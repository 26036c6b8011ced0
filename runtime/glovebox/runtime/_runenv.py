"""A Runtime as the runs of its home see it: :class:`RuntimeRunEnvironment`.

``glovebox.runs`` never imports the runtime: its runner is handed one
:class:`~glovebox.runs._env.RunEnvironment`, and this is the Runtime's. It is
the one place code mode touches the Runtime, and it uses its public face
(``home``, ``policy``, ``visible_tools``, ``audit``, ``send``) plus the sandbox
the code runner runs in (``Runtime._sandbox``):

- a nested call is a :class:`~glovebox.runtime._call.Call` under the call id the
  journal chose, sent while ``RUN_CONTEXT`` holds the run's context
  (``Runtime.send``: down the Runtime's chain, or to its workers — a
  ProcessPool's processes, a RayRuntime's replicas — which carry the call id
  and the context to wherever the call runs);
- a nested call refused before it ran is answered and audited by the
  Runtime's audit log (``AuditRecorder.refuse``).

Each attempt's facts become its audit row here (:func:`glovebox.audit._row.run_row`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..audit._row import run_row
from ..core._canonical import sha256_digest
from ..core._errors import CallError
from ..model._result import CallResult, ToolInfo
from ..policy._models import Policy
from ..runs._attempt import RunAttempt
from ..sandbox._sandbox import Sandbox
from ._call import Call
from ._envelope import RUN_CONTEXT
from ._gate import input_digest
from ._record import AuditRecorder

if TYPE_CHECKING:
    from ..audit._log import AuditLog


class Runtime(Protocol):
    """What this module uses of a Runtime (a protocol: the Runtime imports this module)."""

    @property
    def home(self) -> Path: ...

    @property
    def policy(self) -> Policy: ...

    @property
    def audit(self) -> AuditLog: ...

    @property
    def _sandbox(self) -> Sandbox: ...

    def visible_tools(self, principal: str | None = None) -> list[ToolInfo]: ...

    def send(self, call: Call) -> CallResult: ...


__all__ = ["NotFound", "RuntimeRunEnvironment"]

logger = logging.getLogger("glovebox.runs")

#: The message of a call of an unknown tool: (tool, principal, the names it may see) -> message.
NotFound = Callable[[str, str, list[str]], str]


class RuntimeRunEnvironment:
    """The :class:`~glovebox.runs._env.RunEnvironment` of ``runtime``'s runs (see the module docstring).

    ``not_found`` is the Runtime's message of an unknown tool.
    """

    def __init__(self, runtime: Runtime, not_found: NotFound) -> None:
        self._runtime = runtime
        self._not_found = not_found

    @property
    def home(self) -> Path:
        return self._runtime.home

    @property
    def policy(self) -> Policy:
        return self._runtime.policy

    @property
    def sandbox(self) -> Sandbox:
        return self._runtime._sandbox

    def visible_tools(self, principal: str | None) -> list[ToolInfo]:
        return self._runtime.visible_tools(principal)

    def not_found(self, tool: str, principal: str, visible: list[str]) -> str:
        return self._not_found(tool, principal, visible)

    def call(self, tool: str, input: Any, principal: str, call_id: str, run: dict[str, Any]) -> CallResult:
        token = RUN_CONTEXT.set(run)
        try:
            return self._runtime.send(Call(tool, input, principal, call_id))
        finally:
            RUN_CONTEXT.reset(token)

    def refuse(
        self, tool: str, input: Any, principal: str, call_id: str, run: dict[str, Any], error: CallError
    ) -> CallResult:
        token = RUN_CONTEXT.set(run)
        try:
            return AuditRecorder(self._runtime.audit).refuse(Call(tool, input, principal, call_id), error)
        finally:
            RUN_CONTEXT.reset(token)

    def audit_attempt(self, attempt: RunAttempt) -> None:
        """Write one attempt's audit row; a row that cannot be written is logged (the run's own
        nested calls were each audited, and its journal holds what it did)."""
        try:
            self._runtime.audit.append(_attempt_row(attempt, self._runtime.policy))
        except Exception:
            logger.exception("cannot write the audit row of run %s (attempt %s)", attempt.run_id, attempt.call_id)


def _attempt_row(attempt: RunAttempt, policy: Policy) -> dict[str, Any]:
    """The audit row of one attempt of a run (tool ``glovebox:run``), stored as ``policy.audit`` says."""
    run: dict[str, Any] = {"run_id": attempt.run_id, "attempt": attempt.attempt, "by": attempt.by}
    run |= {"status": attempt.status, "steps": attempt.steps, "replayed": attempt.replayed}
    run["calls"] = attempt.calls
    if attempt.previous_call_id is not None:
        run["previous_call_id"] = attempt.previous_call_id
    if attempt.holder is not None:
        run["holder"] = attempt.holder
    if attempt.action is not None:  # a cancel's row, or an abandoned attempt's written by its successor
        run["action"] = attempt.action
    if attempt.taken_over_by is not None:
        run["taken_over_by"] = attempt.taken_over_by
    stored = policy.audit
    return run_row(
        call_id=attempt.call_id, principal=attempt.principal, outcome=attempt.outcome, run=run,
        program_digest=sha256_digest(attempt.source.encode("utf-8", "surrogatepass")),
        input_digest=input_digest(attempt.input), value=attempt.input, output=attempt.output,
        duration_ms=attempt.duration_ms, fuel_used=attempt.fuel_used, attempt=attempt.attempt,
        first_call_id=attempt.first_call_id, store_inputs=stored.store_inputs, store_outputs=stored.store_outputs,
    )  # fmt: skip
