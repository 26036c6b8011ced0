"""One log record per call on the ``glovebox.calls`` logger, and the JSON line format.

Each finished call (``Runtime.call``/``acall``, and ``ProcessPool`` calls in the
process that made the pool) logs one INFO record on ``glovebox.calls`` whose
``glovebox`` attribute holds ``call_id``, ``principal``, ``tool``, ``version``,
``outcome`` (the error code, or ``ok``), ``duration_ms``, ``fuel_used`` and, when
the call was traced, ``trace_id`` and ``span_id`` (its ``glovebox.call`` span):
the keys that join it to its envelope, its audit row, its span and the metrics.
Never the input, the output, an error message or a secret. Nothing is built
unless a handler would take the record (the logger is not enabled for INFO by
default).

:class:`JsonFormatter` writes any record as one JSON object per line: ``time``,
``level``, ``logger``, ``message``, the call's fields when the record is a call's,
and ``exception`` when the record carries one.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["CALLS", "JsonFormatter", "log_call"]

CALLS = logging.getLogger("glovebox.calls")


def log_call(ok: bool, code: str | None, meta: Mapping[str, Any], span: Any = None) -> None:
    """Log one finished call (nothing is built unless the logger is enabled for INFO)."""
    if not CALLS.isEnabledFor(logging.INFO):
        return
    fields: dict[str, Any] = {
        "call_id": meta.get("call_id"),
        "principal": meta.get("principal"),
        "tool": meta.get("tool"),
        "version": meta.get("version"),
        "outcome": "ok" if ok else code,
        "duration_ms": meta.get("duration_ms"),
        "fuel_used": meta.get("fuel_used"),
    }
    context = span.get_span_context() if span is not None else None
    if context is not None and context.is_valid:
        fields["trace_id"] = f"{context.trace_id:032x}"
        fields["span_id"] = f"{context.span_id:016x}"
    CALLS.info(
        "call %s %s@%s by %s: %s in %s ms",
        fields["call_id"],
        fields["tool"],
        fields["version"],
        fields["principal"],
        fields["outcome"],
        fields["duration_ms"],
        extra={"glovebox": fields},
    )


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, a call's fields, the exception."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "glovebox", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def _timestamp(created: float) -> str:
    """UTC, ISO 8601, milliseconds: ``2026-01-02T03:04:05.678Z``."""
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{whole}.{int(created % 1 * 1000):03d}Z"
