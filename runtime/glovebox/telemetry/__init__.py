"""What a call tells the operator: one log record per call and OpenTelemetry spans.

- :mod:`._calllog` — the ``glovebox.calls`` logger and the JSON line format.
- :mod:`._tracing` — spans, made only when a tracer provider is configured.

Imports: :mod:`glovebox.core` and :mod:`glovebox.model`; opentelemetry only when configured.
"""
