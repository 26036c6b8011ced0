"""The HTTP API's routes: the tools a caller may see, one tool, a call; liveness and metrics.

Handlers raise :mod:`servers._refusals` (rendered as envelopes by
``servers._apierrors``); a call that ran answers its own envelope, with the
status :data:`STATUS` gives its error code.
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from ..core._jsonlimits import JsonRejected
from ..core._jsonlimits import loads as loads_json
from ..model._result import ToolInfo
from ..runtime._backend import CallBackend
from ..telemetry import _tracing
from ._apierrors import not_visible
from ._auth import envelope_error
from ._identity import KeyOrSession, authentication
from ._metrics import Metrics
from ._refusals import BadRequest, TooLarge, requires

__all__ = ["STATUS", "ToolRoutes", "tool_summary"]

#: The HTTP status of a call's envelope, by its error code (200 for the rest).
STATUS = {"permission_denied": 403, "tool_not_found": 404, "rate_limited": 429, "overloaded": 503}
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


class ToolRoutes:
    """``/v1/tools...``, ``/healthz`` and ``/metrics`` over one backend."""

    def __init__(
        self, runtime: CallBackend, pool: ThreadPoolExecutor, metrics: Metrics, max_body_bytes: int, anonymous: bool
    ) -> None:
        self.runtime = runtime
        self.pool = pool
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self.backend = KeyOrSession(runtime, anonymous)

    def routes(self) -> list[BaseRoute]:
        keyed = [authentication(self.backend)]
        return [
            Route("/v1/tools", self.list_tools, methods=["GET"], middleware=keyed),
            Route("/v1/tools/{name}", self.describe, methods=["GET"], middleware=keyed),
            Route("/v1/tools/{name}/call", self.call, methods=["POST"], middleware=keyed),
            Route("/healthz", self.healthz, methods=["GET"]),
            Route("/metrics", self.metrics_text, methods=["GET"]),
        ]

    async def _run(self, job: functools.partial[T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.pool, job)

    @requires()
    async def list_tools(self, request: Request) -> Response:
        infos = await self._run(functools.partial(self.runtime.visible_tools, request.user.identity))
        return JSONResponse({"tools": [tool_summary(info) for info in infos]})

    @requires()
    async def describe(self, request: Request) -> Response:
        principal, name = request.user.identity, request.path_params["name"]
        infos = await self._run(functools.partial(self.runtime.visible_tools, principal))
        for info in infos:
            if info.name == name:
                return JSONResponse(info.to_dict())
        raise not_visible(name, principal)

    @requires()
    async def call(self, request: Request) -> Response:
        principal, name = request.user.identity, request.path_params["name"]
        value = await self._input(request, {"tool": name, "principal": principal})
        token = _tracing.attach_headers(request.headers)  # the caller's traceparent: the call span's parent
        try:
            result = await self.runtime.acall(name, value, principal=principal)
        finally:
            _tracing.detach(token)
        envelope = result.to_dict()
        if result.code == "tool_not_found":  # the library's message may name tools this caller may not see
            hidden = not_visible(envelope["meta"]["tool"], principal)
            envelope["error"] = envelope_error(hidden.code, hidden.message, details=hidden.details)["error"]
        self.metrics.observe(envelope)
        status = STATUS.get(result.code or "", 200)
        return JSONResponse(envelope, status_code=status, headers=_retry_after(envelope))

    async def _input(self, request: Request, meta: dict[str, Any]) -> Any:
        body = await self._body(request, meta)
        try:
            parsed = loads_json(body)
        except JsonRejected as exc:
            raise BadRequest(f"the body {exc}", details=exc.details, meta=meta) from None
        if not isinstance(parsed, dict) or "input" not in parsed:
            raise BadRequest('the body must be a JSON object {"input": ...}', meta=meta)
        return parsed["input"]

    async def _body(self, request: Request, meta: dict[str, Any]) -> bytes:
        limit = self.max_body_bytes
        too_large = TooLarge(
            f"the request body is over the {limit}-byte limit", details={"max_body_bytes": limit}, meta=meta
        )
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise too_large
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)
        return b"".join(chunks)

    async def healthz(self, request: Request) -> Response:
        # ``pid``: which server process answered (``serve --workers N`` runs several on one port).
        return JSONResponse({"ok": True, "policy_error": self.runtime.policy_error, "pid": os.getpid()})

    async def metrics_text(self, request: Request) -> Response:
        return PlainTextResponse(self.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


def _retry_after(envelope: dict[str, Any]) -> dict[str, str] | None:
    """A ``Retry-After`` header (whole seconds, rounded up) for an error carrying ``details.retry_after_ms``."""
    wait_ms = envelope.get("error", {}).get("details", {}).get("retry_after_ms") if not envelope["ok"] else None
    if not isinstance(wait_ms, int) or isinstance(wait_ms, bool):
        return None
    return {"Retry-After": str(max(1, math.ceil(wait_ms / 1000)))}
