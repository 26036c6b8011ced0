"""Sessions that last: one MCP session per (server, principal), reused across calls, supervised.

A :class:`SessionPool` (one per Runtime) keeps every open session on one
event loop of its own, on a daemon thread; a call (from any thread) runs there
and its caller waits for it. A session is keyed by the server (its URL and
headers, or its command, environment and sandbox: ``Descriptor.server``), the
principal and a digest of the secret values it was opened with, so:

- two principals never share a session, nor a stdio server's process or
  working directory (``<home>/mcp-stdio/<server>/<principal>/``);
- a rotated secret opens a new session rather than reusing one opened with
  the old value.

Lifecycle. A session is opened lazily by the first call that needs it; the
call waits up to ``start_s`` for it (a server's start is not counted in the
call's deadline, which begins once the session is ready). It is closed when it has been idle
``idle_s`` seconds, when the pool closes, or when its server goes away. An
HTTP server that answers 404 to our session id has expired it: the session is
dropped and the call sent once more on a fresh one (the server never ran it).
A session that dies (a stdio server exits, a transport fails) is opened again
by the next call, but not before a backoff that doubles with each death in a
row (``backoff_s`` up to ``max_backoff_s``; a successful call resets it); a
call inside the backoff fails at once with a retryable ``upstream_error``
holding ``details.retry_after_ms``.

Deadline and progress. A call must finish within ``timeout_s``; each progress
notification the server sends for it moves the deadline to ``timeout_s`` after
it, never past ``ceiling_s`` after the call began (the policy's
``max_timeout_ms``). When the deadline passes (or the caller's wait is
abandoned) the request is cancelled, and the SDK sends the server
``notifications/cancelled`` for it.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import hashlib
import logging
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..core._errors import UpstreamError
from ._connect import CURRENT, CallScope, Link, connect
from ._proxy import Descriptor

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["Progress", "SessionPool"]

logger = logging.getLogger("glovebox")
T = TypeVar("T")

#: Called (on the pool's loop thread) with each progress notification of a call: progress, total, message.
Progress = Callable[[float, float | None, str | None], None]
#: Seconds a call's caller waits past its ceiling for the loop to report (then it abandons the call).
GRACE_S = 2.0


@dataclass
class _Deaths:
    """How many times in a row a server's session died, and when it may be opened again."""

    count: int = 0
    not_before: float = 0.0


class _Session:
    """One open client, held open by its own task on the pool's loop."""

    def __init__(self, key: tuple[bytes, str, str], opener: Callable[[], Any], link: Link) -> None:
        self.key = key
        self.link = link
        self._opener = opener
        self.client: Client | None = None
        self.error: BaseException | None = None
        self.ready = asyncio.Event()
        self.stop = asyncio.Event()
        self.alive = True
        self.stopped = False
        self.in_flight = 0
        self.last_used = time.monotonic()
        self.task: asyncio.Task[None] | None = None
        self.ended: float | None = None

    async def run(self) -> None:
        import anyio

        try:
            async with self._opener() as client:
                self.client = client
                self.ready.set()
                async with anyio.create_task_group() as group:
                    if self.link.exited is not None:
                        group.start_soon(self._end_when_exited, group.cancel_scope)
                    await self.stop.wait()
                    group.cancel_scope.cancel()
        except Exception as exc:
            self.error = exc
        finally:
            self.alive = False
            self.ended = self.ended or time.monotonic()
            self.client = None
            self.ready.set()

    async def _end_when_exited(self, scope: Any) -> None:
        await self.link.exited.wait()
        self.ended = time.monotonic()  # the server's death, not the end of its clean-up
        scope.cancel()


def _exited(link: Link) -> bool:
    return link.exited is not None and bool(link.exited.is_set())


class SessionPool:
    """Every open MCP session of one Runtime (see the module docstring).

    A pool not closed by its Runtime is closed when the interpreter exits, so
    no local server outlives the host.
    """

    def __init__(
        self,
        home: Path,
        *,
        idle_s: float = 300.0,
        start_s: float = 15.0,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
    ) -> None:
        self.home = home
        self.start_s = start_s
        self.idle_s = idle_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._sessions: dict[tuple[bytes, str, str], _Session] = {}
        self._deaths: dict[tuple[bytes, str, str], _Deaths] = {}
        self._closed = False
        self._reaper: concurrent.futures.Future[None] | None = None
        _OPEN.add(self)

    # -- the loop ----------------------------------------------------------------

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        with self._lock:
            if self._closed:
                coro.close()
                raise UpstreamError("the Runtime is closing; no MCP session can be opened", retryable=True)
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, name="glovebox-mcp", daemon=True)
                self._thread.start()
                self._reaper = asyncio.run_coroutine_threadsafe(self._reap(), self._loop)
            # In an empty context: a session's task outlives the call that opened it, and must not carry
            # that caller's context (its relays, its cancellation, an async framework's request state).
            return contextvars.Context().run(asyncio.run_coroutine_threadsafe, coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, T], wait_s: float) -> T:
        """Run ``coro`` on the pool's loop; wait at most ``wait_s`` (then cancel it: TimeoutError).

        The caller's :class:`~glovebox.remote._relay.Cancellation` (when current) cancels it too
        (``concurrent.futures.CancelledError``).
        """
        from ._relay import current_cancellation

        future = self._submit(coro)
        cancellation = current_cancellation()
        forget = cancellation.on_cancel(future.cancel) if cancellation is not None else None
        try:
            return future.result(timeout=wait_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError from None
        finally:
            if forget is not None:
                forget()

    def close(self) -> None:
        """Close every session (their servers stopped) and the loop. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
        _OPEN.discard(self)
        if loop is None or thread is None:
            return
        with_timeout = asyncio.run_coroutine_threadsafe(self._close_all(), loop)
        try:
            with_timeout.result(timeout=10)
        except Exception:  # a server that will not stop: the daemon thread goes with the process
            logger.warning("some MCP sessions did not close within 10 s")
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        if not thread.is_alive():
            loop.close()

    async def _close_all(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        sessions = list(self._sessions.values())
        self._sessions.clear()
        for session in sessions:
            session.stopped = True
            session.stop.set()
        tasks = [session.task for session in sessions if session.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=8)

    async def _reap(self) -> None:
        """Close the sessions idle for ``idle_s`` (checked every ``idle_s / 4``, at most every 30 s)."""
        while True:
            await asyncio.sleep(min(max(self.idle_s / 4, 0.05), 30.0))
            now = time.monotonic()
            for key, session in list(self._sessions.items()):
                if session.in_flight == 0 and now - session.last_used >= self.idle_s:
                    self._drop(key, session)

    def _drop(self, key: tuple[bytes, str, str], session: _Session) -> None:
        if self._sessions.get(key) is session:
            del self._sessions[key]
        session.stopped = True
        session.stop.set()

    # -- sessions ----------------------------------------------------------------

    def workdir(self, descriptor: Descriptor, principal: str) -> Path:
        """The working directory of ``descriptor``'s stdio server for ``principal`` (made when missing).

        It is named by the server's command line alone, so a refresh that changes its environment or
        sandbox keeps the server's files.
        """
        server = hashlib.sha256("\0".join(descriptor.command or [descriptor.url]).encode()).hexdigest()[:16]
        who = hashlib.sha256(principal.encode()).hexdigest()[:16]
        path = self.home / "mcp-stdio" / server / who
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path

    def open_sessions(self, principal: str | None = None) -> int:
        """How many sessions are open (of ``principal`` when given)."""
        return sum(
            1 for key, s in list(self._sessions.items()) if s.alive and (principal is None or key[1] == principal)
        )

    async def _session(
        self, descriptor: Descriptor, principal: str, values: Mapping[str, str], limit: int, http: Any = ()
    ) -> _Session:
        granted = http.key() if hasattr(http, "key") else [rule.model_dump(mode="json") for rule in http]
        digest = hashlib.sha256(repr((sorted(values.items()), granted)).encode()).hexdigest()
        key = (descriptor.server, principal, digest)
        session = self._sessions.get(key)
        if session is not None and (not session.alive or _exited(session.link)):
            self._died(key, session)
            session = None
        if session is None:
            deaths = self._deaths.get(key)
            wait = deaths.not_before - time.monotonic() if deaths else 0.0
            if wait > 0:
                raise UpstreamError(
                    f"the MCP server {descriptor.origin} stopped; it is started again in {wait:.1f} s",
                    details={"server": descriptor.origin, "retry_after_ms": int(wait * 1000) + 1},
                    retryable=True,
                )
            session = self._open(key, descriptor, principal, values, limit, http)
        session.link.limit_bytes = limit
        return session

    def _open(
        self,
        key: tuple[bytes, str, str],
        descriptor: Descriptor,
        principal: str,
        values: Mapping[str, str],
        limit: int,
        http: Any = (),
    ) -> _Session:
        workdir = self.workdir(descriptor, principal) if descriptor.command else None
        link = Link(limit, http=http if hasattr(http, "key") else tuple(http))
        session = _Session(key, lambda: connect(descriptor, values, link, workdir, self.home), link)
        session.task = asyncio.get_running_loop().create_task(session.run())
        self._sessions[key] = session
        return session

    def _died(self, key: tuple[bytes, str, str], session: _Session) -> None:
        """Forget a dead session; unless it was stopped on purpose, push its server's next start back."""
        if self._sessions.get(key) is session:
            del self._sessions[key]
        if session.stopped or session.link.expired:
            return
        deaths = self._deaths.setdefault(key, _Deaths())
        deaths.count += 1
        delay = min(self.backoff_s * 2 ** (deaths.count - 1), self.max_backoff_s)
        deaths.not_before = (session.ended or time.monotonic()) + delay  # counted from the death
        logger.info("MCP session to a server ended (%r); next start in %.1f s", session.error, delay)

    # -- a call ------------------------------------------------------------------

    async def call(
        self,
        descriptor: Descriptor,
        principal: str,
        values: Mapping[str, str],
        scope: CallScope,
        work: Callable[[Client, Progress], Awaitable[T]],
        timeout_s: float,
        ceiling_s: float,
        progress: Progress | None = None,
        http: Any = (),
    ) -> T:
        """Run ``work`` on the (server, principal) session within the deadline rules of the module docstring.

        ``http``: the egress grant of the call (``_egress.EgressGrant``: rules, limits, secrets), which a
        sandboxed stdio server reaches through the
        egress proxy; calls granted different rules get different sessions (and processes).

        Raises:
            TimeoutError: the deadline passed (the request was cancelled upstream).
            UpstreamError: the server is in its restart backoff.
            Exception: what the session or ``work`` raised.
        """
        import anyio

        CURRENT.set(scope)
        for attempt in (1, 2):
            session = await self._session(descriptor, principal, values, scope.budget.limit, http)
            session.in_flight += 1
            session.link.scopes.append(scope)
            try:
                with anyio.fail_after(self.start_s):  # a server's start has a bound of its own
                    await session.ready.wait()
                return await self._within(self._client_of(session), work, timeout_s, ceiling_s, progress)
            except Exception:
                if attempt == 1 and session.link.expired and not scope.budget.exceeded:
                    self._drop(session.key, session)  # the server forgot the session: a new one, once
                    continue
                if session.link.too_long:
                    scope.budget.exceeded = True
                raise
            finally:
                session.in_flight -= 1
                session.link.scopes.remove(scope)
                session.last_used = time.monotonic()
                if session.alive and not _exited(session.link):
                    self._deaths.pop(session.key, None)
        raise AssertionError("unreachable")

    @staticmethod
    async def _within(
        client: Client,
        work: Callable[[Client, Progress], Awaitable[T]],
        timeout_s: float,
        ceiling_s: float,
        progress: Progress | None,
    ) -> T:
        """``work`` under a deadline ``timeout_s`` away, moved by each progress notification up to ``ceiling_s``."""
        import anyio

        start = anyio.current_time()
        with anyio.CancelScope(deadline=start + timeout_s) as deadline:

            def extend(value: float, total: float | None, message: str | None) -> None:
                later = min(anyio.current_time() + timeout_s, start + ceiling_s)
                deadline.deadline = max(deadline.deadline, later)
                if progress is not None:
                    progress(value, total, message)

            return await work(client, extend)
        raise TimeoutError("the call's deadline passed")

    def _client_of(self, session: _Session) -> Client:
        client = session.client
        if client is None or _exited(session.link):
            self._died(session.key, session)
            error = session.error
            raise error if error is not None else ConnectionError("the MCP server closed the session")
        return client


#: Every pool not yet closed, closed at interpreter exit.
_OPEN: weakref.WeakSet[SessionPool] = weakref.WeakSet()


@atexit.register
def _close_open_pools() -> None:
    for pool in list(_OPEN):
        pool.close()
