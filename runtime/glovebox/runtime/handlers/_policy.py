"""``Policy``: scopes, rules and quotas decide; the decision's limits are cut to the call's time left."""

from __future__ import annotations

from ...model._grants import Grants
from ...model._result import CallResult
from ...telemetry import _tracing
from ...telemetry._tracing import step
from .._call import Call, Handler
from .._gate import PolicyGate

__all__ = ["Policy"]


class Policy(Handler):
    """Admits the call under the policy (or raises its refusal); frees its quota slots when it ends."""

    __slots__ = ("_default", "_gate")

    def __init__(self, gate: PolicyGate, default_grants: Grants | None) -> None:
        super().__init__()
        self._gate = gate
        #: With no policy configured, what every call is granted (None: the policy's grants govern).
        self._default = default_grants

    def handle(self, call: Call) -> CallResult:
        next = self.next
        state, tries = call.state, call.attempts
        assert state is not None and state.info is not None and tries is not None
        trace, meta = state.trace, state.meta
        try:
            with step(call.tracer, "glovebox.policy") as span:
                try:
                    decision = self._gate.admit(trace, state.info, meta["principal"])
                finally:
                    tries.note(trace.guards)  # known even when a quota refused the call
                if span is not None:
                    span.set_attribute("glovebox.policy.decision", decision.action)
            state.decision = tries.begin(decision, meta)
            state.grants = decision.grants if self._default is None else self._default
            return next(call)
        finally:
            self._gate.settle(trace, meta["fuel_used"])
            if call.tracer is not None and trace.decision is not None:
                _tracing.note_decision(trace.decision)
