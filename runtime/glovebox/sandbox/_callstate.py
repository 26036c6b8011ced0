"""The state of one call as the host functions see it, bound to the thread running it.

A host function looks up the call running on its thread with
:func:`current_call`: a capability is exactly what that call was granted,
never a process-wide grant. :class:`ActiveCall` binds a state for one call.

Everything a call records is bounded and scrubbed of the call's secrets before
it is kept: logs by ``limits.log_bytes``; denials, egress entries, SQL
statements and upstream failures by :data:`RECORD_LIMIT` entries and :data:`RECORD_BYTES` bytes per
list (the rest is counted in ``denials_dropped``, ``egress_dropped``, ``sql_dropped`` and
``upstream_failures_dropped``), every string in them cut to
:data:`RECORD_CHARS` characters (marked with :data:`CUT`).
"""

from __future__ import annotations

import contextvars
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core._carried import carried
from ..core._world import OOM_MARKER

__all__ = [
    "CUT",
    "RECORD_BYTES",
    "RECORD_CHARS",
    "RECORD_LIMIT",
    "ActiveCall",
    "CallState",
    "Fetcher",
    "HostCalls",
    "HttpRequest",
    "SqlAccess",
    "clip",
    "current_call",
    "listen_logs",
    "log_listener",
]

#: Entries kept per list (denials, egress, upstream failures) per call.
RECORD_LIMIT = 64
#: Bytes (as JSON) kept per list per call.
RECORD_BYTES = 32 * 1024
#: Characters kept of any one string in a recorded entry (a URL, a path, a reason).
RECORD_CHARS = 512
#: Room left past a cut for the longest encoded form of a secret to be scrubbed whole.
_SECRET_REACH = 64 * 1024
#: What ends a string that was cut.
CUT = "…(truncated)"

_local = threading.local()
#: Who hears each log line a call keeps, as it is kept (see :func:`listen_logs`).
_LOG_LISTENER: contextvars.ContextVar[Callable[[str, str], None] | None] = carried(
    contextvars.ContextVar("glovebox_log_listener", default=None)
)


def log_listener() -> Callable[[str, str], None] | None:
    """Who listens to the log lines of calls made here (see :func:`listen_logs`), if anyone."""
    return _LOG_LISTENER.get()


@contextmanager
def listen_logs(listener: Callable[[str, str], None]) -> Iterator[None]:
    """Hand ``listener(level, message)`` each log line the calls made in this block keep, while they run.

    The line is the one kept in ``meta.logs`` (within the log budget, scrubbed); the
    listener runs on the call's thread inside the guest's ``log`` and must return at once.
    It follows the call through its context (``Runtime.call``, ``Runtime.acall``), not
    into another process.
    """
    token = _LOG_LISTENER.set(listener)
    try:
        yield
    finally:
        _LOG_LISTENER.reset(token)


@dataclass(slots=True)
class HttpRequest:
    """One ``http-request`` as the guest wrote it (the WIT record, lifted)."""

    method: str
    url: str
    headers: list[tuple[str, str]]
    body: bytes | None


class Fetcher(Protocol):
    """What a call's HTTP capability offers the ``http-fetch`` host function."""

    def fetch(self, request: Any, state: CallState) -> Any:
        """Perform ``request`` if the grant allows it; return a response record or a typed error."""

    def close(self) -> None:
        """Release connections."""

    def scrub(self, text: str) -> str:
        """``text`` with the call's secrets replaced."""


class HostCalls(Protocol):
    """What a code-mode run offers its program's ``host-call`` (``glovebox:tool/run``)."""

    def host_call(self, kind: str, request: str) -> str:
        """Answer one host call (``kind`` and its JSON request) with JSON text; never raise."""


class SqlAccess(Protocol):
    """What a call's SQL capability offers the ``query`` host function."""

    def query(self, database: str, statement: str, params: list[Any], state: CallState) -> Any:
        """Judge and run one statement; return the rows' JSON text or a ``sql-error`` variant."""


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
    #: The call's SQL capability (declared ∩ granted databases), or None when it has none.
    sql: SqlAccess | None = None
    #: One entry per statement sent: database, kind, fingerprint, tables, decision, rows.
    sql_log: list[dict[str, Any]] = field(default_factory=list)
    #: The run's host calls when the code runner of ``Runtime.run`` is running, else None.
    host_calls: HostCalls | None = None
    #: Every capability bound for this call, by name (declared ∩ granted); one not here answers ``denied``.
    capabilities: dict[str, Any] = field(default_factory=dict)
    #: What the other capabilities' host functions recorded, by capability (bounded like egress).
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    records_dropped: int = 0
    #: The first approval request a statement filed (the call ends as ``approval_required``).
    approval: dict[str, Any] | None = None
    denials_dropped: int = 0
    egress_dropped: int = 0
    upstream_failures_dropped: int = 0
    sql_log_dropped: int = 0
    _sizes: dict[str, int] = field(default_factory=dict, repr=False)

    def add_log(self, level: str, message: str) -> None:
        """Keep a log line while the call's log budget lasts; count the rest."""
        if level == "error" and message.startswith(OOM_MARKER):
            self.oom_reported = True
        if len(message) > self.log_limit_bytes:
            self.logs_dropped += 1
            return
        message = self.scrub(message)
        size = len(message.encode("utf-8", "replace"))
        if self.log_bytes + size > self.log_limit_bytes:
            self.logs_dropped += 1
            return
        self.log_bytes += size
        self.logs.append({"level": level, "message": message})
        listener = _LOG_LISTENER.get()
        if listener is not None:
            listener(level, message)

    def add_denial(self, entry: dict[str, Any]) -> None:
        """Record a refused capability request (bounded, scrubbed)."""
        self._add("denials", entry)

    def add_egress(self, entry: dict[str, Any]) -> None:
        """Record one outgoing request's summary (bounded, scrubbed)."""
        self._add("egress", entry)

    def add_sql(self, entry: dict[str, Any]) -> None:
        """Record one statement's summary (bounded, scrubbed)."""
        self._add("sql_log", entry)

    def capability(self, name: str) -> Any:
        """The call's bound capability ``name``, or None when it has none of it."""
        return self.capabilities.get(name)

    def add_record(self, capability: str, entry: dict[str, Any]) -> None:
        """Record one request of ``capability`` (bounded per capability, scrubbed)."""
        kept = self.records.setdefault(capability, [])
        entry = {key: self.clip(value) if isinstance(value, str) else value for key, value in entry.items()}
        size = len(json.dumps(entry, ensure_ascii=False, default=str).encode("utf-8", "replace"))
        used = self._sizes.get(f"record:{capability}", 0)
        if len(kept) >= RECORD_LIMIT or used + size > RECORD_BYTES:
            self.records_dropped += 1
            return
        self._sizes[f"record:{capability}"] = used + size
        kept.append(entry)

    def note_approval(self, request: dict[str, Any]) -> None:
        """Keep the first approval request a statement filed."""
        if self.approval is None:
            self.approval = request

    def add_upstream_failure(self, entry: dict[str, Any]) -> None:
        """Record a failed granted upstream request (bounded, scrubbed)."""
        self._add("upstream_failures", entry)

    def _add(self, name: str, entry: dict[str, Any]) -> None:
        kept: list[dict[str, Any]] = getattr(self, name)
        entry = {key: self.clip(value) if isinstance(value, str) else value for key, value in entry.items()}
        size = len(json.dumps(entry, ensure_ascii=False, default=str).encode("utf-8", "replace"))
        used = self._sizes.get(name, 0)
        if len(kept) >= RECORD_LIMIT or used + size > RECORD_BYTES:
            setattr(self, f"{name}_dropped", getattr(self, f"{name}_dropped") + 1)
            return
        self._sizes[name] = used + size
        kept.append(entry)

    def scrub(self, text: str) -> str:
        """``text`` with the call's secrets replaced (unchanged when the call has none)."""
        return text if self.http is None else self.http.scrub(text)

    def clip(self, text: str, limit: int = RECORD_CHARS) -> str:
        """``text`` scrubbed of the call's secrets and cut to ``limit`` characters."""
        return clip(text, self.scrub, limit)

    def remaining_s(self) -> float:
        """Seconds left before the call's wall-clock deadline."""
        return self.deadline - time.monotonic()


def clip(text: str, scrub: Callable[[str], str], limit: int = RECORD_CHARS) -> str:
    """``text`` scrubbed and cut to ``limit`` characters (marked with :data:`CUT`).

    The text is cut once before scrubbing (with room for the longest encoded
    form of a secret, so one across the cut is still replaced whole) and once
    after, so a huge string costs no more than a short one.
    """
    if len(text) <= limit:
        return scrub(text)
    text = scrub(text[: limit + _SECRET_REACH])
    return text if len(text) <= limit else text[: limit - len(CUT)] + CUT


class ActiveCall:
    """Context manager binding a CallState to the current thread for one call.

    Calls nest (a run's program makes its tool calls from inside a host
    function of its own instance): leaving a call gives the thread back the
    state of the call it was made from.
    """

    def __init__(self, state: CallState) -> None:
        self.state = state
        self._outer: CallState | None = None

    def __enter__(self) -> CallState:
        self._outer = getattr(_local, "state", None)
        _local.state = self.state
        return self.state

    def __exit__(self, *exc: object) -> None:
        _local.state = self._outer


def current_call() -> CallState | None:
    """The state of the call running on this thread, or None outside a call."""
    return getattr(_local, "state", None)
