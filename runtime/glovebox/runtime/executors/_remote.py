"""``McpRemoteExecutor``: a ``mcp-remote`` tool's call, sent on its (server, principal) session.

The tool's server is remote (streamable HTTP) or local (stdio, a supervised
child process); either way the call goes through the executor's
:class:`~glovebox.remote._sessions.SessionPool` (see ``glovebox.remote``).
Progress notifications extend the deadline up to the decision's
``max_timeout_ms``, become ``glovebox.progress`` events on the call's span and
go to the caller's :func:`~glovebox.remote.relay_progress` callback. A local
server is given the call's granted HTTP rules (``grants.http``), which it
reaches, under bubblewrap, only through the host's egress proxy, with the
grant's ``secrets`` added and its ``http_limits`` applied there; what the
proxy saw during the call becomes the call's ``egress`` entries.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ...guards import BreakerBoard, HostBreakers
from ...model._manifest import HOST_MAXIMA
from ...registry._registry import Registry
from ...sandbox._compute import waiting
from ...telemetry import _tracing
from .._call import Call
from ._base import Executor

if TYPE_CHECKING:  # loaded when a remote tool is called, not when glovebox is imported
    from ...remote._relay import ProgressCallback
    from ...remote._sessions import SessionPool

__all__ = ["McpRemoteExecutor"]

#: Egress entries of a stdio server kept per call (the rest are counted in ``egress_dropped``).
MAX_EGRESS = 100


class McpRemoteExecutor(Executor):
    """Sends the call's arguments to the server's tool on the caller's session; its answer is the output."""

    def __init__(self, registry: Registry, board: Callable[[], BreakerBoard]) -> None:
        self._registry = registry
        self._board = board
        self._pool: SessionPool | None = None
        self._lock = threading.Lock()

    @property
    def pool(self) -> SessionPool:
        """The sessions of this Runtime's calls (made on first use)."""
        from ...remote._sessions import SessionPool

        with self._lock:
            if self._pool is None:
                self._pool = SessionPool(self._registry.home)
            return self._pool

    def execute(self, call: Call) -> str:
        from ...remote._call import call_tool  # the mcp SDK only when a remote tool is called
        from ...remote._proxy import load_descriptor

        state = call.state
        assert state is not None
        info, decision = state.resolved()
        descriptor = load_descriptor(self._registry.descriptor_path(info.digest), info.digest)
        state.meta["remote"] = {"url": descriptor.origin, "tool": descriptor.tool}
        limits = decision.limits
        ceiling = min(decision.max_timeout_ms or limits.timeout_ms, HOST_MAXIMA.timeout_ms)
        principal = str(state.meta.get("principal") or call.principal or "anonymous")
        if descriptor.method != "tools/call":  # a read tool (resources, prompts, completions): one exchange
            from ...remote._proxy import call_remote

            home = self._registry.home  # the Runtime's home: where a connection's tokens are read
            read = functools.partial(
                call_remote, descriptor, call.input, limits.timeout_ms, limits.output_bytes, principal, home
            )
            with waiting():
                return read()
        egress: list[dict[str, object]] = []
        exchange = functools.partial(
            call_tool,
            self.pool,
            descriptor,
            principal,
            call.input,
            limits.timeout_ms,
            limits.output_bytes,
            ceiling,
            _progress(),
            http=_egress(state.grants or decision.grants) if descriptor.command else (),  # its egress proxy
            record=egress.append,
        )
        breaker, host = decision.guards.breaker, urlsplit(descriptor.origin).hostname
        try:
            with waiting():  # the exchange is I/O: the compute slot is free for others meanwhile
                if breaker is not None and "host" in breaker.scopes and host:  # the server's host has a breaker too
                    return HostBreakers(self._board(), breaker).exchange(host, exchange)
                return exchange()
        finally:
            if egress:  # what a stdio server's egress proxy saw (allowed and refused requests)
                state.meta["egress"] = egress[:MAX_EGRESS]
                if len(egress) > MAX_EGRESS:
                    state.meta["egress_dropped"] = len(egress) - MAX_EGRESS
                refused = [_denial(entry) for entry in egress if entry.get("error") == "denied"]
                if refused:  # as a wasm tool's refused http-fetch requests are
                    state.meta["denials"] = refused[:MAX_EGRESS]

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


def _egress(grants: object) -> object:
    """What a stdio server's egress proxy enforces: the call's HTTP rules, limits and secrets."""
    from ...remote._egress import EgressGrant

    return EgressGrant.of(grants)


def _denial(entry: dict[str, object]) -> dict[str, object]:
    """A request the egress proxy refused, as a denial of the ``http`` capability."""
    return {"capability": "http", "method": entry["method"], "url": entry["url"], "reason": entry["reason"]}


def _progress() -> ProgressCallback | None:
    """Where this call's progress goes: its span's events and the caller's relay (None: nowhere)."""
    from ...remote._relay import current_relay, safely

    span = _tracing.current_span()
    relay = current_relay()
    if span is None and relay is None:
        return None
    sink = safely(relay) if relay is not None else None

    def report(progress: float, total: float | None, message: str | None) -> None:
        if span is not None:
            _tracing.progress_event(span, progress, total)
        if sink is not None:
            sink(progress, total, message)

    return report
