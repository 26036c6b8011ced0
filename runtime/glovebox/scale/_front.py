"""What a scale-out backend answers from a Runtime of its own on the same home.

A :class:`~glovebox.ProcessPool` and a ``glovebox.ray.RayRuntime`` run calls
elsewhere, but listing, describing, policy decisions and approvals need no
sandbox: a Runtime in this process, on the home and policy the workers use,
answers them (it runs no tool call). :class:`FrontRuntime`
holds that Runtime and forwards the :class:`~glovebox.runtime._backend.CallBackend`
methods to it, so both backends implement the protocol in full without
forwarding each method by hand.

Code mode too: a program runs in this process, in the front Runtime's code
runner (the one sandbox it makes), journaled in the home's ``runs.sqlite``;
each of its nested calls goes through the backend's own call path (the
backend routes the front's runs there, :meth:`FrontRuntime._route_runs`), so
it runs on a worker or replica like any other call, under the call id the
journal wrote first and with the run's context in its ``meta.run`` and audit
row. The journal is the home's, so a run started here resumes on a plain
Runtime on the same home, and the other way round.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..runtime._internal import internals

if TYPE_CHECKING:
    import os
    from collections.abc import Callable

    from ..audit._log import AuditLog
    from ..guards import BreakerState
    from ..model._result import CallResult, ToolInfo
    from ..policy import Approval, Decision, Policy
    from ..runs._result import RunResult
    from ..runtime._coderun import Runs
    from ..runtime._runtime import Runtime

__all__ = ["FrontRuntime"]


class FrontRuntime:
    """The registry, policy and approval half of a backend, answered by ``self._front``."""

    _front: Runtime

    @property
    def runtime(self) -> Runtime:
        """The Runtime in this process that answers for the registry, the policy and approvals."""
        return self._front

    @property
    def home(self) -> Path:
        """The home every worker uses."""
        return self._front.home

    @property
    def policy_path(self) -> Path | None:
        """The policy file every worker reads (None for a ``Policy`` object or no policy)."""
        return self._front.policy_path

    @property
    def policy(self) -> Policy:
        """The policy in force (re-read first if its file changed)."""
        return self._front.policy

    @property
    def policy_configured(self) -> bool:
        """Whether a policy was given, rather than the no-policy default."""
        return self._front.policy_configured

    @property
    def policy_error(self) -> str | None:
        """Why the last policy reload failed in this process, or None."""
        return self._front.policy_error

    @property
    def live_instances(self) -> int:
        """Sandbox instances running in this process: calls run in the workers, so 0 here."""
        return self._front.live_instances

    @property
    def audit(self) -> AuditLog:
        """The audit log of the home (every worker appends to it)."""
        return self._front.audit

    def breakers(self) -> list[BreakerState]:
        """As :meth:`glovebox.Runtime.breakers` (the breakers live in the home, shared by every worker)."""
        return self._front.breakers()

    def tools(
        self, pattern: str | None = None, *, include_deprecated: bool = True, signed: bool | None = None
    ) -> list[ToolInfo]:
        """As :meth:`glovebox.Runtime.tools`."""
        return self._front.tools(pattern, include_deprecated=include_deprecated, signed=signed)

    def tool(self, ref: str) -> ToolInfo:
        """As :meth:`glovebox.Runtime.tool`."""
        return self._front.tool(ref)

    def visible_tools(self, principal: str | None = None) -> list[ToolInfo]:
        """As :meth:`glovebox.Runtime.visible_tools`."""
        return self._front.visible_tools(principal)

    def explain(self, name: str, *, principal: str | None = None) -> Decision:
        """As :meth:`glovebox.Runtime.explain` (the workers read the same policy)."""
        return self._front.explain(name, principal=principal)

    def approve(self, approval_id: str, *, principal: str) -> Approval:
        """As :meth:`glovebox.Runtime.approve` (the approvals live in the home)."""
        return self._front.approve(approval_id, principal=principal)

    def deny(self, approval_id: str, *, principal: str, reason: str) -> Approval:
        """As :meth:`glovebox.Runtime.deny` (the approvals live in the home)."""
        return self._front.deny(approval_id, principal=principal, reason=reason)

    def pending_approvals(self, *, offset: int = 0, limit: int | None = None) -> list[Approval]:
        """As :meth:`glovebox.Runtime.pending_approvals`."""
        return self._front.pending_approvals(offset=offset, limit=limit)

    def remove(self, ref: str, *, all_versions: bool = False) -> list[ToolInfo]:
        """As :meth:`glovebox.Runtime.remove` (workers stop seeing it at their next call)."""
        return self._front.remove(ref, all_versions=all_versions)

    def deprecate(self, ref: str, message: str = "") -> list[ToolInfo]:
        """As :meth:`glovebox.Runtime.deprecate`."""
        return self._front.deprecate(ref, message)

    def gc(self, *, progress: Callable[[str], None] | None = None) -> list[Path]:
        """As :meth:`glovebox.Runtime.gc`."""
        return self._front.gc(progress=progress)

    # -- code mode -----------------------------------------------------------

    def _route_runs(self, call: Callable[[str, str, Any, str], CallResult]) -> None:
        """Make the front's runs send each nested call through ``call`` (the backend's call path)."""
        internals(self._front).route_runs(call)

    @property
    def runs(self) -> Runs:
        """As :attr:`glovebox.Runtime.runs`: the home's runs (``runs.sqlite``); a resumed run's calls run here too."""
        return self._front.runs

    def run(self, code: str, *, input: Any = None, principal: str | None = None, lang: str = "ts") -> RunResult:
        """As :meth:`glovebox.Runtime.run`: the program runs in this process, each nested call on a worker."""
        return self._front.run(code, input=input, principal=principal, lang=lang)

    async def arun(self, code: str, *, input: Any = None, principal: str | None = None, lang: str = "ts") -> RunResult:
        """``run`` without blocking the event loop."""
        return await self._front.arun(code, input=input, principal=principal, lang=lang)

    def _register_front(
        self, wasm_path: str | os.PathLike[str], manifest: Any, signature: str | os.PathLike[str] | None
    ) -> ToolInfo:
        return self._front.register(wasm_path, manifest, signature=signature)
