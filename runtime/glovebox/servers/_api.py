"""The HTTP API: a Starlette app served by uvicorn.

Routes (JSON in and out; every failure carries the envelope shape)::

    GET  /v1/tools               the tools the caller may see
    GET  /v1/tools/{name}        one of them, in full
    POST /v1/tools/{name}/call   body {"input": ...}; answers the envelope
    GET  /healthz                liveness (no key needed)
    GET  /metrics                Prometheus text (no key needed)
    GET  /ui/...                 the operator console (HTML; see ``servers._console``)

Status codes: 200 for a call that ran or failed inside the tool (the
envelope says which); 401 no or unknown key; 403 the policy refuses; 404 no
such tool (or one the caller may not see; the answer names no other tool) or
no such route; 405 a method the route does not serve; 413 body over the limit;
400 a body that is not JSON (or breaks the rules of ``glovebox.core._jsonlimits``)
or lacks ``input``; 503 ``overloaded`` (with ``Retry-After``); 500 a failure
of the server itself (opaque). Every non-200 answer is an envelope
(``servers._apierrors``) and every answer is counted in ``/metrics``
(``servers._metrics``). Calls go through ``Runtime.acall`` (or a ``ProcessPool``'s or ``RayRuntime``'s ``acall``
when one is given), so the runtime's
admission bounds (``max_in_flight``, ``max_queued``) govern them as they govern
every other door; listing and describing run on a small pool of worker threads,
so the event loop never waits on a sandbox or the registry. A call request's W3C
``traceparent`` (and ``tracestate``) header makes its ``glovebox.call`` span a child
of the caller's span (see ``glovebox.telemetry._tracing``).
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from ..core._jsonlimits import JsonRejected
from ..core._jsonlimits import loads as loads_json
from ..model._result import ToolInfo
from ..runtime._backend import CallBackend
from ..telemetry import _tracing
from ._apierrors import answer_failures, exception_handlers, not_visible
from ._auth import CHALLENGE, AuthFailure, authenticate, check_can_serve, envelope_error, unauthorized_body
from ._metrics import Metrics, count_requests

__all__ = ["DEFAULT_MAX_BODY_BYTES", "create_app", "serve", "tool_summary"]

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
_STATUS = {"permission_denied": 403, "tool_not_found": 404, "rate_limited": 429, "overloaded": 503}
T = TypeVar("T")


def tool_summary(info: ToolInfo) -> dict[str, Any]:
    """What a caller needs to call a tool: name, version, description and schemas."""
    return {
        "name": info.name,
        "version": info.version,
        "description": info.description,
        "input_schema": info.input_schema,
        "output_schema": info.output_schema,
    }


class _TooLarge(Exception):
    pass


class _Api:
    def __init__(self, runtime: CallBackend, max_body_bytes: int, workers: int, insecure_anonymous: bool) -> None:
        self.runtime = runtime
        self.max_body_bytes = max_body_bytes
        self.insecure_anonymous = insecure_anonymous
        self.metrics = Metrics(lambda: runtime.live_instances, runtime.breakers)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="glovebox-http")

    async def _run(self, job: functools.partial[T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.pool, job)

    def _principal(self, request: Request) -> str | JSONResponse:
        who = authenticate(self.runtime, request.headers, self.insecure_anonymous)
        if isinstance(who, AuthFailure):
            return JSONResponse(unauthorized_body(who), status_code=401, headers={"WWW-Authenticate": CHALLENGE})
        return who

    async def list_tools(self, request: Request) -> Response:
        principal = self._principal(request)
        if isinstance(principal, Response):
            return principal
        infos = await self._run(functools.partial(self.runtime.visible_tools, principal))
        return JSONResponse({"tools": [tool_summary(info) for info in infos]})

    async def describe(self, request: Request) -> Response:
        principal = self._principal(request)
        if isinstance(principal, Response):
            return principal
        name = request.path_params["name"]
        infos = await self._run(functools.partial(self.runtime.visible_tools, principal))
        for info in infos:
            if info.name == name:
                return JSONResponse(info.to_dict())
        return JSONResponse(not_visible(name, principal), status_code=404)

    async def call(self, request: Request) -> Response:
        principal = self._principal(request)
        if isinstance(principal, Response):
            return principal
        name = request.path_params["name"]
        value = await self._input(request, name, principal)
        if isinstance(value, Response):
            return value
        token = _tracing.attach_headers(request.headers)  # the caller's traceparent: the call span's parent
        try:
            result = await self.runtime.acall(name, value, principal=principal)
        finally:
            _tracing.detach(token)
        envelope = result.to_dict()
        if result.code == "tool_not_found":  # the library's message may name tools this caller may not see
            envelope["error"] = not_visible(envelope["meta"]["tool"], principal)["error"]
        self.metrics.observe(envelope)
        status = _STATUS.get(result.code or "", 200)
        return JSONResponse(envelope, status_code=status, headers=_retry_after(envelope))

    async def _input(self, request: Request, name: str, principal: str) -> Any:
        meta = {"tool": name, "principal": principal}
        try:
            body = await self._body(request)
        except _TooLarge:
            message = f"the request body is over the {self.max_body_bytes}-byte limit"
            details = {"max_body_bytes": self.max_body_bytes}
            return JSONResponse(envelope_error("invalid_input", message, details=details, meta=meta), status_code=413)
        try:
            parsed = loads_json(body)
        except JsonRejected as exc:
            body_error = envelope_error("invalid_input", f"the body {exc}", details=exc.details, meta=meta)
            return JSONResponse(body_error, status_code=400)
        if not isinstance(parsed, dict) or "input" not in parsed:
            message = 'the body must be a JSON object {"input": ...}'
            return JSONResponse(envelope_error("invalid_input", message, meta=meta), status_code=400)
        return parsed["input"]

    async def _body(self, request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise _TooLarge
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body_bytes:
                raise _TooLarge
            chunks.append(chunk)
        return b"".join(chunks)

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"ok": True, "policy_error": self.runtime.policy_error})

    async def metrics_text(self, request: Request) -> Response:
        return PlainTextResponse(self.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


def _retry_after(envelope: dict[str, Any]) -> dict[str, str] | None:
    """A ``Retry-After`` header (whole seconds, rounded up) for an error carrying ``details.retry_after_ms``."""
    wait_ms = envelope.get("error", {}).get("details", {}).get("retry_after_ms") if not envelope["ok"] else None
    if not isinstance(wait_ms, int) or isinstance(wait_ms, bool):
        return None
    return {"Retry-After": str(max(1, math.ceil(wait_ms / 1000)))}


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
    import os

    api = _Api(runtime, max_body_bytes, workers or max(4, os.cpu_count() or 1), insecure_anonymous)

    closers: list[Callable[[], None]] = []

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            api.pool.shutdown(wait=True)
            for close in closers:
                close()

    routes: list[BaseRoute] = [
        Route("/v1/tools", api.list_tools, methods=["GET"]),
        Route("/v1/tools/{name}", api.describe, methods=["GET"]),
        Route("/v1/tools/{name}/call", api.call, methods=["POST"]),
        Route("/healthz", api.healthz, methods=["GET"]),
        Route("/metrics", api.metrics_text, methods=["GET"]),
    ]
    if console:
        from ._console import console_routes

        pages, close_console = console_routes(runtime, api.pool, insecure_anonymous)
        routes += pages
        closers.append(close_console)
    middleware = [Middleware(count_requests, metrics=api.metrics), Middleware(answer_failures)]
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=exception_handlers(), lifespan=lifespan)
    app.router.redirect_slashes = False  # a redirect would be a non-200 answer that is not an envelope
    app.state.metrics = api.metrics
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
