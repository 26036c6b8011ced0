"""A tool's requests to the MCP client of its call: sampling and elicitation, forwarded.

A tool granted the ``client`` capability (``glovebox.capabilities.client``) asks
through ``sample``/``elicit``; ``glovebox mcp`` puts a :class:`ClientRelay` for the
client of each ``tools/call`` in force around the call, and the relay sends the
request to that client as ``sampling/createMessage`` or ``elicitation/create``,
related to the ``tools/call`` (so over HTTP it rides the call's SSE stream), and
waits for its answer within the call's deadline. The call runs on a thread of
the Runtime; the relay hands the request to the server's event loop and blocks
that thread, never the loop.

It answers ``unsupported`` when the client did not declare the capability
(``sampling``, ``elicitation``), when it speaks the 2026-07-28 protocol (a request
there is answered only when the client retries the call, which a running sandbox
cannot wait for), and from a call that runs in another process (a worker of
``--processes N``: the relay does not cross processes). A request that is not of
MCP's shape is ``invalid``; an error from the client ``failed``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import warnings
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ..capabilities.client import ClientRequestError, asking_client

__all__ = ["ClientRelay", "relaying_client"]

_NEEDS = {
    "sampling/createMessage": ("sampling", types.ClientCapabilities(sampling=types.SamplingCapability())),
    "elicitation/create": ("elicitation", types.ClientCapabilities(elicitation=types.ElicitationCapability())),
}


class ClientRelay:
    """Answers one call's client requests by asking the MCP client of its ``tools/call`` (``ctx``)."""

    def __init__(
        self, ctx: Any, loop: asyncio.AbstractEventLoop, before: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        self.ctx = ctx
        self.loop = loop
        self.before = before  # awaited before each request: the call's log lines and progress go first

    def ask(self, method: str, params: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send ``method`` to the client and wait for its result (see the module)."""
        name, needed = _NEEDS[method]
        if self.ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            raise ClientRequestError(
                "unsupported", f"a 2026-07-28 client answers {name} only between retries of a call, not during one"
            )
        if not self.ctx.session.check_client_capability(needed):
            raise ClientRequestError("unsupported", f"the MCP client did not declare the {name} capability")
        request = _request(method, params)
        job = asyncio.run_coroutine_threadsafe(self._send(request, method, timeout_s), self.loop)
        try:
            return job.result(timeout_s)
        except concurrent.futures.TimeoutError:
            job.cancel()
            raise ClientRequestError("timeout", f"the MCP client did not answer {method} in time") from None

    async def _send(self, request: Any, method: str, timeout_s: float) -> dict[str, Any]:
        result_type: Any = types.CreateMessageResult if method == "sampling/createMessage" else types.ElicitResult
        if self.before is not None:
            await self.before()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)  # sampling: deprecated by 2026-07-28 only
                result = await self.ctx.session.send_request(
                    request,
                    result_type,
                    request_read_timeout_seconds=timeout_s,
                    metadata=ServerMessageMetadata(related_request_id=self.ctx.request_id),
                )
        except ValidationError:
            raise ClientRequestError("failed", f"the MCP client's answer to {method} is not of MCP's shape") from None
        except Exception as exc:  # the client answered an error, or went away
            raise ClientRequestError("failed", f"the MCP client answered {method} with an error: {exc}") from None
        dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return dumped


def _request(method: str, params: dict[str, Any]) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            if method == "sampling/createMessage":
                return types.CreateMessageRequest(params=types.CreateMessageRequestParams.model_validate(params))
            return types.ElicitRequest(params=types.ElicitRequestFormParams.model_validate(params))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        raise ClientRequestError("invalid", f"the request is not MCP's {method} params: {problems}") from None


@contextlib.contextmanager
def relaying_client(ctx: Any, before: Callable[[], Awaitable[None]] | None = None) -> Iterator[None]:
    """Let the calls made in this block (on this event loop) ask the client of ``ctx``; ``before`` is
    awaited before each request is sent (what the call said so far reaches the client first)."""
    if ctx is None or getattr(ctx, "session", None) is None:
        yield
        return
    with asking_client(ClientRelay(ctx, asyncio.get_running_loop(), before)):
        yield
