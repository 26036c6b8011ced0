"""What a call says over MCP besides its output: content blocks, log lines and progress.

Content: a tool whose output schema carries ``"x-glovebox-content": true`` answers
``{"content": [<MCP content blocks>]}`` (text, image, audio, resource links and
embedded resources, as MCP defines them). ``glovebox mcp`` answers those blocks
as the call's ``content``, followed by the envelope as text with its ``output``
left out (the blocks are the output); such a tool declares no ``outputSchema``
and its result carries no ``structuredContent``. An output whose blocks are not
MCP content blocks is answered as any other output (the envelope as text).

Log lines: a call's log lines (the guest's ``log`` calls, kept in ``meta.logs``
within the call's log budget) are sent to a client that asked for them with
``logging/setLevel`` (or, in the 2026-07-28 protocol, with the request's
``io.modelcontextprotocol/logLevel``), as ``notifications/message`` at or above
its level (``warn`` is MCP's ``warning``; logger ``glovebox``), on the request's
stream before the call's result. :class:`LiveRelay` sends each one while the call
runs, as the guest logs it (``glovebox.sandbox._callstate.listen_logs``), in order;
a call that ran in another process (a worker of ``--processes N``) has its lines
sent when it ends, from ``meta.logs``.

Progress: a log line whose message is a JSON object with a number ``progress``
(and optionally a number ``total`` and a string ``message``) is a progress
report: sent as ``notifications/progress`` when the client gave a progress
token, and never as a log line; so is each progress notification of an imported
MCP server's tool (``glovebox.remote.relay_progress``), as it arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
from pydantic import TypeAdapter, ValidationError

from ..remote._relay import relay_progress
from ..sandbox._callstate import listen_logs

__all__ = [
    "CONTENT_MARK",
    "LEVELS",
    "LiveRelay",
    "content_blocks",
    "is_content_tool",
    "progress_report",
    "relay",
    "wire_level",
]

#: The output-schema keyword that makes a tool's output MCP content blocks.
CONTENT_MARK = "x-glovebox-content"
#: MCP's log levels, lowest first.
LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_GUEST_LEVELS: dict[str, types.LoggingLevel] = {"debug": "debug", "info": "info", "warn": "warning", "error": "error"}
_BLOCKS: TypeAdapter[list[types.ContentBlock]] = TypeAdapter(list[types.ContentBlock])


def is_content_tool(output_schema: Any) -> bool:
    """Whether a tool's output is MCP content blocks (its output schema says so)."""
    return isinstance(output_schema, dict) and output_schema.get(CONTENT_MARK) is True


def content_blocks(output: Any) -> list[types.ContentBlock] | None:
    """The MCP content blocks of a content tool's output, or None when they are not blocks.

    >>> [b.type for b in content_blocks({"content": [{"type": "text", "text": "hi"}]})]
    ['text']
    >>> content_blocks({"content": [{"type": "video"}]}) is None
    True
    """
    if not isinstance(output, dict) or not isinstance(output.get("content"), list):
        return None
    try:
        return _BLOCKS.validate_python(output["content"])
    except ValidationError:
        return None


def wire_level(level: str) -> types.LoggingLevel:
    """The MCP level of a guest's log level (``warn`` is ``warning``; anything else ``info``)."""
    return _GUEST_LEVELS.get(level, "info")


def progress_report(message: str) -> tuple[float, float | None, str | None] | None:
    """(progress, total, message) when a log line is a progress report, else None.

    >>> progress_report('{"progress": 50, "total": 100}')
    (50.0, 100.0, None)
    >>> progress_report("50%") is None
    True
    """
    if not message.startswith("{"):
        return None
    try:
        value = json.loads(message)
    except ValueError:
        return None
    if not isinstance(value, dict) or not _number(value.get("progress")):
        return None
    total, text = value.get("total"), value.get("message")
    return (
        float(value["progress"]),
        float(total) if isinstance(total, int | float) and _number(total) else None,
        text if isinstance(text, str) else None,
    )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


async def relay(ctx: Any, logs: Any, level: types.LoggingLevel | None) -> None:
    """Send a call's progress reports and (when ``level`` is set) its log lines at or above it."""
    if not isinstance(logs, list) or ctx is None:
        return
    for line in logs:
        if isinstance(line, dict) and isinstance(line.get("message"), str):
            await _send_line(ctx, str(line.get("level")), line["message"], level)


async def _send_line(ctx: Any, guest_level: str, message: str, level: types.LoggingLevel | None) -> None:
    report = progress_report(message)
    if report is not None:
        await ctx.session.report_progress(*report)
        return
    wire = wire_level(guest_level)
    if level is not None and LEVELS.index(wire) >= LEVELS.index(level):
        # As a plain notification on the request's stream: send_log_message is deprecated by the
        # 2026-07-28 protocol, whose clients ask per request (LOG_LEVEL_META_KEY) instead.
        params = types.LoggingMessageNotificationParams(level=wire, data=message, logger="glovebox")
        notification = types.LoggingMessageNotification(params=params)
        await ctx.session.send_notification(notification, related_request_id=ctx.request_id)


class LiveRelay:
    """A call's log lines and progress, sent to the client of ``ctx`` while the call runs.

    ``async with relay.running(): await runtime.acall(...)``, then ``await relay.finish(meta.logs)``:
    the lines heard while the call ran were sent in order before ``running`` ends; ``finish``
    sends those that were not (a call run in another process is heard by no one here).
    """

    def __init__(self, ctx: Any, level: types.LoggingLevel | None) -> None:
        self.ctx = ctx
        self.level = level
        self.sent = 0
        self._queue: asyncio.Queue[tuple[Any, ...] | None] | None = None

    async def flushed(self) -> None:
        """Wait until every line and report heard so far was sent (a request to the client goes after them)."""
        if self._queue is not None:
            await self._queue.join()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        if self.ctx is None or getattr(self.ctx, "session", None) is None:
            yield
            return
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[Any, ...] | None] = asyncio.Queue()
        self._queue = queue

        def put(item: tuple[Any, ...]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody to tell
                loop.call_soon_threadsafe(queue.put_nowait, item)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._drain, queue)
            try:
                with (
                    listen_logs(lambda level, message: put(("log", level, message))),
                    relay_progress(lambda progress, total, message: put(("progress", progress, total, message))),
                ):
                    yield
            finally:
                self._queue = None
                queue.put_nowait(None)

    async def _drain(self, queue: asyncio.Queue[tuple[Any, ...] | None]) -> None:
        while (item := await queue.get()) is not None:
            try:
                if item[0] == "log":
                    self.sent += 1
                    await _send_line(self.ctx, item[1], item[2], self.level)
                else:
                    await self.ctx.session.report_progress(*item[1:])
            except Exception:  # a client gone mid-call: the call goes on, its result says the rest
                pass
            finally:
                queue.task_done()

    async def finish(self, logs: Any) -> None:
        """Send the lines of ``logs`` (``meta.logs``) that were not heard while the call ran."""
        if isinstance(logs, list):
            await relay(self.ctx, logs[self.sent :], self.level)
