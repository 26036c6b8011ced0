"""The circuit breakers of one home, shared by every Runtime on it (threads and processes).

A breaker is keyed by scope and name: ``("tool", "orders-get")`` or
``("host", "api.example.com")``. Its settings (``glovebox.policy._guards.Breaker``)
come from the policy of the call that reports to it.

State is in ``GLOVEBOX_HOME/guards.sqlite``: a row per breaker that is not
closed (``open`` until a time, or ``half_open`` while one probe runs) and a
row per recent failure. Closed breakers have no row, so the success path
writes nothing. Beside it, ``guards.gen`` holds an 8-byte change counter,
mapped into memory by every board: whoever opens, half-opens, closes or
resets a breaker adds one to it in the same write transaction. A board keeps
the rows of the breakers that are not closed in a dict and reads them again
only when the counter moved, so a check on the success path is one read of
shared memory and one dict lookup (see ``bench/bench_guards.py``), and a
change made by another process is seen by the next check.

The life of a breaker: ``failures`` failures (codes in ``count``) within
``window_ms`` open it for ``open_ms``; a call meanwhile fails fast with
``circuit_open`` (``details.retry_after_ms`` the time left). The first call
after that takes the probe (one process, one thread: a conditional UPDATE
decides) and runs; others still fail fast. A success, the probe's or any
other, closes the breaker; a failure while half-open opens it again. A probe
that never reports (its process died) frees the probe after ``open_ms``.
Wall-clock time (``time.time``) is used, since processes share it.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from ..core._errors import CallError, CallTimeout, CircuitOpen, UpstreamError
from ..policy._guards import Breaker
from ..storage._sqlite import Database

__all__ = ["BreakerBoard", "BreakerState", "HostBreakers"]

Scope = Literal["tool", "host"]
T = TypeVar("T")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS breaker (
    scope TEXT NOT NULL, key TEXT NOT NULL, state TEXT NOT NULL, until REAL NOT NULL, opened REAL NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE TABLE IF NOT EXISTS breaker_failure (scope TEXT NOT NULL, key TEXT NOT NULL, at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS breaker_failure_key ON breaker_failure (scope, key, at);
"""
_COUNTER = struct.Struct("<Q")


@dataclass(frozen=True)
class BreakerState:
    """One breaker that is not closed, or has recent failures (``glovebox tools``, ``/metrics``)."""

    scope: str
    key: str
    #: ``open``, ``half_open`` or ``closed`` (closed, with failures counted).
    state: str
    #: Milliseconds until a probe may go through (0 when half-open or closed).
    retry_after_ms: int
    #: Failures counted within the window (for a closed breaker).
    failures: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "scope": self.scope,
            "key": self.key,
            "state": self.state,
            "retry_after_ms": self.retry_after_ms,
            "failures": self.failures,
        }


class BreakerBoard:
    """The breakers of one home (see the module docstring)."""

    def __init__(self, home: Path, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._db = Database(home / "guards.sqlite", _SCHEMA)
        fd = os.open(home / "guards.gen", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < _COUNTER.size:
                os.ftruncate(fd, _COUNTER.size)
            self._counter = mmap.mmap(fd, _COUNTER.size)
        finally:
            os.close(fd)
        self._seen = -1
        self._rows: dict[tuple[str, str], tuple[str, float]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self._db.close()
        self._counter.close()

    # -- the fast path ------------------------------------------------------------------

    def _current(self) -> dict[tuple[str, str], tuple[str, float]]:
        """The breakers that are not closed: ``(scope, key) -> (state, until)``."""
        counter = _COUNTER.unpack_from(self._counter)[0]
        if counter != self._seen:
            self._reload(counter)
        return self._rows

    def _reload(self, counter: int) -> None:
        with self._db.connection() as db:
            rows = db.execute("SELECT scope, key, state, until FROM breaker").fetchall()
        self._rows = {(scope, key): (state, until) for scope, key, state, until in rows}
        self._seen = counter  # read before the rows: a change in between is read again next time

    def check(self, scope: Scope, key: str, breaker: Breaker) -> bool:
        """Return when the breaker lets a call through now (True when that call is its probe);
        raise ``CircuitOpen`` when it does not."""
        entry = self._current().get((scope, key))
        if entry is None:
            return False
        return self._refuse_or_probe(scope, key, entry, breaker)

    def record(self, scope: Scope, key: str, breaker: Breaker, failed: bool) -> None:
        """Report how a call (or a request to a host) went."""
        if not failed:
            if (scope, key) in self._current():  # the unit works again
                self._close(scope, key)
            return
        now = self.clock()
        with self._db.write() as db:
            row = db.execute("SELECT state FROM breaker WHERE scope = ? AND key = ?", (scope, key)).fetchone()
            if row is not None and row[0] == "open":
                return  # a call that was under way when it opened
            db.execute("INSERT INTO breaker_failure (scope, key, at) VALUES (?, ?, ?)", (scope, key, now))
            window_start = now - breaker.window_ms / 1000
            where = "scope = ? AND key = ?"
            db.execute(f"DELETE FROM breaker_failure WHERE {where} AND at <= ?", (scope, key, window_start))
            (count,) = db.execute(f"SELECT count(*) FROM breaker_failure WHERE {where}", (scope, key)).fetchone()
            if row is None and count < breaker.failures:
                return
            db.execute(
                "INSERT INTO breaker (scope, key, state, until, opened) VALUES (?, ?, 'open', ?, ?)"
                " ON CONFLICT (scope, key) DO UPDATE SET state = 'open', until = excluded.until,"
                " opened = excluded.opened",
                (scope, key, now + breaker.open_ms / 1000, now),
            )
            db.execute(f"DELETE FROM breaker_failure WHERE {where}", (scope, key))
            self._bump()

    # -- changes ----------------------------------------------------------------------------

    def _refuse_or_probe(self, scope: Scope, key: str, entry: tuple[str, float], breaker: Breaker) -> bool:
        now = self.clock()
        if now < entry[1]:
            raise _refusal(scope, key, entry[0], entry[1] - now)
        with self._db.write() as db:  # the open time passed: one caller takes the probe
            taken = db.execute(
                "UPDATE breaker SET state = 'half_open', until = ? WHERE scope = ? AND key = ? AND until <= ?",
                (now + breaker.open_ms / 1000, scope, key, now),
            ).rowcount
            if taken:
                self._bump()
                return True
            row = db.execute("SELECT state, until FROM breaker WHERE scope = ? AND key = ?", (scope, key)).fetchone()
        if row is not None:  # another caller took the probe, or reopened it
            raise _refusal(scope, key, row[0], max(0.0, row[1] - now))
        return False

    def _close(self, scope: str, key: str) -> None:
        with self._db.write() as db:
            gone = db.execute("DELETE FROM breaker WHERE scope = ? AND key = ?", (scope, key)).rowcount
            db.execute("DELETE FROM breaker_failure WHERE scope = ? AND key = ?", (scope, key))
            if gone:
                self._bump()

    def _bump(self) -> None:
        """Move the shared change counter (inside the write transaction that made the change)."""
        with self._lock:
            _COUNTER.pack_into(self._counter, 0, _COUNTER.unpack_from(self._counter)[0] + 1)

    def reset(self, *, tool: str | None = None, host: str | None = None) -> int:
        """Close breakers by hand: the tool's, the host's, or (neither given) all; return how many were not closed."""
        if tool is not None and host is not None:
            raise ValueError("reset one breaker at a time: a tool or a host, not both")
        where, args = "", tuple[str, ...]()
        if tool is not None:
            where, args = " WHERE scope = ? AND key = ?", ("tool", tool)
        elif host is not None:
            where, args = " WHERE scope = ? AND key = ?", ("host", host)
        with self._db.write() as db:
            gone = db.execute("DELETE FROM breaker" + where, args).rowcount
            db.execute("DELETE FROM breaker_failure" + where, args)
            self._bump()
        return int(gone)

    def states(self) -> list[BreakerState]:
        """Every breaker that is open, half-open, or closed with failures counted, sorted by scope and key."""
        now = self.clock()
        with self._db.connection() as db:
            rows = db.execute("SELECT scope, key, state, until FROM breaker").fetchall()
            counts = db.execute("SELECT scope, key, count(*) FROM breaker_failure GROUP BY scope, key").fetchall()
        found = {
            (scope, key): BreakerState(scope, key, state, max(0, round((until - now) * 1000)) if state == "open" else 0)
            for scope, key, state, until in rows
        }
        for scope, key, count in counts:
            found.setdefault((scope, key), BreakerState(scope, key, "closed", 0, count))
        return [found[name] for name in sorted(found)]


class HostBreakers:
    """The host breakers as one call's HTTP capability sees them (``blocked_ms`` / ``settle`` per host).

    A host whose probe this call holds (taken before the sandbox started, or by
    its own first request) lets the call's further requests through.
    """

    __slots__ = ("_board", "_breaker", "probing")

    def __init__(self, board: BreakerBoard, breaker: Breaker, probing: set[str] | None = None) -> None:
        self._board = board
        self._breaker = breaker
        self.probing = probing if probing is not None else set()

    def blocked_ms(self, host: str) -> int | None:
        if host in self.probing:
            return None
        try:
            if self._board.check("host", host, self._breaker):
                self.probing.add(host)
        except CircuitOpen as refused:
            return int(refused.details["retry_after_ms"])
        return None

    def settle(self, host: str, failed: bool) -> None:
        self._board.record("host", host, self._breaker, failed)

    def exchange(self, host: str, run: Callable[[], T]) -> T:
        """Run one exchange with ``host`` made outside the HTTP capability (an ``mcp-remote`` tool's server).

        Refused with ``circuit_open`` (``details.scope`` host) before anything is
        sent when the host's breaker is open; an ``upstream_error`` or a
        ``timeout`` counts as the host's failure, any other answer (the remote
        tool's own error included: the server did answer) as its success.
        """
        self._board.check("host", host, self._breaker)
        try:
            answer = run()
        except (UpstreamError, CallTimeout):
            self.settle(host, failed=True)
            raise
        except CallError:
            self.settle(host, failed=False)
            raise
        self.settle(host, failed=False)
        return answer


def _refusal(scope: str, key: str, state: str, wait_s: float) -> CircuitOpen:
    what = f"tool {key}" if scope == "tool" else f"upstream host {key}"
    retry_after_ms = max(1, round(wait_s * 1000))
    message = (
        f"the circuit breaker of {what} is {state.replace('_', '-')} after repeated failures;"
        f" retry in {retry_after_ms} ms"
    )
    return CircuitOpen(message, details={"scope": scope, scope: key, "retry_after_ms": retry_after_ms})
