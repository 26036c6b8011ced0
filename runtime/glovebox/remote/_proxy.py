"""Remote MCP tools: the descriptor a ``mcp-remote`` tool is registered as, and the proxy that calls it.

A tool of kind ``mcp-remote`` runs on another server, so there is no wasm to
store: its artifact is a canonical JSON descriptor (the server URL, the
remote tool's name, the headers that carry secrets, by secret name only, and
the schemas and description it was imported with). The registry addresses it
by the SHA-256 of those bytes like any artifact, and every call re-reads and
re-hashes it before anything is sent, so a descriptor changed on disk never
reaches the network.

A call opens a streamable-HTTP session with the official ``mcp`` SDK client
on a private event loop, negotiates the protocol and calls the tool. The whole
exchange (connect, negotiate, call, close) runs under one deadline,
``limits.timeout_ms``; the bytes the server may send during it are capped at
twice ``limits.output_bytes`` plus :data:`PROTOCOL_OVERHEAD_BYTES` (an answer
carries the output twice: as ``structuredContent`` and as text), and the
output itself at ``limits.output_bytes``. Every failure of the exchange is
translated here, once, into a call error: the deadline is ``timeout``, the byte
cap ``output_too_large``, ``isError`` ``guest_error``, anything else the server
or the network does ``upstream_error`` naming the server's origin. What the
host keeps of a failure (the log line, the error message) is scrubbed of the
call's secrets before it is cut, so a cut never leaves part of a secret.

Trace context: the SDK client adds the current W3C ``traceparent`` and
``tracestate`` to each message's ``_meta``. The host rewrites every message it
sends: the trace keys (and ``baggage``) are removed, and only a tool imported
with ``propagate_trace`` gets, on its ``tools/call`` message, the
``traceparent``/``tracestate`` current when the call started (its
``glovebox.call`` span when traced). No other message (``initialize``, a
listing at import, refresh or call) carries one.

A listing is scrubbed like an answer: every string of the server's name and of
each tool's description and schemas (keys too) has the secrets sent to the
server replaced; a tool whose *name* holds one refuses the import (its name is
what a call sends back, so it cannot be replaced).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from ..capabilities._secrets import Scrubber
from ..core._canonical import canonical_bytes, sha256_digest
from ..core._errors import (
    CallError,
    CallTimeout,
    GuestError,
    InternalError,
    InvalidManifest,
    OutputTooLarge,
    ToolNotFound,
    UpstreamError,
)
from ..sandbox._callstate import clip
from ..telemetry import _tracing
from ._headers import HeaderSecrets, read_secrets

if TYPE_CHECKING:
    import httpx2
    from mcp import Client

    from ._resources import Catalog

__all__ = ["Descriptor", "call_remote", "list_catalog", "list_remote", "load_descriptor", "origin_of", "output_of"]

logger = logging.getLogger("glovebox")

FORMAT = "glovebox-mcp-remote/1"
MAX_DESCRIPTOR_BYTES = 4 * 1024 * 1024
#: Bytes a server may send beyond twice the output cap: the protocol's framing and negotiation.
PROTOCOL_OVERHEAD_BYTES = 64 * 1024
#: Characters of a remote error text kept in the call's error message.
ERROR_TEXT_CHARS = 1000
#: Characters of a failed exchange kept in the log line, and in the error's reason.
LOG_CHARS = 500
REASON_CHARS = 300
#: The ``_meta`` keys of a message that carry trace context (the host decides them, never the SDK).
TRACE_KEYS = ("traceparent", "tracestate", "baggage")
T = TypeVar("T")


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL: what meta and errors name (never a path, query or credential)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port is not None else "")


@dataclass(frozen=True)
class Descriptor:
    """What a ``mcp-remote`` tool is: the bytes of its artifact."""

    url: str
    tool: str
    description: str = ""
    input_schema: dict[str, Any] | bool = True
    output_schema: dict[str, Any] | bool = True
    headers: dict[str, str] = field(default_factory=dict)  # header name -> secret name
    #: Send the call's W3C trace context to the server (in ``_meta``); off unless imported with it.
    propagate_trace: bool = False
    #: What a call asks the server: ``tools/call`` (the tool ``tool``), or one of the reads of
    #: ``glovebox.remote._resources`` (``resources/read``, ``prompts/get``, ``completion/complete``).
    method: str = "tools/call"
    #: A local (stdio) server: its argv, the executable an absolute path (``url`` is then ``stdio:<name>``).
    command: list[str] | None = None
    #: A stdio server's literal environment variables (name -> value).
    env: dict[str, str] = field(default_factory=dict)
    #: A stdio server's secret environment variables (name in its environment -> the host's variable).
    env_secrets: dict[str, str] = field(default_factory=dict)
    #: A stdio server's OS sandbox: ``auto`` (bubblewrap where it runs), ``bwrap`` (required) or ``none``.
    sandbox: str = "auto"

    def to_bytes(self) -> bytes:
        """Canonical JSON (sorted keys, no spaces): the artifact whose SHA-256 is the tool's digest.

        A field at its default (``propagate_trace``, ``method``, the stdio fields) is left out, so a descriptor
        made before it existed keeps its digest.
        """
        document = {"format": FORMAT, **self.__dict__}
        for key, default in _OPTIONAL.items():
            if document[key] == default:
                del document[key]
        return canonical_bytes(document)

    @property
    def server(self) -> bytes:
        """What identifies the server (not the tool): its URL and headers, or its command, environment, sandbox."""
        document = {key: value for key, value in self.__dict__.items() if key in _SERVER_FIELDS}
        return canonical_bytes(document)

    @property
    def digest(self) -> str:
        return sha256_digest(self.to_bytes())

    @property
    def origin(self) -> str:
        return self.url if self.command else origin_of(self.url)

    @classmethod
    def from_bytes(cls, data: bytes) -> Descriptor:
        """Parse a stored descriptor. Raises ValueError when it is not one."""
        document = json.loads(data)
        if not isinstance(document, dict) or document.pop("format", None) != FORMAT:
            raise ValueError(f"not a {FORMAT} descriptor")
        return cls(**document)


_OPTIONAL: dict[str, Any] = {
    "propagate_trace": False,
    "method": "tools/call",
    "command": None,
    "env": {},
    "env_secrets": {},
    "sandbox": "auto",
}
_SERVER_FIELDS = ("url", "headers", "command", "env", "env_secrets", "sandbox")


def load_descriptor(path: Path, digest: str) -> Descriptor:
    """Read, verify (SHA-256 against ``digest``) and parse a stored descriptor.

    Raises:
        ToolNotFound: the artifact is gone (the tool was removed meanwhile).
        InternalError: the stored bytes do not match the digest, or are not a descriptor.
    """
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_DESCRIPTOR_BYTES + 1)
    except FileNotFoundError as exc:
        raise ToolNotFound("the tool was removed before this call could run it", details={"digest": digest}) from exc
    if sha256_digest(data) != digest:
        logger.error("remote tool descriptor %s is missing or changed on disk; refusing to use it", digest)
        raise InternalError("the tool's artifact failed verification; it will not run")
    try:
        return Descriptor.from_bytes(data)
    except (ValueError, TypeError) as exc:
        raise InternalError("the tool's artifact is not a remote tool descriptor") from exc


# -- the exchange ---------------------------------------------------------------


class _Budget:
    """Bytes the server may still send in one exchange; records when it ran out."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.exceeded = False

    def spend(self, size: int) -> None:
        self.used += size
        if self.used > self.limit:
            self.exceeded = True
            raise _TooLarge(f"the server sent more than {self.limit} bytes")


class _TooLarge(Exception):
    pass


def _capped_client(
    budget: _Budget, timeout_s: float, headers: Mapping[str, str], trace: Mapping[str, str] | None
) -> httpx2.AsyncClient:
    """An HTTP client whose responses count against ``budget`` and whose requests carry ``trace`` as their
    only trace context (see :func:`with_trace`); no proxies or settings from the environment."""
    import httpx2

    class CappedStream(httpx2.AsyncByteStream):
        def __init__(self, inner: httpx2.AsyncByteStream) -> None:
            self._inner = inner

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self._inner:
                budget.spend(len(chunk))
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    class CappedTransport(httpx2.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            response = await super().handle_async_request(_retraced(request, trace))
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            return httpx2.Response(
                response.status_code,
                headers=response.headers,
                stream=CappedStream(response.stream),
                extensions=response.extensions,
            )

    return httpx2.AsyncClient(
        transport=CappedTransport(), headers=dict(headers), timeout=timeout_s, trust_env=False, follow_redirects=False
    )


def _retraced(request: httpx2.Request, trace: Mapping[str, str] | None) -> httpx2.Request:
    """``request`` with its JSON-RPC body's trace context replaced (the same request when nothing changes)."""
    import httpx2

    if request.method != "POST" or not request.headers.get("content-type", "").startswith("application/json"):
        return request
    body = request.content
    rewritten = with_trace(body, trace)
    if rewritten is body:
        return request
    headers = [(name, value) for name, value in request.headers.raw if name.lower() != b"content-length"]
    return httpx2.Request(
        request.method, request.url, headers=headers, content=rewritten, extensions=request.extensions
    )


def with_trace(body: bytes, trace: Mapping[str, str] | None) -> bytes:
    """A JSON-RPC body whose messages' ``_meta`` hold no trace keys but ``trace`` on a ``tools/call``.

    Returns ``body`` itself when nothing changes (no message carries trace keys and ``trace`` is None).

    >>> with_trace(b'{"method":"tools/list","params":{"_meta":{"traceparent":"00-1-2-01"}}}', None)
    b'{"method":"tools/list"}'
    """
    try:
        document = json.loads(body)
    except ValueError:
        return body
    changed = False
    for message in document if isinstance(document, list) else [document]:
        if isinstance(message, dict):
            changed |= _retrace(message, trace)
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode() if changed else body


def _retrace(message: dict[str, Any], trace: Mapping[str, str] | None) -> bool:
    trace = trace if message.get("method") == "tools/call" else None
    params = message.get("params")
    if params is None and trace and "method" in message:
        params = message["params"] = {}
    if not isinstance(params, dict):
        return False
    meta = params.get("_meta")
    meta = dict(meta) if isinstance(meta, dict) else {}
    before = dict(meta)
    for key in TRACE_KEYS:
        meta.pop(key, None)
    meta.update(trace or {})
    if meta == before and ("_meta" in params or meta):
        return False
    if meta:
        params["_meta"] = meta
    else:
        params.pop("_meta", None)
        if not params:
            message.pop("params")
    return True


@asynccontextmanager
async def _session(
    url: str, headers: Mapping[str, str], budget: _Budget, timeout_s: float, trace: Mapping[str, str] | None
) -> AsyncIterator[Client]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with _capped_client(budget, timeout_s, headers, trace) as http:
        transport = streamable_http_client(url, http_client=http, max_sse_event_size=budget.limit + 1)
        async with Client(transport, cache=None, read_timeout_seconds=timeout_s) as client:
            yield client


def _run(make: Callable[[], Awaitable[T]], timeout_s: float) -> T:
    """Run a coroutine on a private event loop within ``timeout_s`` (TimeoutError past it)."""
    import anyio

    async def bounded() -> T:
        with anyio.fail_after(timeout_s):
            return await make()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(bounded)
    # Called from a thread that runs an event loop: run on a thread of its own.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="glovebox-remote") as pool:
        return pool.submit(anyio.run, bounded).result()


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _translate(exc: BaseException, budget: _Budget, origin: str, scrub: Scrubber) -> CallError:
    """The call error one failed exchange with ``origin`` is; the one place this module maps errors."""
    leaves = _leaves(exc)
    details: dict[str, Any] = {"server": origin}
    if budget.exceeded or any(isinstance(leaf, _TooLarge) for leaf in leaves):
        message = f"the remote MCP server {origin} sent more than {budget.limit} bytes"
        return OutputTooLarge(message, details={**details, "limit_bytes": budget.limit})
    if any(isinstance(leaf, TimeoutError) for leaf in leaves):
        return CallTimeout(f"the remote MCP server {origin} did not answer within the call's deadline", details=details)
    leaf = leaves[0]
    logger.info("remote MCP exchange with %s failed: %s", origin, clip(repr(leaf), scrub.text, LOG_CHARS))
    reason = clip(_reason(leaf), scrub.text, REASON_CHARS)
    return UpstreamError(f"the remote MCP server {origin} failed: {reason}", details=details)


def _reason(leaf: BaseException) -> str:
    from mcp.shared.exceptions import MCPError

    if isinstance(leaf, MCPError):
        return f"error {leaf.error.code}: {leaf.error.message}"
    import httpx2

    if isinstance(leaf, (httpx2.HTTPError, OSError)):
        return f"{type(leaf).__name__}: {leaf}"
    return f"protocol error ({type(leaf).__name__})"


def _exchange(
    url: str,
    secrets: tuple[dict[str, str], Scrubber],
    limit_bytes: int,
    timeout_s: float,
    work: Callable[[Client], Awaitable[T]],
    trace: Mapping[str, str] | None = None,
) -> T:
    """Open a session to ``url`` and run ``work`` on it within ``timeout_s`` and ``limit_bytes``; the
    messages sent carry ``trace`` as their only trace context."""
    values, scrub = secrets
    budget = _Budget(limit_bytes)

    async def main() -> T:
        async with _session(url, values, budget, timeout_s, trace) as client:
            return await work(client)

    try:
        return _run(main, timeout_s)
    except Exception as exc:
        raise _translate(exc, budget, origin_of(url), scrub) from exc


# -- a call ----------------------------------------------------------------------


def call_remote(
    descriptor: Descriptor,
    arguments: dict[str, Any],
    timeout_ms: int,
    output_bytes: int,
    principal: str | None = None,
    home: Path | None = None,
) -> str:
    """Call the remote tool; return its output as JSON text (at most ``output_bytes`` of UTF-8).

    ``principal`` and ``home``: whose secrets are sent, read from which home (a connection's tokens;
    see :func:`~glovebox.remote._headers.read_secrets`; None: the ``default`` account, ``GLOVEBOX_HOME``).

    The output is ``structuredContent`` when the server gives it, else the one
    text block (parsed as JSON when it is JSON, else as a string), else
    ``{"content": [...]}`` with every content block.

    Raises:
        CallTimeout, OutputTooLarge, GuestError, UpstreamError: see the module docstring.
    """
    import mcp_types as types

    if descriptor.method != "tools/call":
        return _call_read(descriptor, arguments, timeout_ms, output_bytes, principal, home)
    secrets = read_secrets(descriptor.url, descriptor.headers, principal, home)
    scrub = secrets[1]

    async def work(client: Client) -> types.CallToolResult:
        return await client.call_tool(descriptor.tool, arguments)

    limit = 2 * output_bytes + PROTOCOL_OVERHEAD_BYTES
    trace = _tracing.carrier() if descriptor.propagate_trace else None
    result = _exchange(descriptor.url, secrets, limit, timeout_ms / 1000, work, trace)
    return output_of(result, descriptor, scrub, output_bytes)


def output_of(result: Any, descriptor: Descriptor, scrub: Scrubber, output_bytes: int) -> str:
    """The output text of a ``tools/call`` result (see :func:`call_remote`), scrubbed and capped.

    Raises:
        GuestError: the result is an error (``isError``).
        OutputTooLarge: the output is over ``output_bytes``.
    """
    if result.is_error:
        cut = clip(_text_of(result.content), scrub.text, ERROR_TEXT_CHARS)
        raise GuestError(f"the remote tool {descriptor.tool!r} failed: {cut}", details={"server": descriptor.origin})
    output = scrub.text(_output_text(result))
    size = len(output.encode("utf-8", "surrogatepass"))
    if size > output_bytes:
        raise OutputTooLarge(
            f"the remote tool's output is {size} bytes, over the {output_bytes}-byte limit",
            details={"server": descriptor.origin, "limit_bytes": output_bytes},
        )
    return output


def _call_read(
    descriptor: Descriptor,
    arguments: dict[str, Any],
    timeout_ms: int,
    output_bytes: int,
    principal: str | None = None,
    home: Path | None = None,
) -> str:
    """A read tool's call (``resources/read``, ``prompts/get``, ``completion/complete``; see
    ``glovebox.remote._resources``): one exchange under the same deadline and caps as a tool call."""
    from ._resources import read_output, read_request

    work = read_request(descriptor.method, arguments)
    secrets = read_secrets(descriptor.url, descriptor.headers, principal, home)
    result = _exchange(descriptor.url, secrets, output_bytes + PROTOCOL_OVERHEAD_BYTES, timeout_ms / 1000, work)
    return read_output(result, secrets[1], output_bytes, descriptor.origin)


def _text_of(content: list[Any]) -> str:
    return "\n".join(block.text for block in content if getattr(block, "type", None) == "text")


def _output_text(result: Any) -> str:
    if result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    blocks = result.content
    if len(blocks) == 1 and getattr(blocks[0], "type", None) == "text":
        text: str = blocks[0].text
        try:
            json.loads(text)
        except ValueError:
            return json.dumps(text, ensure_ascii=False)
        return text
    dumped = [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in blocks]
    return json.dumps({"content": dumped}, ensure_ascii=False)


# -- listing (import) ---------------------------------------------------------------

#: Pages of ``tools/list`` an import follows, and the tools it accepts.
MAX_PAGES = 100
MAX_TOOLS = 1000


@dataclass(frozen=True)
class ListedTool:
    """One tool as a server lists it, scrubbed of the secrets sent to the server."""

    name: str
    description: str
    input_schema: Any
    output_schema: Any


@dataclass(frozen=True)
class Listing:
    """What a server says about itself and its tools (scrubbed)."""

    server_name: str
    tools: list[ListedTool]


async def list_all_tools(client: Client) -> tuple[str, list[Any]]:
    """The server's name and every tool it lists, page after page (up to ``MAX_PAGES``; a listing past
    ``MAX_TOOLS`` stops early, and the caller refuses it)."""
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None or len(tools) > MAX_TOOLS:
            break
    info = client.server_info
    return (info.name if info is not None else ""), tools


def list_remote(
    url: str, headers: HeaderSecrets, timeout_s: float, limit_bytes: int, home: Path | None = None
) -> Listing:
    """Every tool the server at ``url`` lists (all pages), within one deadline and byte cap, scrubbed.

    ``home``: the importing Runtime's home, whose ``default`` connections are sent (None: ``GLOVEBOX_HOME``).

    Raises:
        UpstreamError, CallTimeout, OutputTooLarge: the server cannot be listed.
        InvalidManifest: a tool's name holds a secret sent to the server.
    """
    secrets = read_secrets(url, headers, None, home)
    name, tools = _exchange(url, secrets, limit_bytes, timeout_s, list_all_tools)
    if len(tools) > MAX_TOOLS:
        raise UpstreamError(f"the remote MCP server {origin_of(url)} lists more than {MAX_TOOLS} tools")
    scrub = secrets[1]
    return Listing(scrub.text(name), [_scrubbed(tool, index, scrub, url) for index, tool in enumerate(tools)])


def list_catalog(
    url: str, headers: HeaderSecrets, timeout_s: float, limit_bytes: int, home: Path | None = None
) -> Catalog:
    """The resources, templates and prompts the server at ``url`` lists (``glovebox.remote._resources``),
    within one deadline and byte cap, scrubbed. ``home``: as :func:`list_remote`'s.

    Raises:
        UpstreamError, CallTimeout, OutputTooLarge: the server cannot be listed.
    """
    from ._resources import checked, listed

    secrets = read_secrets(url, headers, None, home)
    return checked(_exchange(url, secrets, limit_bytes, timeout_s, listed), secrets[1], origin_of(url))


def _scrubbed(tool: Any, index: int, scrub: Scrubber, url: str) -> ListedTool:
    """A listed tool with every string of its description and schemas scrubbed; refused if its name holds a secret."""
    if scrub.text(tool.name) != tool.name:
        raise InvalidManifest(
            f"the remote tool #{index + 1} of {origin_of(url)} has a name holding a secret the host sends "
            "to the server; refusing the import",
            details={"server": origin_of(url), "tool_index": index + 1},
        )
    return ListedTool(
        name=tool.name,
        description=scrub.text(tool.description or ""),
        input_schema=scrub.data(tool.input_schema),
        output_schema=scrub.data(tool.output_schema),
    )
