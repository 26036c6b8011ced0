"""``Policy``: scopes, rules and quotas decide; the decision's limits are cut to the call's time left."""

from __future__ import annotations

from typing import Any

from ...model._grants import Grants
from ...model._result import CallResult
from ...policy import Decision
from ...telemetry import _tracing
from ...telemetry._tracing import step
from .._call import Call, CallState, Handler
from .._gate import PolicyGate
from .._retry import Attempts as Tries

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
            if call.tracer is None:
                try:
                    decision = self._gate.admit(trace, state.info, meta["principal"])
                finally:
                    tries.note(trace.guards)  # known even when a quota refused the call
            else:
                decision = self._traced(call.tracer, state, tries)
            state.decision = tries.begin(decision, meta)
            state.grants = decision.grants if self._default is None else self._default
            return next(call)
        finally:
            self._gate.settle(trace, meta["fuel_used"])
            if call.tracer is not None and trace.decision is not None:
                _tracing.note_decision(trace.decision)

    def _traced(self, tracer: Any, state: CallState, tries: Tries) -> Decision:
        """The decision, in its ``glovebox.policy`` span."""
        assert state.info is not None
        with step(tracer, "glovebox.policy") as span:
            try:
                decision = self._gate.admit(state.trace, state.info, state.meta["principal"])
            finally:
                tries.note(state.trace.guards)
            if span is not None:
                span.set_attribute("glovebox.policy.decision", decision.action)
        return decision
