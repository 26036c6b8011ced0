"""Where the progress of an MCP server's tool call goes besides the call's deadline and its span.

A server that sends ``notifications/progress`` for a call extends the call's
deadline (see :mod:`._sessions`) and adds a ``glovebox.progress`` event to the
call's span. Whoever made the call can also receive each notification: wrap
the call in :func:`relay_progress` (glovebox's own MCP server does, to relay
them to its client under the client's progress token)::

    with relay_progress(lambda progress, total, message: ...):
        runtime.call("everything-longrunningoperation", {...}, principal="agent")

The callback runs on the session pool's thread, must return quickly and never
raises into the call (an exception is logged and dropped). It is carried by a
context variable, so it follows the call into the thread that runs it
(``Runtime.call``, ``Runtime.acall``); a call run in another process (a
ProcessPool's worker, Ray) reports no progress to it.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["ProgressCallback", "current_relay", "relay_progress"]

logger = logging.getLogger("glovebox")

#: ``(progress, total, message)``: one progress notification of a call.
ProgressCallback = Callable[[float, "float | None", "str | None"], None]
_RELAY: contextvars.ContextVar[ProgressCallback | None] = contextvars.ContextVar("glovebox_progress", default=None)


@contextmanager
def relay_progress(callback: ProgressCallback) -> Iterator[None]:
    """Send the progress notifications of the MCP tool calls made in this block to ``callback``."""
    if not callable(callback):
        raise TypeError(f"callback must be callable, not {type(callback).__name__}")
    token = _RELAY.set(callback)
    try:
        yield
    finally:
        _RELAY.reset(token)


def current_relay() -> ProgressCallback | None:
    """The callback the current call's progress goes to (None: nobody asked)."""
    return _RELAY.get()


def safely(callback: ProgressCallback) -> ProgressCallback:
    """``callback`` with its exceptions logged and dropped."""

    def call(progress: float, total: float | None, message: str | None) -> None:
        try:
            callback(progress, total, message)
        except Exception:
            logger.exception("a progress relay callback raised; the notification is dropped")

    return call
