"""The HTTP API: a Starlette app served by uvicorn.

Routes (JSON in and out; every failure carries the envelope shape)::

    GET  /v1/tools               the tools the caller may see
    GET  /v1/tools/{name}        one of them, in full
    POST /v1/tools/{name}/call   body {"input": ...}; answers the envelope
    GET  /healthz                liveness (no key needed)
    GET  /metrics                Prometheus text (no key needed)
    GET  /ui, /ui/...            the operator console (HTML; see ``servers._console``)

Status codes: 200 for a call that ran or failed inside the tool (the
envelope says which); 401 no or unknown key; 403 the policy refuses; 404 no
such tool (or one the caller may not see; the answer names no other tool) or
no such route; 405 a method the route does not serve; 413 body over the limit;
400 a body that is not JSON (or breaks the rules of ``glovebox.core._jsonlimits``)
or lacks ``input``; 503 ``overloaded`` (with ``Retry-After``); 500 a failure
of the server itself (opaque). Every non-200 answer is an envelope
(``servers._apierrors``), every answer carries the security headers of
``servers._guards`` (Content-Security-Policy, no framing, no caching) and is counted in ``/metrics``
(``servers._metrics``). Calls go through ``Runtime.acall`` (or a ``ProcessPool``'s or ``RayRuntime``'s ``acall``
when one is given), so the runtime's
admission bounds (``max_in_flight``, ``max_queued``) govern them as they govern
every other door; listing and describing run on a small pool of worker threads,
so the event loop never waits on a sandbox or the registry. A call request's W3C
``traceparent`` (and ``tracestate``) header makes its ``glovebox.call`` span a child
of the caller's span (see ``glovebox.telemetry._tracing``).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from ..runtime._backend import CallBackend
from ._apierrors import Renderer, answer_failures, exception_handlers
from ._apitools import ToolRoutes, tool_summary
from ._auth import check_can_serve
from ._guards import SecureHeaders
from ._metrics import Metrics, count_requests

__all__ = ["DEFAULT_MAX_BODY_BYTES", "create_app", "serve", "tool_summary"]

DEFAULT_MAX_BODY_BYTES = 1024 * 1024


def create_app(
    runtime: CallBackend,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    workers: int | None = None,
    insecure_anonymous: bool = False,
    console: bool = True,
) -> Starlette:
    """The HTTP API over ``runtime`` as an ASGI app.

    Args:
        runtime: the backend whose tools are served: a ``Runtime``, a ``ProcessPool`` or a
            ``RayRuntime`` (any ``CallBackend``; its policy authenticates keys).
        max_body_bytes: larger request bodies are refused with 413.
        workers: threads that list and describe tools (default: the CPU count,
            at least 4); calls run through ``runtime.acall`` and its admission bounds.
        insecure_anonymous: serve without a policy; requests without a key run as ``anonymous``.
        console: serve the operator console's pages under ``/ui`` (``servers._console``).

    Raises:
        ValueError: no policy is configured and ``insecure_anonymous`` is False.
    """
    check_can_serve(runtime, insecure_anonymous)
    if max_body_bytes < 1:
        raise ValueError("max_body_bytes must be positive")
    pool = ThreadPoolExecutor(max_workers=workers or max(4, os.cpu_count() or 1), thread_name_prefix="glovebox-http")
    metrics = Metrics(lambda: runtime.live_instances, runtime.breakers)
    routes: list[BaseRoute] = ToolRoutes(runtime, pool, metrics, max_body_bytes, insecure_anonymous).routes()
    closers: list[Callable[[], None]] = []
    pages: dict[str, Renderer] = {}
    if console:
        from ._console import Console

        ui = Console(runtime, pool, insecure_anonymous)
        routes += ui.routes()
        pages["/ui"] = ui.render_refusal
        closers.append(ui.close)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            pool.shutdown(wait=True)
            for close in closers:
                close()

    middleware = [
        Middleware(SecureHeaders),
        Middleware(count_requests, metrics=metrics),
        Middleware(answer_failures),
    ]
    handlers = exception_handlers(pages)
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=handlers, lifespan=lifespan)
    app.router.redirect_slashes = False  # a redirect would be a non-200 answer that is not an envelope
    app.state.metrics = metrics
    return app


def serve(
    runtime: CallBackend,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    log_config: dict[str, Any] | None = None,
    **options: Any,
) -> None:
    """Run the HTTP API with uvicorn until interrupted (``options`` go to :func:`create_app`;
    ``log_config``, when given, is uvicorn's logging configuration)."""
    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    logs = LOGGING_CONFIG if log_config is None else log_config
    uvicorn.run(create_app(runtime, **options), host=host, port=port, log_level="info", log_config=logs)
