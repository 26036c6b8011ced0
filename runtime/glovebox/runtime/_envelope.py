"""The one place a call's failure becomes a ``CallResult``.

Every door and every runner ends a failed call here: the pipeline
(:mod:`._runtime`), a call refused at admission, a call whose audit row could
not be written, a ProcessPool worker that died, a Ray replica that was lost
or a router with no free replica. The rules:

- a ``CallError`` is the answer as it is;
- an :class:`~glovebox.InternalError` keeps its message (written for the
  caller) with the call id appended, and its ``retryable``; its ``details`` go
  to the log, never to the caller, except those the runner names as public
  (``public``: who ran the call, such as ``worker_pid``);
- any other exception is a bug: it is logged with its traceback and the caller
  sees an opaque ``internal_error`` carrying only the call id.
"""

from __future__ import annotations

import logging
import os
import threading
from contextvars import ContextVar
from typing import Any

from ..core._errors import CallError, InternalError
from ..core._jsonlimits import escape_surrogates
from ..model._result import CallResult

__all__ = ["RUN_CONTEXT", "failure", "new_call_id", "new_meta"]

logger = logging.getLogger("glovebox")

#: Set while a run's program makes a nested call: ``{"run_id", "step"}``, copied into ``meta.run``
#: (and so into the call's audit row, ``egress.run``).
RUN_CONTEXT: ContextVar[dict[str, Any] | None] = ContextVar("glovebox_run", default=None)


class _RandomBytes(threading.local):
    """``os.urandom`` bytes drawn :data:`_ID_BATCH` call ids at a time, per thread."""

    def __init__(self) -> None:
        self.raw = b""
        self.at = 0


#: Call ids drawn per ``os.urandom`` (one system call, not one per call).
_ID_BATCH = 64
_random = _RandomBytes()


def _forked() -> None:
    """A child process draws its own bytes: never ids its parent has drawn, or will."""
    global _random
    _random = _RandomBytes()


os.register_at_fork(after_in_child=_forked)


def new_call_id() -> str:
    """A fresh call id: the 32 hex digits of a random (version 4) UUID, as ``uuid.uuid4().hex`` gives.

    The same 122 random bits from ``os.urandom`` and the same version and variant
    bits, without building a ``uuid.UUID`` on every call. The bytes are drawn for
    :data:`_ID_BATCH` ids at once by each thread (each id's bytes given once, and a
    forked child starts afresh), so most calls make no system call.

    >>> import uuid
    >>> made = uuid.UUID(hex=new_call_id())
    >>> made.version, made.variant == uuid.RFC_4122
    (4, True)
    """
    drawn = _random
    at = drawn.at
    if at == 0:
        drawn.raw = os.urandom(16 * _ID_BATCH)
    drawn.at = (at + 16) % (16 * _ID_BATCH)
    raw = bytearray(drawn.raw[at : at + 16])
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
    return raw.hex()


def new_meta(name: str, principal: str | None, call_id: str | None = None) -> dict[str, Any]:
    """The ``meta`` a call starts with: its id (a new one unless given), the names asked for, nothing run yet."""
    who = principal or "anonymous"
    meta: dict[str, Any] = {
        "call_id": call_id or new_call_id(),
        "tool": escape_surrogates(name),
        "version": None,
        "digest": None,
        "principal": escape_surrogates(who) if isinstance(who, str) else who,
        "duration_ms": 0.0,
        "fuel_used": 0,
    }
    run = RUN_CONTEXT.get()
    if run is not None:
        meta["run"] = dict(run)
    return meta


def failure(error: BaseException, meta: dict[str, Any], *, public: dict[str, Any] | None = None) -> CallResult:
    """The result of a call that failed with ``error`` (see the module docstring for the rules)."""
    call_id = meta["call_id"]
    if isinstance(error, InternalError):
        logger.error("call %s failed inside the host: %s %s", call_id, error.message, error.details or "")
        opaque = InternalError(
            f"{error.message} (call_id {call_id})",
            details={"call_id": call_id, **(public or {})},
            retryable=error.retryable,
        )
        return CallResult(ok=False, error=opaque, meta=meta)
    if isinstance(error, CallError):
        return CallResult(ok=False, error=error, meta=meta)
    logger.error("internal error in call %s", call_id, exc_info=error)
    opaque = InternalError(f"internal error (call_id {call_id})", details={"call_id": call_id, **(public or {})})
    return CallResult(ok=False, error=opaque, meta=meta)
