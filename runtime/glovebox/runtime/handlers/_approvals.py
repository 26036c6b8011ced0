"""``Approvals``: a ``require_approval`` call spends its approval here, after its input was validated
(invalid input never uses one up), or answers ``approval_required``."""

from __future__ import annotations

from ...model._result import CallResult
from .._call import Call, Handler
from .._gate import PolicyGate

__all__ = ["Approvals"]


class Approvals(Handler):
    """Spends the one approval of a call the policy holds for approval (see ``PolicyGate``)."""

    __slots__ = ("_gate",)

    def __init__(self, gate: PolicyGate) -> None:
        super().__init__()
        self._gate = gate

    def handle(self, call: Call) -> CallResult:
        next = self.next
        state = call.state
        assert state is not None and state.info is not None and state.decision is not None
        if state.decision.action == "require_approval":
            self._gate.spend_approval(state.trace, state.info, state.meta["principal"], state.decision)
        return next(call)
