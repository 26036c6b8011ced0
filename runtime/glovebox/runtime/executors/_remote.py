"""``McpRemoteExecutor``: a ``mcp-remote`` tool's call, proxied to its server (see ``glovebox.remote._proxy``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from urllib.parse import urlsplit

from ...guards import BreakerBoard, HostBreakers
from ...registry._registry import Registry
from ...sandbox._compute import waiting
from .._call import Call
from ._base import Executor

__all__ = ["McpRemoteExecutor"]


class McpRemoteExecutor(Executor):
    """Sends the call's arguments to the remote server's tool; its answer is the output."""

    def __init__(self, registry: Registry, board: Callable[[], BreakerBoard]) -> None:
        self._registry = registry
        self._board = board

    def execute(self, call: Call) -> str:
        from ...remote._proxy import call_remote, load_descriptor  # the mcp SDK only when a remote tool is called

        state = call.state
        assert state is not None
        info, decision = state.resolved()
        descriptor = load_descriptor(self._registry.descriptor_path(info.digest), info.digest)
        state.meta["remote"] = {"url": descriptor.origin, "tool": descriptor.tool}
        limits = decision.limits
        exchange = functools.partial(call_remote, descriptor, call.input, limits.timeout_ms, limits.output_bytes)
        breaker, host = decision.guards.breaker, urlsplit(descriptor.origin).hostname
        with waiting():  # the exchange is network I/O: the compute slot is free for others meanwhile
            if breaker is not None and "host" in breaker.scopes and host:  # the server's host has a breaker too
                return HostBreakers(self._board(), breaker).exchange(host, exchange)
            return exchange()
