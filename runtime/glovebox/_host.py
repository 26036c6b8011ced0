"""The host side of the `glovebox:tool/host@0.1.0` interface.

One linker per engine defines every host function once; each function looks
up the state of the call running on its thread (:class:`CallState`), so a
capability is exactly what that call was granted: there is no global grant.
Host functions never raise into wasm (wasmtime-py parks exceptions in a
process-global slot): every failure becomes a typed error value.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from wasmtime import Engine
from wasmtime.component import Linker, Variant

if TYPE_CHECKING:
    from .capabilities._http import HttpCapability

__all__ = ["HOST_INTERFACE", "CallState", "activate", "make_linker"]

HOST_INTERFACE = "glovebox:tool/host@0.1.0"
HOST_FUNCTIONS = frozenset({"http-fetch", "log"})
LOG_LEVELS = ("debug", "info", "warn", "error")
#: What the C SDK logs (at level error) just before it traps for want of memory.
OOM_MARKER = "glovebox: out of memory"

logger = logging.getLogger("glovebox.host")
_local = threading.local()


@dataclass
class CallState:
    """What one call may do and what it did, seen by the host functions."""

    deadline: float
    log_limit_bytes: int
    logs: list[dict[str, str]] = field(default_factory=list)
    log_bytes: int = 0
    logs_dropped: int = 0
    denials: list[dict[str, Any]] = field(default_factory=list)
    oom_reported: bool = False
    #: The call's HTTP capability (declared ∩ granted), or None when it has none.
    http: HttpCapability | None = None
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


class activate:
    """Context manager binding a CallState to the current thread for one call."""

    def __init__(self, state: CallState) -> None:
        self.state = state

    def __enter__(self) -> CallState:
        _local.state = self.state
        return self.state

    def __exit__(self, *exc: object) -> None:
        _local.state = None


def _state() -> CallState | None:
    return getattr(_local, "state", None)


def _log(_store: Any, level: Any, message: Any) -> None:
    try:
        state = _state()
        if state is not None:
            state.add_log(level if level in LOG_LEVELS else "info", str(message))
    except Exception:  # pragma: no cover - never raise into wasm
        logger.exception("log host function failed")


def _http_fetch(_store: Any, request: Any) -> Any:
    try:
        state = _state()
        if state is not None and state.http is not None:
            return state.http.fetch(request, state)
        url = str(getattr(request, "url", ""))
        method = str(getattr(request, "method", ""))
        reason = "the http capability is not granted to this call"
        if state is not None:
            state.denials.append({"capability": "http", "method": method, "url": url, "reason": reason})
            state.egress.append({"method": method, "url": url, "error": "denied", "ms": 0.0})
        return Variant("denied", reason)
    except Exception:  # pragma: no cover - never raise into wasm
        logger.exception("http-fetch host function failed")
        return Variant("network", "host error")


def make_linker(engine: Engine) -> Linker:
    """A component linker defining the whole host interface."""
    linker = Linker(engine)
    with linker.root() as root, root.add_instance(HOST_INTERFACE) as host:
        host.add_func("log", _log)
        host.add_func("http-fetch", _http_fetch)
    return linker
