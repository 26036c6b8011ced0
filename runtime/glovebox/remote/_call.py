"""One call of an MCP server's tool (remote or local) on the session of its (server, principal).

:func:`call_tool` is what the executor runs: it reads the secrets the
descriptor names (headers for an HTTP server, environment variables for a
stdio one), sends ``tools/call`` on the pooled session (see :mod:`._sessions`)
with a progress token, and turns the answer into the output text or the one
call error that says what went wrong (see ``glovebox.remote._proxy``).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core._errors import CallError, OutputTooLarge, UpstreamError
from ..telemetry import _tracing
from ._connect import CallScope
from ._headers import read_secrets
from ._proxy import PROTOCOL_OVERHEAD_BYTES, Descriptor, Listing, _Budget, _scrubbed, _translate, output_of
from ._sessions import GRACE_S, Progress, SessionPool
from ._stdio import LineTooLong

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["call_tool", "list_stdio"]


def call_tool(
    pool: SessionPool,
    descriptor: Descriptor,
    principal: str,
    arguments: dict[str, Any],
    timeout_ms: int,
    output_bytes: int,
    ceiling_ms: int | None = None,
    progress: Progress | None = None,
    http: Any = (),
    record: Callable[[dict[str, Any]], None] | None = None,
) -> str:
    """Call the tool on ``principal``'s session to its server; its output as JSON text.

    ``ceiling_ms`` (at least ``timeout_ms``): how far progress notifications may push the deadline.
    ``http``: the egress grant of the call (``_egress.EgressGrant``: a sandboxed stdio server reaches its
    rules through the egress proxy, which adds its secrets and applies its limits); ``record`` gets each
    request the proxy saw while the call was in flight.

    Raises:
        CallTimeout, OutputTooLarge, GuestError, UpstreamError: see ``glovebox.remote._proxy``.
    """
    values, scrub = read_secrets(descriptor.origin, descriptor.headers or descriptor.env_secrets, principal, pool.home)
    budget = _Budget(2 * output_bytes + PROTOCOL_OVERHEAD_BYTES)
    trace = _tracing.carrier() if descriptor.propagate_trace else None
    scope = CallScope(budget, trace)
    timeout_s = timeout_ms / 1000
    ceiling_s = max(ceiling_ms or timeout_ms, timeout_ms) / 1000

    async def work(client: Client, extend: Progress) -> Any:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            extend(progress, total, message)

        return await client.call_tool(descriptor.tool, arguments, progress_callback=on_progress)

    coro = pool.call(descriptor, principal, values, scope, work, timeout_s, ceiling_s, progress, http)
    try:
        result = pool.run(coro, pool.start_s + 2 * ceiling_s + GRACE_S)
    except CallError:
        raise
    except concurrent.futures.CancelledError as exc:
        message = f"the call to the MCP server {descriptor.origin} was cancelled by its caller"
        raise UpstreamError(message, details={"server": descriptor.origin, "cancelled": True}, retryable=False) from exc
    except Exception as exc:
        raise _error(exc, budget, descriptor, scrub) from exc
    finally:
        if record is not None:
            for entry in list(scope.egress):
                record(entry)
    return output_of(result, descriptor, scrub, output_bytes)


def _error(exc: Exception, budget: _Budget, descriptor: Descriptor, scrub: Any) -> CallError:
    if isinstance(exc, LineTooLong):
        message = f"the MCP server {descriptor.origin} sent a message over {budget.limit} bytes"
        return OutputTooLarge(message, details={"server": descriptor.origin, "limit_bytes": budget.limit})
    return _translate(exc, budget, descriptor.origin, scrub)


def list_stdio(pool: SessionPool, descriptor: Descriptor, timeout_s: float, limit_bytes: int) -> Listing:
    """What a stdio server lists (scrubbed like ``list_remote``), on a session of principal ``glovebox-import``.

    Raises:
        UpstreamError, CallTimeout, OutputTooLarge: the server cannot be listed.
        InvalidManifest: a tool's name holds a secret the server is given.
    """
    from ._proxy import MAX_TOOLS, list_all_tools

    values, scrub = read_secrets(descriptor.origin, descriptor.env_secrets, None, pool.home)
    budget = _Budget(limit_bytes)

    async def work(client: Client, extend: Progress) -> tuple[str, list[Any]]:
        return await list_all_tools(client)

    coro = pool.call(descriptor, "glovebox-import", values, CallScope(budget), work, timeout_s, timeout_s)
    try:
        name, tools = pool.run(coro, pool.start_s + 2 * timeout_s + GRACE_S)
    except CallError:
        raise
    except Exception as exc:
        raise _error(exc, budget, descriptor, scrub) from exc
    if len(tools) > MAX_TOOLS:
        raise UpstreamError(f"the MCP server {descriptor.origin} lists more than {MAX_TOOLS} tools")
    listed = [_scrubbed(tool, index, scrub, descriptor.url) for index, tool in enumerate(tools)]
    return Listing(scrub.text(name), listed)
