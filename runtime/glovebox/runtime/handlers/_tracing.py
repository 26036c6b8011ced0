"""``Tracing``: the call's ``glovebox.call`` span (when a tracer is configured) and its log line."""

from __future__ import annotations

from ...model._result import CallResult
from ...telemetry._calllog import log_call
from ...telemetry._tracing import TracedCall
from ...telemetry._tracing import Tracing as TracerSource
from .._call import Call, Handler

__all__ = ["Tracing"]


class Tracing(Handler):
    """Wraps the whole call in its span; the span goes to ``call.spans`` when the caller asked for it."""

    __slots__ = ("_source",)

    def __init__(self, source: TracerSource) -> None:
        super().__init__()
        self._source = source

    def handle(self, call: Call) -> CallResult:
        next = self.next
        tracer = self._source.tracer()
        if tracer is None:  # tracing is off: the call's log line alone (what ``TracedCall(None)`` does)
            result = next(call)
            log_call(result.ok, result.code, result.meta)
            return result
        with TracedCall(tracer) as traced:
            if traced.tracer is not None:
                call = call._replace(tracer=traced.tracer)
            result = traced.finish(next(call))
        if call.spans is not None and traced.span is not None:
            call.spans.append(traced.span)
        return result
