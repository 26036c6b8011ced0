"""The one internal interface of a Runtime: what the rest of glovebox may use beyond its public API.

The scale-out backends (a ProcessPool worker, a Ray replica or driver) run a
call under a call id chosen before dispatch, refuse a call they could not
place, or record the result of a call they ran themselves; the importers read
and write the registry inside one import. They get a :class:`RuntimeInternals`
from :func:`internals` and use nothing else of the Runtime that is private:
a test walks every module outside this package and fails on any access to a
private attribute of a Runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..audit._row import call_row
from ..model._result import CallResult
from ._envelope import failure, new_meta
from ._gate import CallTrace, input_digest

if TYPE_CHECKING:
    from ..core._errors import CallError
    from ..registry._registration import Registrar
    from ..registry._registry import Registry
    from ._runtime import Runtime

__all__ = ["RuntimeInternals", "internals"]


class RuntimeInternals:
    """A narrow view of one Runtime's internals (see the module docstring)."""

    __slots__ = ("_runtime",)

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    @property
    def registry(self) -> Registry:
        """The Runtime's registry (its index and blobs)."""
        return self._runtime._registry

    @property
    def registrar(self) -> Registrar:
        """What registers artifacts on this Runtime's engine (made on first need)."""
        return self._runtime._registrar

    def check_open(self) -> None:
        """Raise ValueError when the Runtime is closed."""
        self._runtime._check_open()

    def call_as(
        self, call_id: str, name: str, input: Any, principal: str | None, spans: list[Any] | None = None
    ) -> CallResult:
        """``Runtime.call`` under a call id chosen by the caller; the call's span, when made, goes into ``spans``."""
        return self._runtime._call_as(call_id, name, input, principal, spans)

    def refuse(self, name: str, input: Any, principal: str | None, refusal: CallError, call_id: str) -> CallResult:
        """The answer (and the audit row) of a call that was refused before it ran."""
        result = failure(refusal, new_meta(name, principal, call_id))
        return self._runtime._record(result, input, CallTrace())

    def record(self, result: CallResult, input: Any) -> CallResult:
        """Write the audit row of a call run elsewhere; a call that cannot be audited fails closed."""
        return self._runtime._record(result, input, CallTrace(input_digest=input_digest(input)))

    def append_row(self, result: CallResult, input: Any) -> None:
        """Write a row for a call whose runner was lost (raises when the log refuses it)."""
        self._runtime.audit.append(call_row(result, None, input_digest=input_digest(input)))


def internals(runtime: Runtime) -> RuntimeInternals:
    """The internal interface of ``runtime``."""
    return RuntimeInternals(runtime)
