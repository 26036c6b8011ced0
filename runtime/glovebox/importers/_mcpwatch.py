"""Refresh an imported MCP server when it says its lists changed, audited, held by the widening rules.

:func:`refresh_mcp` runs ``import_mcp`` again with the import's settings and
writes one audit row (tool :data:`REFRESH_TOOL`, no registered tool can have the
name: it holds a colon), whose ``egress.remote`` says what happened: ``applied``
(with the names added, changed and removed), ``held`` (the refresh would let a
tool reach more — a new secret sent, trace context sent — and was refused, so the
tools stay as they were until an operator re-imports with ``accept_widening``), or
``failed`` (the server could not be listed: the row's error).

:func:`watch_mcp` keeps a session open to the server (the initialize handshake, so that
the server has a stream to notify on) and refreshes on each
``notifications/tools/list_changed``, ``resources/list_changed`` or
``prompts/list_changed`` (several close together make one refresh), until
cancelled. A 2026-era server that tells changes only through ``subscriptions/listen``
is not heard yet: refresh it by importing again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ..core._errors import CallError, GloveboxError, RegistrationError, UpstreamError
from ..model._result import CallResult

if TYPE_CHECKING:
    from ..runtime._runtime import Runtime

__all__ = ["REFRESH_TOOL", "refresh_mcp", "watch_mcp"]

logger = logging.getLogger("glovebox")

#: The ``tool`` of a refresh's audit row.
REFRESH_TOOL = "glovebox:refresh"
#: The ``reason`` of a refresh a server's notification started.
REASON = "list_changed"
#: How often a quiet connection is checked; the first and the longest wait before connecting again.
PING_S = 15.0
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 30.0
#: Notifications that close together make one refresh.
SETTLE_S = 0.2
_CHANGES = (
    "notifications/tools/list_changed",
    "notifications/resources/list_changed",
    "notifications/prompts/list_changed",
)


def refresh_mcp(runtime: Runtime, url: str, *, reason: str = "refresh", **settings: Any) -> CallResult:
    """Import ``url`` again with ``settings`` (``import_mcp``'s keyword arguments); audit what happened.

    Returns:
        The refresh's result (also its audit row): ok with ``status`` ``applied`` or ``held`` in
        ``meta.remote``, or failed with the reason the server could not be listed.
    """
    from ..audit._row import call_row
    from ..runtime._envelope import new_meta
    from ._mcp import import_mcp

    started = time.perf_counter()
    meta = new_meta(REFRESH_TOOL, "glovebox")
    remote: dict[str, Any] = {"server": url, "reason": reason}
    try:
        done = import_mcp(runtime, url, **settings)
    except RegistrationError as exc:  # widening_refused (held), or a listing the host cannot accept
        remote.update(status="held", code=exc.code, message=exc.message)
        result = CallResult(ok=True, output=remote, meta=meta)
    except GloveboxError as exc:
        remote.update(status="failed")
        error = exc if isinstance(exc, CallError) else UpstreamError(exc.message)
        result = CallResult(ok=False, error=error, meta=meta)
    else:
        changes = {"added": done.added, "changed": done.changed, "removed": done.removed}
        remote.update(status="applied", **{key: [str(item) for item in value] for key, value in changes.items()})
        result = CallResult(ok=True, output=remote, meta=meta)
    meta["duration_ms"] = round((time.perf_counter() - started) * 1000, 3)
    meta["remote"] = remote
    runtime.audit.append(call_row(result, None))
    logger.info("refresh of the MCP server %s: %s", url, remote["status"])
    return result


async def watch_mcp(
    runtime: Runtime, url: str, *, on_refresh: Callable[[CallResult], None] | None = None, **settings: Any
) -> None:
    """Refresh ``url`` (see :func:`refresh_mcp`) each time it says a list changed; runs until cancelled.

    A lost or refused connection (the server is pinged every :data:`PING_S`) is tried again, after
    :data:`RETRY_FIRST_S` doubling up to :data:`RETRY_MAX_S`; once back, the import is refreshed
    (reason ``reconnected``): the lists may have changed meanwhile.
    """
    import anyio

    from ..remote._headers import parse_header_secrets, read_secrets

    secrets = parse_header_secrets(url, settings.get("header_secrets") or ())
    headers = read_secrets(url, secrets, None, runtime.home)[0]
    changed = anyio.Event()

    async def heard(message: Any) -> None:
        if getattr(message, "method", None) in _CHANGES:
            changed.set()

    async def refresh(reason: str) -> None:
        result = await anyio.to_thread.run_sync(lambda: refresh_mcp(runtime, url, reason=reason, **settings))
        if on_refresh is not None:
            on_refresh(result)

    delay, lost = RETRY_FIRST_S, False
    while True:
        try:
            async with _connected(url, headers, heard) as client:
                delay = RETRY_FIRST_S
                if lost:
                    await refresh("reconnected")
                while True:
                    with anyio.move_on_after(PING_S):
                        await changed.wait()
                    if not changed.is_set():
                        with anyio.fail_after(PING_S):
                            await client.send_ping()
                        continue
                    await anyio.sleep(SETTLE_S)  # several notifications close together: one refresh
                    changed = anyio.Event()
                    await refresh(REASON)
        except Exception as exc:  # the server went away, or refused us: try again
            logger.info("watching the MCP server %s: connection lost (%s); retrying", url, type(exc).__name__)
        lost = True
        await anyio.sleep(delay)
        delay = min(2 * delay, RETRY_MAX_S)


@asynccontextmanager
async def _connected(url: str, headers: dict[str, str], heard: Any) -> AsyncIterator[Any]:
    """A handshake-era session to ``url`` (the server then has a stream to notify on)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers=headers, trust_env=False, follow_redirects=False, timeout=None) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy", cache=None, message_handler=heard) as c,
    ):
        yield c
