"""``glovebox.rollback_run``: a run rolled back through its tools' compensations (:mod:`glovebox.runs._rollback`).

A principal other than the run's owner needs what an operator's resume needs
(``glovebox:audit`` and the policy's approver scope); the compensations are
full calls of the run's own principal, each with its audit row naming who
asked (``egress.run.by``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core._errors import PermissionDenied
from ..runs._rollback import RollbackResult, Rollbacks
from ._coderun import AUDIT_SCOPE

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["rollback_run"]


def rollback_run(rt: Runtime, run_id: str, *, by: str | None = None) -> RollbackResult:
    """Call the compensations of run ``run_id``'s completed writes in reverse order (see Code mode: Roll back a run).

    Args:
        rt: the Runtime whose home holds the run.
        run_id: a finished run (``done``, ``failed`` or ``cancelled``).
        by: who asks (default: the run's own principal).

    Raises:
        ValueError: there is no such run, or it has not finished.
        PermissionDenied: ``by`` is another principal than the run's and lacks ``glovebox:audit``
            or the policy's approver scope.
        ProgramChanged, JournalTampered: the stored run is not what it wrote.
    """
    record = rt.runs.record(run_id)
    if record is None:
        raise ValueError(f"no run {run_id!r} in this home")
    if by is not None and by != record.principal:
        needed = (AUDIT_SCOPE, rt.policy.approvals.approver_scope)
        if not set(needed) <= set(rt.policy.scopes_of(by)):
            raise PermissionDenied(
                f"principal {by!r} may not roll back run {run_id!r} of {record.principal!r}:"
                f" that takes the scopes {needed[0]!r} and {needed[1]!r}",
                details={"run_id": run_id, "principal": by, "scopes": list(needed)},
            )
    return Rollbacks(rt.runs.store, rt.runs.env).rollback(run_id, by=by)
