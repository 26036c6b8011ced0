"""``Resolve``: the tool version a call's name means; a miss names only what the caller may see."""

from __future__ import annotations

from collections.abc import Callable

from ...core._errors import ToolNotFound
from ...model._result import CallResult, ToolInfo
from ...registry._registry import Registry
from .._call import Call, Handler
from .._gate import PolicyGate, input_digest

__all__ = ["Resolve", "not_found_message"]


class Resolve(Handler):
    """Resolves the name, puts the tool's facts in ``meta`` and the input's digest and policy in the trace."""

    __slots__ = ("_gate", "_registry", "_visible")

    def __init__(self, registry: Registry, gate: PolicyGate, visible: Callable[[str], list[ToolInfo]]) -> None:
        super().__init__()
        self._registry = registry
        self._gate = gate
        self._visible = visible

    def handle(self, call: Call) -> CallResult:
        next = self.next
        state = call.state
        assert state is not None and call.attempts is not None
        trace, meta = state.trace, state.meta
        trace.input_digest = input_digest(call.input)
        trace.policy = self._gate.current()
        try:
            info = state.info = self._registry.resolve(call.tool)
        except ToolNotFound as missing:
            visible = [info.name for info in self._visible(meta["principal"])]
            message = not_found_message(call.tool, meta["principal"], visible)
            raise ToolNotFound(message, details=missing.details) from missing
        meta["tool"], meta["version"], meta["digest"] = info.name, info.version, info.digest
        if info.deprecated is not None:
            meta["deprecated"] = info.deprecated
        call.attempts.check_run()
        return next(call)


def not_found_message(name: str, principal: str, visible: list[str]) -> str:
    """What a call of an unknown tool answers: never a tool the caller may not see."""
    if not visible:
        return f"no tool named {name!r} is registered; none is available to {principal!r}"
    shown = ", ".join(visible[:20]) + (", …" if len(visible) > 20 else "")
    return f"no tool named {name!r} is registered; available to {principal!r}: {shown}"
