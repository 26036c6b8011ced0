"""The worker process of a ProcessPool: one Runtime, calls in, envelopes out.

The parent sends, over the worker's pipe, ``(call_id, name, input, principal,
trace)`` tuples and finally ``None``; ``trace`` is the caller's W3C
``traceparent``/``tracestate`` (or None), made the parent of the call's
``glovebox.call`` span when this process has a tracer provider (and ignored when
it has not imported opentelemetry). The worker runs the pool's ``initializer``
first, answers ``("ready", pid)`` once its Runtime is open, then ``("result",
call_id, envelope, span)`` for each call, with ``meta.worker_pid`` set and
``span`` the ``(trace_id, span_id)`` of the ``glovebox.call`` span it recorded
(None when it recorded none), or ``("failed", call_id)`` when the call raised
instead of answering (the parent then answers ``internal_error`` and audits it).
Calls run on ``threads`` threads, so one call waiting on an upstream does not
hold up the others. The worker ignores SIGINT (its parent decides when it
stops) and ends when told to, or when its parent's end of the pipe closes.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any

from ..runtime._internal import internals
from ..runtime._runtime import Runtime
from ..telemetry import _tracing

__all__ = ["serve"]

logger = logging.getLogger("glovebox")


def serve(
    conn: Connection,
    options: dict[str, Any],
    threads: int,
    initializer: Callable[..., object] | None = None,
    initargs: tuple[Any, ...] = (),
) -> None:
    """Run ``initializer(*initargs)``, then calls read from ``conn`` on a Runtime made from
    ``options`` until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer(*initargs)  # one that raises ends the worker before it is ready
    send_lock = threading.Lock()
    with Runtime(**options) as runtime, ThreadPoolExecutor(threads, thread_name_prefix="glovebox-worker") as pool:
        conn.send(("ready", os.getpid()))
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                return  # the parent is gone: nobody will read an answer
            if message is None:
                return
            pool.submit(_answer, runtime, conn, send_lock, message)


def _answer(runtime: Runtime, conn: Connection, send_lock: threading.Lock, message: tuple[Any, ...]) -> None:
    call_id, name, value, principal, trace = message
    spans: list[Any] = []
    token = _tracing.attach_headers(trace) if trace else None
    try:
        result = internals(runtime).call_as(call_id, name, value, principal, spans)
        result.meta["worker_pid"] = os.getpid()
        recorded = _tracing.span_ids(spans[0]) if spans else None
        answer: tuple[Any, ...] = ("result", call_id, result.to_dict(), recorded)
    except Exception:
        logger.exception("call %s raised in worker %d", call_id, os.getpid())
        answer = ("failed", call_id)
    finally:
        _tracing.detach(token)
    try:
        with send_lock:
            conn.send(answer)
    except Exception:
        logger.exception("cannot send the answer of call %s to the pool", call_id)
        try:
            with send_lock:
                conn.send(("failed", call_id))
        except OSError:
            pass  # the parent is gone
