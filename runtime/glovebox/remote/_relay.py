"""What the caller of an MCP server's tool hears and says while it runs: progress, and cancellation.

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

A caller that gives up on a call (its own client cancelled it) says so with a
:class:`Cancellation` made current by :func:`cancel_with`: ``cancel()``, from any
thread, cancels the MCP tool calls in flight in that block; the server is sent
``notifications/cancelled`` and the call ends ``upstream_error`` with
``details.cancelled`` true (a call already answered is not affected)::

    cancellation = Cancellation()
    with cancel_with(cancellation):
        runtime.call(...)            # another thread: cancellation.cancel()
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..core._carried import carried

__all__ = ["Cancellation", "ProgressCallback", "cancel_with", "current_cancellation", "current_relay", "relay_progress"]

logger = logging.getLogger("glovebox")

#: ``(progress, total, message)``: one progress notification of a call.
ProgressCallback = Callable[[float, "float | None", "str | None"], None]
_RELAY: contextvars.ContextVar[ProgressCallback | None] = carried(
    contextvars.ContextVar("glovebox_progress", default=None)
)


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


class Cancellation:
    """A caller's "stop": cancels the MCP tool calls that run under it (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._callbacks: list[Callable[[], object]] = []

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        """Cancel every call in flight under this cancellation, and any started under it later. Idempotent."""
        with self._lock:
            self._cancelled = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Run ``callback`` on :meth:`cancel` (at once when already cancelled); returns what unregisters it."""
        with self._lock:
            if not self._cancelled:
                self._callbacks.append(callback)

                def forget() -> None:
                    with self._lock:
                        if callback in self._callbacks:
                            self._callbacks.remove(callback)

                return forget
        callback()
        return lambda: None


_CANCEL: contextvars.ContextVar[Cancellation | None] = carried(contextvars.ContextVar("glovebox_cancel", default=None))


@contextmanager
def cancel_with(cancellation: Cancellation) -> Iterator[None]:
    """Let ``cancellation.cancel()`` cancel the MCP tool calls made in this block."""
    if not isinstance(cancellation, Cancellation):
        raise TypeError(f"cancellation must be a Cancellation, not {type(cancellation).__name__}")
    token = _CANCEL.set(cancellation)
    try:
        yield
    finally:
        _CANCEL.reset(token)


def current_cancellation() -> Cancellation | None:
    """The cancellation the current call runs under (None: none)."""
    return _CANCEL.get()
