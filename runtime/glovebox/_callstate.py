"""The state of one call as the host functions see it, bound to the thread running it.

A host function looks up the call running on its thread with
:func:`current_call`: a capability is exactly what that call was granted,
never a process-wide grant. :class:`ActiveCall` binds a state for one call.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from ._world import OOM_MARKER

__all__ = ["ActiveCall", "CallState", "Fetcher", "current_call"]

_local = threading.local()


class Fetcher(Protocol):
    """What a call's HTTP capability offers the ``http-fetch`` host function."""

    def fetch(self, request: Any, state: CallState) -> Any:
        """Perform ``request`` if the grant allows it; return a response record or a typed error."""

    def close(self) -> None:
        """Release connections."""


@dataclass
class CallState:
    """What one call may do and what it did, seen by the host functions."""

    deadline: float
    log_limit_bytes: int
    logs: list[dict[str, str]] = field(default_factory=list)
    log_bytes: int = 0
    logs_dropped: int = 0
    #: Capability requests the host refused: capability, method, url, reason.
    denials: list[dict[str, Any]] = field(default_factory=list)
    #: Granted upstream requests that failed (network, TLS, timeout, 5xx): capability, method, url, reason.
    upstream_failures: list[dict[str, Any]] = field(default_factory=list)
    oom_reported: bool = False
    #: The call's HTTP capability (declared ∩ granted), or None when it has none.
    http: Fetcher | None = None
    #: One summary per outgoing request: method, url, host, path, status or error, bytes, ms.
    egress: list[dict[str, Any]] = field(default_factory=list)
    #: Set by a host function that ran out of the call's time: the call ends as `timeout`.
    timed_out: bool = False

    def add_log(self, level: str, message: str) -> None:
        """Keep a log line while the call's log budget lasts; count the rest."""
        if level == "error" and message.startswith(OOM_MARKER):
            self.oom_reported = True
        size = len(message.encode("utf-8", "replace"))
        if self.log_bytes + size > self.log_limit_bytes:
            self.logs_dropped += 1
            return
        self.log_bytes += size
        self.logs.append({"level": level, "message": message})

    def remaining_s(self) -> float:
        """Seconds left before the call's wall-clock deadline."""
        return self.deadline - time.monotonic()


class ActiveCall:
    """Context manager binding a CallState to the current thread for one call."""

    def __init__(self, state: CallState) -> None:
        self.state = state

    def __enter__(self) -> CallState:
        _local.state = self.state
        return self.state

    def __exit__(self, *exc: object) -> None:
        _local.state = None


def current_call() -> CallState | None:
    """The state of the call running on this thread, or None outside a call."""
    return getattr(_local, "state", None)
