"""The MCP server, on the official ``mcp`` SDK's low-level ``Server``.

Two modes:

- ``full``: every tool the principal may see is an MCP tool (name,
  description, ``inputSchema``, ``outputSchema``), its schemas shown as
  ``glovebox.schema._objectroot`` says (MCP takes only objects at the root: a
  non-object input is ``{"input": ...}``, a non-object output ``{"output": ...}``).
  A tool that cannot be described is left out of the list (and logged).
- ``code`` (``glovebox mcp --code-mode``): ``execute`` (a program in, the run
  envelope out), ``search`` and ``resume``; see ``glovebox.servers._mcpcode``.
- ``search``: two tools for large catalogs, ``search_tools`` (query → the
  matching tools with the same schemas) and ``call_tool`` (name, input).

A call answers ``structuredContent`` = the tool's output (wrapped the same
way) and one text block holding the whole envelope (JSON); a failed call
answers ``isError`` with the envelope in the text block only: clients check
``structuredContent`` against the ``outputSchema``, which an envelope does
not match. Calls run through ``Runtime.acall`` (or a ``ProcessPool``'s or ``RayRuntime``'s ``acall`` when
one is given), so the policy, approvals,
validation, limits, the audit log and the admission bounds (``overloaded``
beyond ``max_in_flight`` running and ``max_queued`` waiting) apply unchanged.

Principals: over stdio, the one given (a policy is required unless anonymous
access is asked for); over streamable HTTP, the API key of each request
(``Authorization: Bearer`` or ``X-API-Key``), checked by an ASGI layer before
the SDK sees the request and again by every handler. ``/.well-known/*``
answers 404 before any key check: no OAuth metadata, so no client starts an
OAuth flow.

Approvals through the client (off by default, ``approver=``): a call answered
``approval_required`` asks the client's user through ``elicitation/create``
(``servers._elicit``).

List changes: a watcher compares a fingerprint of the registry and the policy
every ``poll_s`` and, on a change, notifies handshake-era sessions
(``notifications/tools/list_changed``, and ``resources/``/``prompts/list_changed``)
and 2026-era ``subscriptions/listen`` streams.

Besides outputs: content blocks, the call's log lines (``logging/setLevel``) and
progress reports (``servers._mcpcontent``); the resources, prompts and completions of
imported MCP servers (``servers._mcpcatalog``); over HTTP, resumable SSE streams
(``servers._mcpevents``: a priming event with ``retry`` :data:`RETRY_MS`, replay
after ``Last-Event-ID``).
"""

from __future__ import annotations

import json
import logging
import warnings
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..core._jsonlimits import escape_surrogates
from ..model._result import CallResult, ToolInfo
from ..runtime._backend import CallBackend
from ..schema._objectroot import input_parameters, output_structure, unwrap_input, wrap_output
from ..telemetry import _tracing
from ._auth import (
    CHALLENGE,
    KEY_HEADERS,
    AuthFailure,
    authenticate,
    check_can_serve,
    envelope_error,
    unauthorized_body,
)
from ._elicit import elicit_approval
from ._mcpcatalog import CatalogHandlers, without_listings
from ._mcpclient import relaying_client
from ._mcpcode import code_tools, execute, resume
from ._mcpcontent import LEVELS, LiveRelay, content_blocks, is_content_tool
from ._mcpevents import BoundedEventStore

__all__ = ["McpService", "Mode", "check_stdio", "describe", "run_stdio", "streamable_http_app"]

logger = logging.getLogger("glovebox")
#: The ``retry`` (ms) of every SSE stream's priming event: how soon a client whose stream broke reconnects.
RETRY_MS = 1000
Mode = Literal["full", "search", "code"]
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
    """An MCP tool definition for a registered tool (object schemas at the root; a tool
    answering content blocks declares no output schema, see ``servers._mcpcontent``; a read
    tool's listings are served as resources and prompts, not in its schema)."""
    content = is_content_tool(info.output_schema)
    return types.Tool(
        name=info.name,
        description=info.description,
        input_schema=input_parameters(without_listings(info.input_schema)),
        output_schema=None if content else output_structure(info.output_schema),
    )


def describe(infos: list[ToolInfo]) -> list[types.Tool]:
    """The MCP definitions of ``infos``, leaving out (and logging) any that cannot be built."""
    tools = []
    for info in infos:
        try:
            tools.append(mcp_tool(info))
        except Exception:  # one tool must not take the whole list down
            logger.exception("tool %r@%s cannot be described over MCP; it is not listed", info.name, info.version)
    return tools


def tool_result(result: CallResult, output_schema: Any = True) -> types.CallToolResult:
    """The MCP result of a call: the structured output, and the envelope as text.

    A failed call carries no ``structuredContent``: its envelope would not match
    the tool's ``outputSchema``, and clients check it even when ``isError`` is set.
    """
    envelope = result.to_dict()
    blocks = content_blocks(result.output) if result.ok and is_content_tool(output_schema) else None
    if blocks is not None:
        del envelope["output"]  # the blocks are the output
        return types.CallToolResult(content=[*blocks, types.TextContent(text=_json_line(envelope))])
    text = [types.TextContent(text=_json_line(envelope))]
    if result.ok:
        return types.CallToolResult(content=text, structured_content=wrap_output(output_schema, result.output))
    return types.CallToolResult(content=text, is_error=True)


def _json_line(value: Any) -> str:
    """``value`` as JSON text on one line: what a tool puts in it cannot start a line a model reads.

    JSON escapes the control characters; U+0085, U+2028 and U+2029 (line breaks to
    ``str.splitlines`` and many renderers) it leaves as they are, so they are escaped here.
    """
    return json.dumps(value, ensure_ascii=False).translate(_LINE_BREAKS)


_LINE_BREAKS = {ord(c): f"\\u{ord(c):04x}" for c in "\x85\u2028\u2029"}


def _error_result(code: str, message: str, meta: dict[str, Any]) -> types.CallToolResult:
    safe = {key: escape_surrogates(value) if isinstance(value, str) else value for key, value in meta.items()}
    envelope = envelope_error(code, escape_surrogates(message), meta=safe)
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(envelope))], is_error=True)


def search(infos: list[ToolInfo], query: str, limit: int = 20) -> list[dict[str, Any]]:
    """The tools whose name or description holds every word of ``query`` (case-insensitive),
    with the schemas ``call_tool`` takes and answers (as in full mode)."""
    words = query.lower().split()
    found = [i for i in infos if all(w in f"{i.name} {i.description}".lower() for w in words)]
    return [
        {
            "name": i.name,
            "description": i.description,
            "input_schema": input_parameters(i.input_schema),
            "output_schema": output_structure(i.output_schema),
        }
        for i in found[:limit]
    ]


class McpService:
    """The MCP handlers over one Runtime, and the list-change watcher.

    Args:
        runtime: the backend (any ``CallBackend``): the tools, the policy and the calls.
        principal: the fixed principal (stdio); None to authenticate each HTTP request.
        mode: ``full`` or ``search``.
        insecure_anonymous: HTTP without keys runs as ``anonymous``.
        poll_s: how often to look for a changed tool list.
        approver: ask the client's user, as this principal, to approve a call answered
            ``approval_required`` (``elicitation/create``; see ``servers._elicit``). None
            (the default): never ask.
    """

    def __init__(
        self,
        runtime: CallBackend,
        *,
        principal: str | None = None,
        mode: Mode = "full",
        insecure_anonymous: bool = False,
        poll_s: float = 0.5,
        approver: str | None = None,
    ) -> None:
        if mode not in ("full", "search", "code"):
            raise ValueError(f"unknown MCP mode {mode!r}; choose full, search or code")
        if mode == "code" and not hasattr(runtime, "arun"):
            raise ValueError("code mode needs a backend that runs programs (a CallBackend with run, arun and runs)")
        self.runtime = runtime
        self.principal = principal
        self.mode = mode
        self.insecure_anonymous = insecure_anonymous
        self.poll_s = poll_s
        self.approver = approver
        self.bus = InMemorySubscriptionBus()
        self._sessions: dict[int, ServerSession] = {}
        self._levels: weakref.WeakKeyDictionary[Any, types.LoggingLevel] = weakref.WeakKeyDictionary()
        self.catalog = CatalogHandlers(runtime, self._who)
        with warnings.catch_warnings():
            # logging/setLevel is deprecated by the 2026-07-28 protocol; clients of 2025-06-18
            # and 2025-11-25 still use it, so it is served without the SDK's warning.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            self.server: Server[Any] = _Server(
                "glovebox",
                version=_version(),
                instructions="Tools run in fresh WebAssembly sandboxes; results carry the glovebox envelope.",
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
                on_subscriptions_listen=ListenHandler(self.bus),
                on_set_logging_level=self._set_level,
                **self.catalog.handlers(),
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

    def _log_level(self, ctx: Any) -> types.LoggingLevel | None:
        """The level this request asked for (2026-07-28: in its ``_meta``), else the one its client set with
        ``logging/setLevel``; None: send no log lines."""
        if ctx is None:
            return None
        asked = (ctx.meta or {}).get(types.LOG_LEVEL_META_KEY)
        return asked if asked in LEVELS else self._levels.get(_connection(ctx))

    async def _set_level(self, ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        if params.level not in LEVELS:  # the SDK checks it; a lower layer must not trust that
            raise ValueError(f"unknown log level {params.level!r}")
        self._levels[_connection(ctx)] = params.level
        return types.EmptyResult()

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
        if self.mode == "code":
            runs = self.runtime.runs
            declaration = await anyio.to_thread.run_sync(runs.declarations, who)
            stubs = await anyio.to_thread.run_sync(lambda: runs.declarations(who, lang="py"))
            return types.ListToolsResult(tools=code_tools(declaration, stubs))
        return types.ListToolsResult(tools=describe(await self._visible(who)))

    async def _call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        self._remember(ctx)
        who = self._who(ctx)
        if isinstance(who, AuthFailure):
            return _error_result("permission_denied", who.message, {"tool": params.name})
        arguments: dict[str, Any] = dict(params.arguments or {})
        if self.mode == "code":
            return await self._code(params.name, arguments, who)
        if self.mode == "search":
            if params.name == "search_tools":
                return await self._search(who, arguments)
            if params.name != "call_tool":
                message = f"in search mode the tools are search_tools and call_tool, not {params.name!r}"
                return _error_result("tool_not_found", message, {"tool": params.name, "principal": who})
            name, value = arguments.get("name"), arguments.get("input")
            if not isinstance(name, str):
                return _error_result("invalid_input", "call_tool needs a tool name", {"principal": who})
            return await self._run(name, value, who, ctx, params.input_responses)
        return await self._run(params.name, arguments, who, ctx, params.input_responses)

    async def _run(
        self, name: str, arguments: Any, principal: str, ctx: Any = None, responses: dict[str, Any] | None = None
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Call ``name`` with what a client sent (unwrapped from ``{"input": ...}`` where
        the tool's input is not an object) and shape the result as the listing described it.

        Over HTTP, the request's W3C ``traceparent`` header, when valid, is the parent of
        the call's span; else the current span (the SDK's ``tools/call`` span) is.
        """
        info = await self._lookup(name)
        value = arguments if info is None else unwrap_input(info.input_schema, arguments)
        request = getattr(ctx, "request", None)
        token = _tracing.attach_headers(request.headers) if request is not None else None
        live = LiveRelay(ctx, self._log_level(ctx))
        try:
            async with live.running():
                with relaying_client(ctx, live.flushed):
                    result = await self.runtime.acall(name, value, principal=principal)
        finally:
            _tracing.detach(token)
        if self.approver is not None and result.code == "approval_required":
            asked = await elicit_approval(self.runtime, self.approver, ctx, responses, (name, value, principal), result)
            if isinstance(asked, types.InputRequiredResult):
                return asked
            result = asked
        await live.finish(result.meta.get("logs"))
        if not result.ok:
            return tool_result(result)
        ran = f"{result.meta['tool']}@{result.meta['version']}"
        if info is None or f"{info.name}@{info.version}" != ran:
            info = await self._lookup(ran)
        return tool_result(result, True if info is None else info.output_schema)

    async def _code(self, name: str, arguments: dict[str, Any], principal: str) -> types.CallToolResult:
        """Code mode's three tools (see ``glovebox.servers._mcpcode``)."""
        if name == "execute":
            return await execute(self.runtime, arguments, principal)
        if name == "resume":
            return await resume(self.runtime, arguments, principal)
        if name == "search":
            return await self._search(principal, {"query": arguments.get("query", "")})
        message = f"in code mode the tools are execute, search and resume, not {name!r}"
        return _error_result("tool_not_found", message, {"tool": name, "principal": principal})

    async def _lookup(self, ref: str) -> ToolInfo | None:
        """The registered tool ``ref`` names, or None (the call itself then says why)."""
        try:
            return await anyio.to_thread.run_sync(self.runtime.tool, ref)
        except Exception:  # unknown, removed, or a name the index cannot hold: the call answers
            return None

    async def _search(self, principal: str, arguments: dict[str, Any]) -> types.CallToolResult:
        query = arguments.get("query", "")
        limit = arguments.get("limit", 20)
        if not isinstance(query, str) or not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            return _error_result("invalid_input", "search_tools takes a query string and a positive limit", {})
        found = search(await self._visible(principal), query, min(limit, 100))
        output = {"tools": found}
        return types.CallToolResult(content=[types.TextContent(text=_json_line(output))], structured_content=output)

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
                await session.send_resource_list_changed()  # the read tools' listings are part of the tools
                await session.send_prompt_list_changed()
            except Exception:  # a gone client: forget it
                self._sessions.pop(key, None)

    def initialization_options(self) -> Any:
        return self.server.create_initialization_options()


def _connection(ctx: Any) -> Any:
    """The client connection a request came on (a session's settings live as long as it)."""
    return getattr(ctx.session, "_connection", ctx.session)


class _Server(Server[Any]):
    """The SDK's Server, announcing ``tools.listChanged`` (the HTTP transport builds its options itself)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> Any:
        options = notification_options or NotificationOptions(
            tools_changed=True, resources_changed=True, prompts_changed=True
        )
        return super().create_initialization_options(options, experimental_capabilities, extensions)


def _version() -> str:
    from ..core._version import __version__

    return __version__


def check_stdio(service: McpService) -> None:
    """Refuse to serve stdio with no policy, unless anonymous access is explicit.

    Raises:
        ValueError: no policy is configured and ``insecure_anonymous`` is False.
    """
    if not service.runtime.policy_configured and not service.insecure_anonymous:
        raise ValueError(
            "no policy is configured: give one with --policy "
            "(glovebox mcp --home DIR --policy FILE ...), in the client's args or env; an MCP client "
            "passes only HOME, PATH, SHELL, TERM, USER and LOGNAME to a server it spawns, so "
            "GLOVEBOX_POLICY set in a shell does not reach it. Pass --insecure-anonymous to serve "
            "with no policy"
        )


async def run_stdio(service: McpService) -> None:
    """Serve MCP over stdin/stdout until the client goes away.

    Raises:
        ValueError: no policy is configured and anonymous access was not asked for.
    """
    check_stdio(service)
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as tasks:
        tasks.start_soon(service.watch)
        await service.server.run(read_stream, write_stream, service.initialization_options())
        tasks.cancel_scope.cancel()


class _RequireKey:
    """ASGI layer: refuse HTTP requests without a valid API key (401, envelope shape).

    ``/.well-known/*`` (OAuth and OpenID discovery) answers 404 first, whatever
    the headers: advertising no authorization server keeps clients from
    starting an OAuth flow that cannot succeed.
    """

    def __init__(self, app: Any, service: McpService) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            from starlette.requests import Request
            from starlette.responses import JSONResponse

            if str(scope.get("path", "")).startswith("/.well-known/"):
                await JSONResponse(_NO_OAUTH, status_code=404)(scope, receive, send)
                return
            who = authenticate(self.service.runtime, Request(scope).headers, self.service.insecure_anonymous)
            if isinstance(who, AuthFailure):
                answer = JSONResponse(unauthorized_body(who), status_code=401, headers={"WWW-Authenticate": CHALLENGE})
                await answer(scope, receive, send)
                return
        await self.app(scope, receive, send)


_NO_OAUTH = envelope_error(
    "permission_denied",
    f"this server does not use OAuth: send an API key as '{KEY_HEADERS[0]}' or '{KEY_HEADERS[1]}'",
    details={"reason": "no_oauth", "send_one_of": list(KEY_HEADERS)},
)


def streamable_http_app(
    service: McpService, *, host: str = "127.0.0.1", path: str = "/mcp", stateless: bool = False
) -> Any:
    """The MCP streamable-HTTP ASGI app (API keys required; the watcher runs in its lifespan).

    ``stateless``: every request stands alone (no session, no server-to-client stream), for
    several server processes on one port (``servers._prefork``).

    Raises:
        ValueError: no policy is configured and anonymous access was not asked for.
    """
    check_can_serve(service.runtime, service.insecure_anonymous)
    from starlette.applications import Starlette
    from starlette.routing import Mount

    inner = service.server.streamable_http_app(
        streamable_http_path=path,
        host=host,
        stateless_http=stateless,
        event_store=None if stateless else BoundedEventStore(),
        retry_interval=RETRY_MS,
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with inner.router.lifespan_context(inner), anyio.create_task_group() as tasks:
            tasks.start_soon(service.watch)
            yield
            tasks.cancel_scope.cancel()

    return Starlette(routes=[Mount("/", app=_RequireKey(inner, service))], lifespan=lifespan)
