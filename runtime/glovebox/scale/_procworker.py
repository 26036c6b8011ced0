"""The worker process of a ProcessPool: one Runtime, calls in, envelopes out.

The parent sends, over the worker's pipe, requests as JSON text (``_procwire``:
never a pickle, so no caller's value runs code here) and finally ``null``; a
request's ``trace`` is the caller's W3C
``traceparent``/``tracestate`` (or None), made the parent of the call's
``glovebox.call`` span when this process has a tracer provider (and ignored when
it has not imported opentelemetry). The worker runs the pool's ``initializer``
first, answers ``("ready", pid)`` once its Runtime is open, then ``("result",
call_id, envelope, span)`` for each call, with ``meta.worker_pid`` set and
``span`` the ``(trace_id, span_id)`` of the ``glovebox.call`` span it recorded
(None when it recorded none), or ``("failed", call_id)`` when the call raised
instead of answering (the parent then answers ``internal_error`` and audits it).
A message that is not a request is logged and skipped (answered ``failed``
when it names a call id): it never ends the worker.
A request carrying a run context (a nested call of a code-mode run) is made
with it, so its ``meta.run`` and audit row name the run as on a Runtime.
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

from ..runtime._envelope import RUN_CONTEXT
from ..runtime._internal import internals
from ..runtime._runtime import Runtime
from ..telemetry import _tracing
from ._procwire import BadRequest, Request, decode, is_unicode

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
                data = conn.recv_bytes()
            except (EOFError, OSError):
                return  # the parent is gone: nobody will read an answer
            try:
                request = decode(data)
            except BadRequest as exc:
                logger.error("worker %d skips a message that is not a request: %s", os.getpid(), exc)
                if exc.call_id is not None:
                    _send(conn, send_lock, ("failed", exc.call_id))
                continue
            if request is None:
                return
            pool.submit(_answer, runtime, conn, send_lock, request)


def _answer(runtime: Runtime, conn: Connection, send_lock: threading.Lock, request: Request) -> None:
    call_id, name, principal, trace = request.call_id, request.name, request.principal, request.trace
    spans: list[Any] = []
    token = _tracing.attach_headers(trace) if trace else None
    run = RUN_CONTEXT.set(request.run) if request.run is not None else None
    try:
        if request.refusal is not None and is_unicode(name, principal):  # as Runtime.call refuses it, first
            result = internals(runtime).refuse(name, None, principal, request.refusal, call_id)
        else:  # (a name or principal that is not valid Unicode is refused before the input)
            result = internals(runtime).call_as(call_id, name, request.input, principal, spans)
        result.meta["worker_pid"] = os.getpid()
        recorded = _tracing.span_ids(spans[0]) if spans else None
        answer: tuple[Any, ...] = ("result", call_id, result.to_dict(), recorded)
    except Exception:
        logger.exception("call %s raised in worker %d", call_id, os.getpid())
        answer = ("failed", call_id)
    finally:
        if run is not None:
            RUN_CONTEXT.reset(run)
        _tracing.detach(token)
    try:
        with send_lock:
            conn.send(answer)
    except Exception:
        logger.exception("cannot send the answer of call %s to the pool", call_id)
        _send(conn, send_lock, ("failed", call_id))


def _send(conn: Connection, send_lock: threading.Lock, answer: tuple[Any, ...]) -> None:
    try:
        with send_lock:
            conn.send(answer)
    except OSError:
        pass  # the parent is gone
