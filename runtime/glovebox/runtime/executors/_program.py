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
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...core._canonical import sha256_digest
from ...core._errors import PermissionDenied, ToolNotFound, call_error
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

    def __init__(self, registry: Registry, runs: Callable[[], Runs]) -> None:
        self._registry = registry
        self._runs = runs

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
        principal = str(state.meta.get("principal") or call.principal or "anonymous")
        result = self._runs().start(program["source"], input=call.input, principal=principal, lang=program["lang"])
        state.meta["run_id"] = result.run_id
        if result.ok:
            return json.dumps(result.output)
        assert result.error is not None
        error = result.error
        raise call_error(error.code, error.message, {**error.details, "run_id": result.run_id}, error.retryable)
