"""``RunResult``: how a run stands, what it returned or why it stopped, and its nested calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core._errors import CallError

__all__ = ["RUN_STATUSES", "RunResult"]

#: What ``RunResult.status`` can be (``running`` only for a resume refused with ``run_busy``).
RUN_STATUSES = ("done", "paused", "failed", "cancelled", "running")


@dataclass(frozen=True)
class RunResult:
    """The outcome of ``Runtime.run`` (or of ``resume`` / ``cancel``).

    Attributes:
        run_id: the run's id (``glovebox runs show ID``).
        status: ``done`` (``output`` holds the program's value), ``paused`` (a
            nested call waits for an approval: ``error`` is its
            ``approval_required``, ``details.approval_id`` names it), ``failed``
            (``error`` says why, with the envelope's codes) or ``cancelled``; a
            resume refused because another process is executing the run answers
            ``running`` with ``error`` ``run_busy`` (``details.holder``).
        output: the program's return value (JSON) when ``done``.
        error: why the run did not finish, when it did not.
        calls: one summary per nested call, in order: ``tool``, ``version``,
            ``code`` (None when it succeeded), ``call_id``, ``duration_ms`` and
            ``replayed`` (answered from the journal on a resume).
        meta: ``principal``, ``steps`` (host calls), ``replayed`` (steps
            answered from the journal), ``attempts``, ``duration_ms``, ``fuel_used``,
            ``call_id`` (the attempt's own audit row: its nested calls' rows name it
            as ``egress.run.parent_call_id``) and, after a resume, ``resumed_by``.
            A cancelled run's ``meta`` has ``cancelled_by`` (who cancelled it) and
            ``call_id`` the cancel's own audit row (an attempt the cancel stopped
            answers with its own).
    """

    run_id: str
    status: str
    output: Any = None
    error: CallError | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether the program finished and returned ``output``."""
        return self.status == "done"

    def to_dict(self) -> dict[str, Any]:
        """The run envelope: ``run_id``, ``status``, ``ok``, ``output`` or ``error``, ``calls``, ``meta``."""
        envelope: dict[str, Any] = {"run_id": self.run_id, "status": self.status, "ok": self.ok}
        if self.ok:
            envelope["output"] = self.output
        elif self.error is not None:
            envelope["error"] = self.error.to_dict()
        envelope["calls"] = [dict(call) for call in self.calls]
        envelope["meta"] = dict(self.meta)
        return envelope
