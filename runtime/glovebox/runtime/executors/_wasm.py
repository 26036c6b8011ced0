"""``WasmExecutor``: a fresh sandbox in this process runs the tool, with the call's capabilities bound."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...capabilities import BoundCapabilities, CapabilityContext, bind_capabilities
from ...guards import BreakerBoard, HostBreakers
from ...model._result import ToolInfo
from ...policy._guards import Breaker
from ...telemetry import _tracing
from ...telemetry._tracing import step
from .._call import Call
from .._gate import CallTrace, PolicyGate
from .._wasmparts import WasmParts
from ._base import Executor

if TYPE_CHECKING:
    import httpx

    from ...sandbox._callstate import CallState as HostState
    from ...sandbox._sandbox import Outcome

__all__ = ["WasmExecutor", "record_state"]


class WasmExecutor(Executor):
    """Runs ``call`` on a fresh instance of the tool's compiled component, under the decision's limits."""

    def __init__(
        self,
        home: Path,
        parts: Callable[[], WasmParts],
        gate: PolicyGate,
        board: Callable[[], BreakerBoard],
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._home = home
        self._parts = parts  # the engine side, made on first need
        self._gate = gate
        self._board = board
        self._transport = transport
        #: Whether a tool version's manifest declares any capability, by (digest, name).
        self._declares: dict[tuple[str, str], bool] = {}

    def execute(self, call: Call) -> str:
        state = call.state
        assert state is not None and state.grants is not None
        info, decision = state.resolved()
        assert state.input_text is not None
        meta, trace = state.meta, state.trace
        parts = self._parts()
        component = parts.compiled.get(info.digest)
        if self._declares_any(info):
            context = self._context(info, meta["principal"], call.tracer, decision.guards.breaker, trace)
            capabilities = bind_capabilities(info.manifest.capabilities, state.grants, context)
        else:  # declared ∩ granted is nothing whatever the grants: every host function answers `denied`
            capabilities = _NONE
        export = info.manifest.export
        if export is not None:  # a typed component's function: the input value, converted to its WIT types
            run = functools.partial(parts.sandbox.run_export, component, export.interface, export.function, call.input)
        else:
            core = parts.sandbox.native_core
            native = None if core is None else parts.compiled.native(info.digest, core)
            if call.tracer is None:  # most calls: no partial to build
                try:
                    outcome = parts.sandbox.run(
                        component, state.input_text, decision.limits, capabilities, native=native
                    )
                finally:
                    capabilities.close(trace)
                return self._finish(meta, capabilities, outcome)
            run = functools.partial(parts.sandbox.run, component, state.input_text, native=native)
        if call.tracer is None:
            try:
                outcome = run(decision.limits, capabilities)
            finally:
                capabilities.close(trace)
        else:
            with step(call.tracer, "glovebox.sandbox") as span:
                try:
                    outcome = run(decision.limits, capabilities)
                finally:
                    capabilities.close(trace)
                if span is not None:
                    code = None if outcome.error is None else outcome.error.code
                    _tracing.mark(span, code, {"glovebox.fuel_used": outcome.fuel_used})
        return self._finish(meta, capabilities, outcome)

    @staticmethod
    def _finish(meta: dict[str, Any], capabilities: BoundCapabilities, outcome: Outcome) -> str:
        """Put what the invocation recorded into ``meta``; its output text, or raise its error."""
        meta["fuel_used"] = outcome.fuel_used
        record_state(meta, outcome.state)
        capabilities.record(meta, outcome.state)
        if outcome.error is not None:
            raise outcome.error
        assert outcome.output_text is not None
        return outcome.output_text

    def _declares_any(self, info: ToolInfo) -> bool:
        key = (info.digest, info.name)
        declares = self._declares.get(key)
        if declares is None:
            declares = self._declares[key] = any(bool(value) for _, value in info.manifest.capabilities)
        return declares

    def _context(
        self, info: ToolInfo, principal: str, tracer: Any, breaker: Breaker | None, trace: CallTrace
    ) -> CapabilityContext:
        """What binding the call's capabilities may need (the factories run only for a granted capability)."""
        hosts = None
        if breaker is not None and "host" in breaker.scopes:
            hosts = functools.partial(_host_breakers, self._board, breaker, trace.probing)  # the board opens on use
        approver = functools.partial(self._gate.statement_approver, trace, info, principal)
        return CapabilityContext(self._home, principal, tracer, self._transport, hosts, approver)


def _host_breakers(board: Callable[[], BreakerBoard], breaker: Breaker, probing: set[str] | None) -> HostBreakers:
    return HostBreakers(board(), breaker, probing)


#: The capabilities of a call whose tool declares none (nothing to bind, close or record).
_NONE = BoundCapabilities({}, {})
_DROPPED_COUNTS = ("logs_dropped", "denials_dropped", "egress_dropped", "upstream_failures_dropped", "sql_log_dropped")


def record_state(meta: dict[str, Any], state: HostState) -> None:
    """Put what the host functions recorded (already bounded and scrubbed) into meta."""
    if state.egress:
        meta["egress"] = state.egress
    meta["logs"] = state.logs
    if state.denials:
        meta["denials"] = state.denials
    if state.sql_log:
        meta["sql"] = state.sql_log
    if (
        state.logs_dropped
        or state.denials_dropped
        or state.egress_dropped
        or state.upstream_failures_dropped
        or state.sql_log_dropped
    ):
        for name in _DROPPED_COUNTS:
            if getattr(state, name):
                meta[name] = getattr(state, name)
