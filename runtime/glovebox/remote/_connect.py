"""Opening an MCP client to a server, over streamable HTTP or stdio, with the host's caps and trace rules.

:func:`connect` is the one place a client is made for a session (and for an
import's one-shot listing): the official SDK's ``Client`` over

- streamable HTTP: an httpx client with no settings from the environment, the
  secret-carrying headers, no redirects followed elsewhere, every response to a
  POST counted against a byte budget (the current call's, else one per response;
  the session's standing GET stream is bounded per event, by the SDK) and every
  message's trace context rewritten (see ``glovebox.remote._proxy``);
- stdio: the server's child process (see :mod:`._stdio`), under bubblewrap
  when the descriptor's sandbox says so (see :mod:`._bwrap`); when the call's
  grant has HTTP rules, with the host's egress proxy (see :mod:`._egress`) as
  its one way out, its requests recorded in each in-flight call's scope.

The byte budget and trace context of the call a message belongs to travel in
:data:`CURRENT` (a context variable): the SDK sends each message in its
sender's context, so the transport finds the call that sent it.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._proxy import Descriptor, _Budget, _retraced

if TYPE_CHECKING:
    import httpx2
    from mcp import Client

__all__ = ["CURRENT", "CallScope", "Link", "connect"]


@dataclass
class CallScope:
    """What the messages of one call carry: its byte budget and its trace context."""

    budget: _Budget
    trace: Mapping[str, str] | None = None
    #: What a sandboxed stdio server's egress proxy recorded while the call was in flight.
    egress: list[dict[str, Any]] = field(default_factory=list)
    #: Requests the egress proxy let through while the call was in flight (``http_limits.max_requests``).
    requests: int = 0


#: The call whose messages are being sent (None: a session's own traffic, a listing).
CURRENT: contextvars.ContextVar[CallScope | None] = contextvars.ContextVar("glovebox_mcp_call", default=None)


@dataclass
class Link:
    """One connection's facts the session keeps: its per-response cap, whether the server forgot it."""

    limit_bytes: int
    #: Set when an HTTP server answered 404 to a request carrying our session id (the session expired).
    expired: bool = False
    #: Set by the stdio transport when the server's output ended (the process died or closed it).
    exited: Any = None
    #: Set when a stdio server wrote a line over the cap (the session ends).
    too_long: bool = False
    #: What a sandboxed stdio server may reach through the egress proxy (an ``EgressGrant``; no rules: no network).
    http: Any = ()
    #: The calls in flight on the session (their scopes get the egress proxy's entries).
    scopes: list[CallScope] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, entry: dict[str, Any]) -> None:
        """Give one egress entry to every call in flight (called on the proxy's threads)."""
        for scope in list(self.scopes):
            scope.egress.append(entry)

    def admit(self, max_requests: int) -> bool:
        """Whether the proxy may let one more request through: some call in flight has made fewer than
        ``max_requests`` (each such call counts it); with none in flight, yes (it counts against none)."""
        with self._lock:
            scopes = list(self.scopes)
            room = [scope for scope in scopes if scope.requests < max_requests]
            if scopes and not room:
                return False
            for scope in room:
                scope.requests += 1
            return True


def _http_client(link: Link, headers: Mapping[str, str], timeout_s: float | None) -> httpx2.AsyncClient:
    import httpx2

    class CappedStream(httpx2.AsyncByteStream):
        def __init__(self, inner: httpx2.AsyncByteStream, budget: _Budget) -> None:
            self._inner = inner
            self._budget = budget

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self._inner:
                self._budget.spend(len(chunk))
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    class CappedTransport(httpx2.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            scope = CURRENT.get()
            budget = scope.budget if scope is not None else _Budget(link.limit_bytes)
            response = await super().handle_async_request(_retraced(request, scope.trace if scope else None))
            if response.status_code == 404 and "mcp-session-id" in request.headers:
                link.expired = True
            if request.method == "GET":  # the session's standing stream: only each event is capped (the SDK's cap)
                return response
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            return httpx2.Response(
                response.status_code,
                headers=response.headers,
                stream=CappedStream(response.stream, budget),
                extensions=response.extensions,
            )

    return httpx2.AsyncClient(
        transport=CappedTransport(), headers=dict(headers), timeout=timeout_s, trust_env=False, follow_redirects=False
    )


@asynccontextmanager
async def connect(
    descriptor: Descriptor, values: Mapping[str, str], link: Link, workdir: Path | None, home: Path | None
) -> AsyncIterator[Client]:
    """An initialised client to ``descriptor``'s server (``values``: its header or environment secrets)."""
    from mcp import Client

    if descriptor.command:
        assert workdir is not None and home is not None
        transport = _stdio(descriptor, values, link, workdir, home)
        async with Client(transport, cache=None, mode="legacy") as client:
            yield client
        return
    from mcp.client.streamable_http import streamable_http_client

    async with _http_client(link, values, None) as http:
        stream = streamable_http_client(descriptor.url, http_client=http, max_sse_event_size=link.limit_bytes + 1)
        async with Client(stream, cache=None) as client:
            yield client


def _stdio(descriptor: Descriptor, secrets: Mapping[str, str], link: Link, workdir: Path, home: Path) -> Any:
    import anyio

    from . import _bwrap
    from ._stdio import child_env, stdio_transport, with_workdir

    argv = [with_workdir(part, workdir) for part in descriptor.command or []]
    sandboxed = sandbox_of(descriptor) == "bwrap"
    tmp = "/tmp" if sandboxed else str(workdir / ".tmp")
    if not sandboxed:
        (workdir / ".tmp").mkdir(exist_ok=True)
    env = child_env(argv[0], workdir, tmp, descriptor.env, secrets)
    proxy = None
    if sandboxed:
        if link.http:
            from ._egress import EgressProxy

            proxy = EgressProxy(link.http, link.record, link.admit)
        argv = _bwrap.wrap(argv, workdir, home, proxy.socket_path if proxy is not None else None)
    link.exited = anyio.Event()

    def too_long() -> None:
        link.too_long = True

    return _with_proxy(stdio_transport(argv, env, workdir, link.limit_bytes, link.exited, too_long), proxy)


@asynccontextmanager
async def _with_proxy(transport: Any, proxy: Any) -> AsyncIterator[Any]:
    """``transport``, with the egress proxy (if any) closed once the server's process is gone."""
    try:
        async with transport as streams:
            yield streams
    finally:
        if proxy is not None:
            proxy.close()


def sandbox_of(descriptor: Descriptor) -> str:
    """``bwrap`` or ``none``: what a stdio server of ``descriptor`` runs under on this machine.

    Raises:
        UpstreamError: (not retryable) the descriptor asks for bubblewrap and this machine cannot run it.
    """
    from ..core._errors import UpstreamError
    from . import _bwrap

    if descriptor.sandbox == "none":
        return "none"
    if _bwrap.available():
        return "bwrap"
    if descriptor.sandbox == "bwrap":
        raise UpstreamError(
            f"the MCP server {descriptor.origin} must run under bubblewrap, which cannot run on this machine",
            details={"server": descriptor.origin, "sandbox": "bwrap"},
            retryable=False,
        )
    return "none"
