"""``WasmExecutor``: a fresh sandbox in this process runs the tool, with the call's capabilities bound."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...guards import BreakerBoard, HostBreakers
from ...model._grants import Grants
from ...model._result import ToolInfo
from ...policy._guards import Breaker
from ...sandbox._sandbox import Sandbox
from ...telemetry import _tracing
from ...telemetry._tracing import step
from .._call import Call
from .._gate import CallTrace, PolicyGate
from .._wasmparts import WasmParts
from ._base import Executor

if TYPE_CHECKING:
    import httpx

    from ...capabilities._fetch import HttpCapability
    from ...capabilities._sql import SqlCapability
    from ...sandbox._callstate import CallState as HostState

__all__ = ["WasmExecutor", "record_state"]


class WasmExecutor(Executor):
    """Runs ``call`` on a fresh instance of the tool's compiled component, under the decision's limits."""

    def __init__(
        self,
        parts: Callable[[], WasmParts],
        gate: PolicyGate,
        board: Callable[[], BreakerBoard],
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._parts = parts  # the engine side, made on first need
        self._gate = gate
        self._board = board
        self._transport = transport

    @property
    def sandbox(self) -> Sandbox:
        return self._parts().sandbox

    def execute(self, call: Call) -> str:
        state = call.state
        assert state is not None and state.grants is not None
        info, decision = state.resolved()
        assert state.input_text is not None
        meta, trace = state.meta, state.trace
        parts = self._parts()
        component = parts.compiled.get(info.digest)
        breaker = decision.guards.breaker
        http = self._http_for(info, state.grants, call.tracer, breaker, trace.probing)
        sql = self._sql_for(info, state.grants, meta["principal"], trace)
        with step(call.tracer, "glovebox.sandbox") as span:
            try:
                outcome = parts.sandbox.run(component, state.input_text, decision.limits, http, sql)
            finally:
                if http is not None:
                    http.close()
                if sql is not None:
                    trace.sql_params = sql.params
            if span is not None:
                code = None if outcome.error is None else outcome.error.code
                _tracing.mark(span, code, {"glovebox.fuel_used": outcome.fuel_used})
        meta["fuel_used"] = outcome.fuel_used
        record_state(meta, outcome.state)
        if outcome.error is not None:
            raise outcome.error
        assert outcome.output_text is not None
        return outcome.output_text

    def _http_for(
        self,
        info: ToolInfo,
        grants: Grants,
        tracer: Any = None,
        breaker: Breaker | None = None,
        probing: set[str] | None = None,
    ) -> HttpCapability | None:
        declared = info.manifest.capabilities.http
        if not declared or not grants.http:
            return None  # the host function answers `denied` without touching the network
        from ...capabilities._fetch import HttpCapability  # httpx only when a call may use it
        from ...capabilities._secrets import load_secrets

        hosts = None
        if breaker is not None and "host" in breaker.scopes:
            hosts = HostBreakers(self._board(), breaker, probing)
        secrets = load_secrets(grants.secrets)
        return HttpCapability(declared, grants, secrets, self._transport, tracer=tracer, hosts=hosts)

    def _sql_for(self, info: ToolInfo, grants: Grants, principal: str, trace: CallTrace) -> SqlCapability | None:
        declared = info.manifest.capabilities.sql
        if not declared or not grants.sql:
            return None  # the host function answers `denied` without opening a database
        from ...capabilities._sql import SqlCapability  # sqlglot only when a call may use it

        approver = self._gate.statement_approver(trace, info, principal)
        return SqlCapability(declared, grants.sql, approver)


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
