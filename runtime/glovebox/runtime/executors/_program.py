"""``ProgramExecutor``: a saved program's call (``kind = "program"``), run as a code-mode run of the caller.

A saved program (``glovebox runs save``, :mod:`glovebox.runtime._runsave`) is a
tool whose artifact is a descriptor in the registry's blob store: the program's
language, source and digest. Calling it starts a new run of that program with
the call's input, **as the caller**: every nested call of the program is a full
call of the calling principal, under the policy in force, so a principal that
may not call a tool directly cannot reach it through a saved program. The run's
output is the call's output; a run that fails answers its error (a nested
``approval_required`` answers that code, with the paused run's id in
``details.run_id``: resume it after the approval). The call's
``meta.run_id`` names the run.

A saved program called from inside a run is refused (``permission_denied``): a
program cannot start another run, so runs never nest (and a program cannot call
itself without end).

**Reviewed once.** A program saved with ``review`` waits for a person before its
first use: its first call answers ``approval_required`` (``details.approval_id``,
a request of the saver for the tool, its input digest the program's digest), and
once an approver approves it (``glovebox approve``) the program is marked
reviewed (``HOME/programs/<hex>.reviewed``, naming who approved it and when) and
runs from then on; a denied review answers ``permission_denied``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...core._canonical import sha256_digest
from ...core._errors import ApprovalRequired, PermissionDenied, ToolNotFound, call_error
from ...model._result import ToolInfo
from ...policy._approvals import ApprovalStore
from ...policy._models import Policy
from ...registry._registry import Registry
from .._call import Call
from .._envelope import RUN_CONTEXT
from ._base import Executor

if TYPE_CHECKING:
    from .._coderun import Runs

__all__ = ["ProgramExecutor", "load_program"]


def load_program(registry: Registry, digest: str) -> dict[str, Any]:
    """The saved program ``digest`` names (its descriptor, checked against the digest)."""
    path = registry.descriptor_path(digest)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ToolNotFound(f"the saved program {digest} is missing from the registry") from exc
    if sha256_digest(data) != digest:
        raise ToolNotFound(f"the saved program {digest} changed on disk; it does not run")
    program: dict[str, Any] = json.loads(data)
    return program


class ProgramExecutor(Executor):
    """Runs a saved program as a run of the caller (see the module docstring)."""

    def __init__(self, registry: Registry, runs: Callable[[], Runs], policy: Callable[[], Policy]) -> None:
        self._registry = registry
        self._runs = runs
        self._policy = policy
        self._lock = threading.Lock()
        self._approvals: ApprovalStore | None = None

    def close(self) -> None:
        with self._lock:
            if self._approvals is not None:
                self._approvals.close()
                self._approvals = None

    def _review(self, info: ToolInfo, program: dict[str, Any]) -> None:
        """Nothing once the program was reviewed; else ask for (or take up) its review's approval."""
        folder = self._registry.home / "programs"
        hex_digest = info.digest.removeprefix("sha256:")
        reviewed, pending = folder / f"{hex_digest}.reviewed", folder / f"{hex_digest}.review"
        if reviewed.exists():
            return
        with self._lock:
            if self._approvals is None:
                self._approvals = ApprovalStore(self._registry.home)
            approvals = self._approvals
        tool = f"{info.name}@{info.version}"
        asked = approvals.get(pending.read_text().strip()) if pending.exists() else None
        if asked is not None and asked.status in ("approved", "used"):
            folder.mkdir(parents=True, exist_ok=True)
            reviewed.write_text(json.dumps({"approval_id": asked.id, "by": asked.approved_by, "at": asked.approved_at}))
            return
        if asked is not None and asked.status == "denied":
            raise PermissionDenied(
                f"the review of saved program {tool} was denied: {asked.reason}", details={"approval_id": asked.id}
            )
        if asked is None or asked.expires_at <= time.time():
            asked = approvals.request(str(program.get("saved_by")), tool, info.digest, self._policy().approvals.ttl_s)
            folder.mkdir(parents=True, exist_ok=True)
            pending.write_text(asked.id)
        raise ApprovalRequired(
            f"saved program {tool} waits for its review: approve {asked.id} (glovebox approve) before its first use",
            details={"approval_id": asked.id, "review": True},
        )

    def execute(self, call: Call) -> str:
        state = call.state
        assert state is not None
        info, _ = state.resolved()
        if RUN_CONTEXT.get() is not None:
            raise PermissionDenied(
                f"{info.name} is a saved program: it cannot be called from a run (runs do not nest)",
                details={"tool": info.name},
            )
        program = load_program(self._registry, info.digest)
        if program.get("review"):
            self._review(info, program)
        principal = str(state.meta.get("principal") or call.principal or "anonymous")
        result = self._runs().start(program["source"], input=call.input, principal=principal, lang=program["lang"])
        state.meta["run_id"] = result.run_id
        if result.ok:
            return json.dumps(result.output)
        assert result.error is not None
        error = result.error
        raise call_error(error.code, error.message, {**error.details, "run_id": result.run_id}, error.retryable)
