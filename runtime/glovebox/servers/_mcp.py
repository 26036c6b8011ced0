"""The MCP server, on the official ``mcp`` SDK's low-level ``Server``.

Two modes:

- ``full``: every tool the principal may see is an MCP tool (name,
  description, ``inputSchema``, ``outputSchema`` when the tool's output schema
  is an object schema).
- ``search``: two tools for large catalogs, ``search_tools`` (query → the
  matching tools with their schemas) and ``call_tool`` (name, input).

A call answers ``structuredContent`` = the tool's output and one text block
holding the whole envelope (JSON); a failed call answers ``isError`` with the
envelope as both. Calls run through ``Runtime.acall`` (worker threads), so
the policy, approvals, validation, limits and the audit log apply unchanged.

Principals: over stdio, the one given; over streamable HTTP, the API key of
each request (``Authorization: Bearer`` or ``X-API-Key``), checked by an ASGI
layer before the SDK sees the request and again by every handler.

List changes: a watcher compares a fingerprint of the registry and the policy
every ``poll_s`` and, on a change, notifies handshake-era sessions
(``notifications/tools/list_changed``) and 2026-era ``subscriptions/listen``
streams.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._jsonlimits import escape_surrogates
from .._result import CallResult, ToolInfo
from .._runtime import Runtime
from ._auth import AuthFailure, authenticate, check_can_serve, envelope_error

__all__ = ["Mode", "McpService", "run_stdio", "streamable_http_app"]

logger = logging.getLogger("glovebox")
Mode = Literal["full", "search"]
_ANY_OBJECT: dict[str, Any] = {"type": "object"}
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

SEARCH_TOOL = types.Tool(
    name="search_tools",
    description="Find tools by words in their names and descriptions; answers their names, descriptions and schemas.",
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words to look for (empty: every tool)."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
)
CALL_TOOL = types.Tool(
    name="call_tool",
    description="Call a tool found with search_tools; answers the tool's result.",
    input_schema={
        "type": "object",
        "properties": {"name": {"type": "string"}, "input": {"description": "The tool's input (JSON)."}},
        "required": ["name", "input"],
        "additionalProperties": False,
    },
)


def mcp_tool(info: ToolInfo) -> types.Tool:
    """An MCP tool definition for a registered tool."""
    schema = info.input_schema if isinstance(info.input_schema, dict) else _ANY_OBJECT
    output = info.output_schema
    return types.Tool(
        name=info.name,
        description=info.description,
        input_schema=schema,
        output_schema=output if isinstance(output, dict) and output.get("type") == "object" else None,
    )


def tool_result(result: CallResult) -> types.CallToolResult:
    """The MCP result of a call: structured output, and the envelope as text."""
    envelope = result.to_dict()
    text = [types.TextContent(text=json.dumps(envelope, ensure_ascii=False))]
    if result.ok:
        return types.CallToolResult(content=text, structured_content=result.output)
    return types.CallToolResult(content=text, structured_content=envelope, is_error=True)


def _error_result(code: str, message: str, meta: dict[str, Any]) -> types.CallToolResult:
    safe = {key: escape_surrogates(value) if isinstance(value, str) else value for key, value in meta.items()}
    envelope = envelope_error(code, escape_surrogates(message), meta=safe)
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(envelope))], structured_content=envelope, is_error=True
    )


def search(infos: list[ToolInfo], query: str, limit: int = 20) -> list[dict[str, Any]]:
    """The tools whose name or description holds every word of ``query`` (case-insensitive)."""
    words = query.lower().split()
    found = [i for i in infos if all(w in f"{i.name} {i.description}".lower() for w in words)]
    return [
        {
            "name": i.name,
            "description": i.description,
            "input_schema": i.input_schema,
            "output_schema": i.output_schema,
        }
        for i in found[:limit]
    ]


class McpService:
    """The MCP handlers over one Runtime, and the list-change watcher.

    Args:
        runtime: the tools and the policy.
        principal: the fixed principal (stdio); None to authenticate each HTTP request.
        mode: ``full`` or ``search``.
        insecure_anonymous: HTTP without keys runs as ``anonymous``.
        poll_s: how often to look for a changed tool list.
    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        principal: str | None = None,
        mode: Mode = "full",
        insecure_anonymous: bool = False,
        poll_s: float = 0.5,
    ) -> None:
        if mode not in ("full", "search"):
            raise ValueError(f"unknown MCP mode {mode!r}; choose full or search")
        self.runtime = runtime
        self.principal = principal
        self.mode = mode
        self.insecure_anonymous = insecure_anonymous
        self.poll_s = poll_s
        self.bus = InMemorySubscriptionBus()
        self._sessions: dict[int, ServerSession] = {}
        self.server: Server[Any] = _Server(
            "glovebox",
            version=_version(),
            instructions="Tools run in fresh WebAssembly sandboxes; results carry the glovebox envelope.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=ListenHandler(self.bus),
        )

    # -- who is calling ---------------------------------------------------

    def _who(self, ctx: Any) -> str | AuthFailure:
        if self.principal is not None or ctx.request is None:
            return self.principal or "anonymous"
        return authenticate(self.runtime, ctx.request.headers, self.insecure_anonymous)

    def _remember(self, ctx: Any) -> None:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return  # 2026-era clients hear of changes through subscriptions/listen
        connection = getattr(ctx.session, "_connection", ctx.session)  # one entry per connection
        self._sessions[id(connection)] = ctx.session

    # -- handlers -----------------------------------------------------------

    async def _visible(self, principal: str) -> list[ToolInfo]:
        return await anyio.to_thread.run_sync(self.runtime.visible_tools, principal)

    async def _list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        self._remember(ctx)
        who = self._who(ctx)
        if isinstance(who, AuthFailure):
            return types.ListToolsResult(tools=[])
        if self.mode == "search":
            return types.ListToolsResult(tools=[SEARCH_TOOL, CALL_TOOL])
        return types.ListToolsResult(tools=[mcp_tool(info) for info in await self._visible(who)])

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        self._remember(ctx)
        who = self._who(ctx)
        if isinstance(who, AuthFailure):
            return _error_result("permission_denied", who.message, {"tool": params.name})
        arguments: dict[str, Any] = dict(params.arguments or {})
        if self.mode == "search":
            if params.name == "search_tools":
                return await self._search(who, arguments)
            if params.name != "call_tool":
                message = f"in search mode the tools are search_tools and call_tool, not {params.name!r}"
                return _error_result("tool_not_found", message, {"tool": params.name, "principal": who})
            name, value = arguments.get("name"), arguments.get("input")
            if not isinstance(name, str):
                return _error_result("invalid_input", "call_tool needs a tool name", {"principal": who})
            return tool_result(await self.runtime.acall(name, value, principal=who))
        return tool_result(await self.runtime.acall(params.name, arguments, principal=who))

    async def _search(self, principal: str, arguments: dict[str, Any]) -> types.CallToolResult:
        query = arguments.get("query", "")
        limit = arguments.get("limit", 20)
        if not isinstance(query, str) or not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            return _error_result("invalid_input", "search_tools takes a query string and a positive limit", {})
        found = search(await self._visible(principal), query, min(limit, 100))
        output = {"tools": found}
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(output, ensure_ascii=False))], structured_content=output
        )

    # -- list changes ---------------------------------------------------------

    def fingerprint(self) -> tuple[object, ...]:
        """What the tool lists depend on: the registry's tools and the policy in force."""
        tools = self.runtime.tools()
        # Policies compare by content: a reload of the same document is no change.
        return (self.runtime.policy, tuple((t.name, t.version, t.digest, t.deprecated) for t in tools))

    async def watch(self) -> None:
        """Notify clients whenever the fingerprint changes (runs until cancelled)."""
        last = await anyio.to_thread.run_sync(self.fingerprint)
        while True:
            await anyio.sleep(self.poll_s)
            now = await anyio.to_thread.run_sync(self.fingerprint)
            if now != last:
                last = now
                await self.notify_changed()

    async def notify_changed(self) -> None:
        """Tell every connected client that the tool list changed."""
        await self.bus.publish(ToolsListChanged())
        for key, session in list(self._sessions.items()):
            try:
                await session.send_tool_list_changed()
            except Exception:  # a gone client: forget it
                self._sessions.pop(key, None)

    def initialization_options(self) -> Any:
        return self.server.create_initialization_options()


class _Server(Server[Any]):
    """The SDK's Server, announcing ``tools.listChanged`` (the HTTP transport builds its options itself)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> Any:
        options = notification_options or NotificationOptions(tools_changed=True)
        return super().create_initialization_options(options, experimental_capabilities, extensions)


def _version() -> str:
    from .. import __version__

    return __version__


async def run_stdio(service: McpService) -> None:
    """Serve MCP over stdin/stdout until the client goes away."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as tasks:
        tasks.start_soon(service.watch)
        await service.server.run(read_stream, write_stream, service.initialization_options())
        tasks.cancel_scope.cancel()


class _RequireKey:
    """ASGI layer: refuse HTTP requests without a valid API key (401, envelope shape)."""

    def __init__(self, app: Any, service: McpService) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            from starlette.requests import Request
            from starlette.responses import JSONResponse

            who = authenticate(self.service.runtime, Request(scope).headers, self.service.insecure_anonymous)
            if isinstance(who, AuthFailure):
                body = envelope_error("permission_denied", who.message, details={"reason": who.reason})
                headers = {"WWW-Authenticate": 'Bearer realm="glovebox"'}
                await JSONResponse(body, status_code=401, headers=headers)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def streamable_http_app(service: McpService, *, host: str = "127.0.0.1", path: str = "/mcp") -> Any:
    """The MCP streamable-HTTP ASGI app (API keys required; the watcher runs in its lifespan).

    Raises:
        ValueError: no policy is configured and anonymous access was not asked for.
    """
    check_can_serve(service.runtime, service.insecure_anonymous)
    from starlette.applications import Starlette
    from starlette.routing import Mount

    inner = service.server.streamable_http_app(streamable_http_path=path, host=host)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with inner.router.lifespan_context(inner), anyio.create_task_group() as tasks:
            tasks.start_soon(service.watch)
            yield
            tasks.cancel_scope.cancel()

    return Starlette(routes=[Mount("/", app=_RequireKey(inner, service))], lifespan=lifespan)
