"""OpenTelemetry spans for calls, made only when a tracer provider is configured.

A call is one ``glovebox.call`` span (attributes ``glovebox.call_id``, ``.tool``,
``.version``, ``.digest``, ``.principal``, ``.outcome``, ``.fuel_used``,
``.duration_ms``, ``.policy.decision``; status ERROR with the error code on
failure) with children ``glovebox.policy``, ``glovebox.validate`` (input, then
output), ``glovebox.sandbox`` and one ``glovebox.http`` per request the tool makes.
No span holds the input, the output, an error message, a header, a query string,
a request path or a secret: an error is named by its code, a request by its
method, scheme, host, port, the granted path pattern (``http.route``), status and
sizes.

The cost when tracing is off is one dictionary lookup per call: :class:`Tracing`
looks for ``opentelemetry.trace`` in ``sys.modules`` (this module never imports
it) and, when it is there, asks for the global provider and keeps the tracer of
each provider it sees. The API's default (proxy) provider and
``NoOpTracerProvider`` mean off, so a provider configured after the Runtime was
made still takes effect. ``Runtime(tracer_provider=...)`` fixes the provider.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._calllog import log_call

if TYPE_CHECKING:
    from ..model._result import CallResult

__all__ = [
    "NO_STEP",
    "Tracing",
    "attach_headers",
    "call_span",
    "carrier",
    "current_span",
    "detach",
    "end_call",
    "end_http",
    "finish",
    "http_span",
    "inject",
    "mark",
    "note_decision",
    "past_call",
    "progress_event",
    "remote_call",
    "span_ids",
    "step",
]

#: The instrumentation scope's name: ``opentelemetry.trace.get_tracer("glovebox")``.
SCOPE = "glovebox"
logger = logging.getLogger("glovebox")


class Tracing:
    """Which tracer a call uses: the fixed provider's, the global provider's, or none."""

    __slots__ = ("_fixed", "_seen")

    def __init__(self, provider: Any = None) -> None:
        if provider is not None and not callable(getattr(provider, "get_tracer", None)):
            raise TypeError(f"tracer_provider must be a TracerProvider, not {type(provider).__name__}")
        self._fixed = provider is not None
        self._seen: tuple[Any, Any] = (provider, _tracer_of(provider) if provider is not None else None)

    def tracer(self) -> Any | None:
        """The tracer for a call starting now, or None when tracing is off."""
        if self._fixed:
            return self._seen[1]
        trace = sys.modules.get("opentelemetry.trace")
        if trace is None:
            return None
        provider = trace.get_tracer_provider()
        seen = self._seen
        if seen[0] is provider:
            return seen[1]
        noop = isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))
        tracer = None if noop else _tracer_of(provider)
        self._seen = (provider, tracer)  # one tuple: readers on other threads see both or neither
        return tracer


def _tracer_of(provider: Any) -> Any:
    from ..core._version import __version__

    return provider.get_tracer(SCOPE, __version__)


def _status(code: str) -> Any:
    from opentelemetry.trace import Status, StatusCode

    return Status(StatusCode.ERROR, code)


def call_span(tracer: Any) -> _Step:
    """The ``glovebox.call`` span, current for the block (its parent: the current span)."""
    return _Step(tracer, "glovebox.call")


class TracedCall:
    """What wraps one call: its ``glovebox.call`` span when a tracer is configured, and its log line.

    >>> with TracedCall(None) as traced:
    ...     traced.tracer is None and traced.span is None
    True
    """

    __slots__ = ("_step", "span", "tracer")

    def __init__(self, tracer: Any | None) -> None:
        self.tracer = tracer
        self.span: Any = None
        self._step: _Step | None = None

    def __enter__(self) -> TracedCall:
        if self.tracer is not None:
            self._step = call_span(self.tracer)
            self.span = self._step.__enter__()
        return self

    def finish(self, result: CallResult) -> CallResult:
        """Record the call's result (on its span and in its ``glovebox.calls`` line); return it."""
        if self.span is None:
            log_call(result.ok, result.code, result.meta)
        else:
            finish(self.span, result)
        return result

    def __exit__(self, *exc: Any) -> None:
        if self._step is not None:
            self._step.__exit__(*exc)


def finish(span: Any, result: Any) -> None:
    """End a traced call: its facts on its span, and its ``glovebox.calls`` line carrying the span's ids."""
    end_call(span, result.ok, result.code, result.meta)
    log_call(result.ok, result.code, result.meta, span)


def end_call(span: Any, ok: bool, code: str | None, meta: Mapping[str, Any]) -> None:
    """Put a finished call's facts on its ``glovebox.call`` span (never its input, output or message)."""
    attributes = {
        "glovebox.call_id": _attr(meta.get("call_id")),
        "glovebox.tool": _attr(meta.get("tool")),
        "glovebox.principal": _attr(meta.get("principal")),
        "glovebox.outcome": "ok" if ok else _attr(code),
        "glovebox.fuel_used": int(meta.get("fuel_used") or 0),
        "glovebox.duration_ms": float(meta.get("duration_ms") or 0.0),
    }
    for key in ("version", "digest"):
        if meta.get(key) is not None:
            attributes[f"glovebox.{key}"] = _attr(meta[key])
    span.set_attributes(attributes)
    if not ok:
        span.set_status(_status(_attr(code)))


def _attr(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


class _NoStep:
    """The step of an untraced call: enters to None, costs two method calls."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


NO_STEP = _NoStep()


class _Step:
    """A span, current for the block; an escaping ``CallError`` sets status ERROR with its code.

    A tracer, span processor or exporter that raises never fails the call: the
    error is logged, and the block runs under a non-recording span instead.
    """

    __slots__ = ("_manager", "_span")

    def __init__(self, tracer: Any, name: str, attributes: Mapping[str, Any] | None = None, kind: Any = None) -> None:
        options: dict[str, Any] = {"record_exception": False, "set_status_on_exception": False}
        if kind is not None:
            options["kind"] = kind
        self._manager: Any = tracer.start_as_current_span(name, attributes=attributes, **options)
        self._span: Any = None

    def __enter__(self) -> Any:
        try:
            self._span = self._manager.__enter__()
        except Exception:
            logger.exception("the tracer failed to start a span; this step is not traced")
            from opentelemetry.trace import INVALID_SPAN

            self._manager, self._span = None, INVALID_SPAN
        return self._span

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if self._manager is None:
            return
        if exc is not None:
            self._span.set_status(_status(str(getattr(exc, "code", "internal_error"))))
        try:
            self._manager.__exit__(kind, exc, tb)
        except Exception:
            logger.exception("the tracer failed to end a span")


def step(tracer: Any | None, name: str, which: str | None = None) -> _Step | _NoStep:
    """A child span named ``name`` under the current one, or :data:`NO_STEP` when ``tracer`` is None.

    ``which`` (``input`` or ``output``) is a ``glovebox.validate`` span's ``glovebox.validate.which``.
    """
    if tracer is None:
        return NO_STEP
    return _Step(tracer, name, None if which is None else {"glovebox.validate.which": which})


def mark(span: Any, code: str | None, attributes: Mapping[str, Any]) -> None:
    """Set ``attributes`` on ``span``, and status ERROR with ``code`` when given."""
    span.set_attributes(attributes)
    if code is not None:
        span.set_status(_status(code))


def note_decision(decision: str) -> None:
    """Put the policy's decision on the current span when it is the call's ``glovebox.call``
    (never on a caller's span, as when the call span could not be started)."""
    from opentelemetry import trace

    span = trace.get_current_span()
    if getattr(span, "name", None) == "glovebox.call":
        span.set_attribute("glovebox.policy.decision", decision)


def _propagator() -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


def attach_headers(headers: Mapping[str, str]) -> object | None:
    """Make the W3C ``traceparent`` (and ``tracestate``) in ``headers`` the current context.

    Returns:
        A token for :func:`detach`, or None when the headers carry no valid
        ``traceparent`` or opentelemetry is not importable (nothing changed).
    """
    if "traceparent" not in headers or sys.modules.get("opentelemetry.trace") is None:
        return None
    try:
        from opentelemetry import context, trace
    except ImportError:
        return None
    carrier = {name: headers[name] for name in ("traceparent", "tracestate") if name in headers}
    parent = _propagator().extract(carrier)
    if not trace.get_current_span(parent).get_span_context().is_valid:
        return None
    return context.attach(parent)


def detach(token: object | None) -> None:
    """Undo :func:`attach_headers` (None: nothing to undo)."""
    if token is not None:
        from opentelemetry import context

        context.detach(token)  # type: ignore[arg-type]


def inject() -> list[tuple[str, str]]:
    """The W3C ``traceparent`` and ``tracestate`` headers of the current span (no baggage)."""
    carrier: dict[str, str] = {}
    _propagator().inject(carrier)
    return list(carrier.items())


def carrier() -> dict[str, str] | None:
    """The current context's ``traceparent`` (and ``tracestate``) for another process, or None
    when opentelemetry was never imported or no valid span is current (one lookup when off)."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None or not trace.get_current_span().get_span_context().is_valid:
        return None
    return dict(inject()) or None


def span_ids(span: Any) -> tuple[int, int] | None:
    """``(trace_id, span_id)`` of a started span (a sampler may have dropped it), else None
    (the tracer failed to start it)."""
    context = span.get_span_context()
    return (context.trace_id, context.span_id) if context.is_valid else None


def past_call(tracer: Any, start_ns: int, result: Any) -> None:
    """Record a ``glovebox.call`` span that began at ``start_ns`` and ends now (its parent: the
    current span), for a call another process ran untraced; then its ``glovebox.calls`` line."""
    from opentelemetry.trace import INVALID_SPAN

    try:
        span = tracer.start_span("glovebox.call", start_time=start_ns, record_exception=False)
    except Exception:
        logger.exception("the tracer failed to start a span; this call is not traced")
        span = INVALID_SPAN
    finish(span, result)
    try:
        span.end()
    except Exception:
        logger.exception("the tracer failed to end a span")


def remote_call(ids: tuple[int, int], result: Any) -> None:
    """The ``glovebox.calls`` line of a call whose ``glovebox.call`` span (``ids``) another process recorded."""
    try:
        from opentelemetry.trace import NonRecordingSpan, SpanContext
    except ImportError:
        log_call(result.ok, result.code, result.meta)
        return
    log_call(result.ok, result.code, result.meta, NonRecordingSpan(SpanContext(*ids, is_remote=True)))


def http_span(tracer: Any) -> _Step:
    """The ``glovebox.http`` span (kind CLIENT) of one request a tool makes, current for the block."""
    from opentelemetry.trace import SpanKind

    return _Step(tracer, "glovebox.http", kind=SpanKind.CLIENT)


#: What a ``glovebox.http`` span takes from a request's egress entry (never its URL or path).
_HTTP_FACTS = {
    "method": "http.request.method",
    "host": "server.address",
    "status": "http.response.status_code",
    "bytes_out": "http.request.body.size",
    "bytes_in": "http.response.body.size",
    "error": "glovebox.http.error",
}


def end_http(span: Any, entry: Mapping[str, Any], target: Mapping[str, Any]) -> None:
    """Put one request's facts on its span: ``entry`` (the egress summary) and ``target``
    (``url.scheme``, ``server.port``, ``http.route`` of the last hop); status ERROR on a
    refusal (its kind) or a 5xx answer."""
    attributes = {name: entry[key] for key, name in _HTTP_FACTS.items() if entry.get(key) is not None}
    attributes.update(target)
    span.set_attributes(attributes)
    status = entry.get("status", 0)
    if "error" in entry or status >= 500:
        span.set_status(_status(str(entry.get("error") or f"HTTP {status}")))


def current_span() -> Any | None:
    """The current span when it records (a traced call's), else None; never imports opentelemetry."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    span = trace.get_current_span()
    return span if span.is_recording() else None


def progress_event(span: Any, progress: float, total: float | None) -> None:
    """A ``glovebox.progress`` event on a call's span: one progress notification of its MCP server
    (its numbers only; never the notification's message)."""
    attributes = {"glovebox.progress": float(progress)}
    if total is not None:
        attributes["glovebox.progress.total"] = float(total)
    span.add_event("glovebox.progress", attributes)
