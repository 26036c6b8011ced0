"""The worker process of a ProcessPool: one Runtime, calls in, envelopes out.

The parent sends, over the worker's pipe, requests as JSON text (``_procwire``:
never a pickle, so no caller's value runs code here) and finally ``null``; a
request's ``trace`` is the caller's W3C
``traceparent``/``tracestate`` (or None), made the parent of the call's
``glovebox.call`` span when this process has a tracer provider (and ignored when
it has not imported opentelemetry). The worker runs the pool's ``initializer``
first, answers ``("ready", pid)`` once its Runtime is open, then ``("result",
call_id, envelope, span)`` for each call, with ``meta.worker_pid`` set and
``span`` the ``(trace_id, span_id)`` of the ``glovebox.call`` span it recorded
(None when it recorded none), or ``("failed", call_id)`` when the call raised
instead of answering (the parent then answers ``internal_error`` and audits it).
A message that is not a request is logged and skipped (answered ``failed``
when it names a call id): it never ends the worker.
A request carrying a run context (a nested call of a code-mode run) is made
with it, so its ``meta.run`` and audit row name the run as on a Runtime.
Calls run on ``threads`` threads, so one call waiting on an upstream does not
hold up the others; the thread that reads a request runs it, and the pool rings
a bell only when no thread of the worker is at the pipe (see ``_Turns``).
The worker ignores SIGINT (its parent decides when it stops) and ends when told
to, or when its parent's end of the pipe closes; a thread whose turn-taking
fails (a bug here, not a call: a call's exception is answered) ends the whole
worker with :data:`EXIT_TURN_FAILED`, since a request that thread read would
otherwise wait for good, and the pool replaces it as it replaces a killed one.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import pickle
import select
import signal
import threading
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from ..runtime._call import Call
from ..runtime._envelope import RUN_CONTEXT
from ..runtime._record import AuditRecorder
from ..runtime._runtime import Runtime
from ..telemetry import _tracing
from ._procwire import FLAG_BYTES, BadRequest, Frames, Request, decode, is_unicode

__all__ = ["EXIT_TURN_FAILED", "IDLE_MS", "STANDBY_MS", "serve"]

logger = logging.getLogger("glovebox")


def serve(
    conn: Connection,
    options: dict[str, Any],
    threads: int,
    initializer: Callable[..., object] | None = None,
    initargs: tuple[Any, ...] = (),
    *,
    flag: Connection,
    bell: Connection,
    answers: Connection,
) -> None:
    """Run ``initializer(*initargs)``, then calls read from ``conn`` on a Runtime made from
    ``options`` until told to stop, answered on ``answers`` (two one-way pipes); ``flag``
    (a descriptor of the pool's shared page) and ``bell`` (the read end of its bell pipe)
    as :class:`_Turns` uses them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer(*initargs)  # one that raises ends the worker before it is ready
    page = mmap.mmap(flag.fileno(), FLAG_BYTES)  # (mmap keeps its own descriptor)
    flag.close()
    with Runtime(**options) as runtime:
        answers.send(("ready", os.getpid()))
        _Turns(runtime, conn, answers, threads, page, bell.fileno()).serve()


#: The exit code of a worker whose turns failed (``os._exit``: no thread may go on holding a request).
EXIT_TURN_FAILED = 70
#: How long an idle thread waits for the bell while calls run, before it takes the pipe anyway (ms).
STANDBY_MS = 20
#: The same when no call runs (a call that starts meanwhile is covered after this at most).
IDLE_MS = 1000


class _Turns:
    """``threads + 1`` threads share the pipe; the one that reads a request runs it, and nobody is woken for it.

    One thread at a time holds ``reading``: it reads the pipe, and byte 0 of the
    page shared with the pool is 1 while it holds it. A thread reads a request
    only when fewer than ``threads`` calls are running, runs it, and lets go of
    the pipe without waking any other thread: byte 0 back to 0, or left at 1
    when that call took the last free thread (nobody reads then: requests wait
    in the pipe, and no thread is woken for one it could not run). A thread
    that finishes a call runs the oldest request in ``waiting``, if any, or
    takes the pipe back before it sends its answer, when nobody holds it, so
    the pool's next request finds a reader; under load, one thread reads, runs,
    answers and reads again, with no wake-up in between. A thread that takes
    the pipe while every thread is busy (rung, nudged or timed out at standby)
    drains what the pipe holds into ``waiting`` (after a ring, at least one
    request, which the pool may still be writing): the pool rings when its
    calls queued on this worker pass a bound or a request is large, so a full
    worker's pipe never fills and the pool's ``write`` never waits for a call
    to end.

    Idle threads take turns at ``standby``; the one holding it sleeps on the
    pool's bell and a local nudge. The pool rings the bell when it writes a
    request while byte 0 reads 0 (every thread is running a call), and the
    woken thread takes the pipe. A reader that lets go of the pipe with bytes
    still in it (a request written just before it let go) nudges the standby
    thread itself; and the standby thread takes the pipe unrung after
    :data:`STANDBY_MS` when it fell asleep with calls running (:data:`IDLE_MS`
    when none ran), so no request waits longer on a ring lost to the two sides'
    memory ordering. Reading the stop message or the pipe's end stops the
    turns: requests read before it still run, then every thread leaves.
    """

    def __init__(
        self, runtime: Runtime, conn: Connection, answers: Connection, threads: int, page: mmap.mmap, bell: int
    ) -> None:
        self.runtime, self.answers, self.threads, self.page = runtime, answers, threads, page
        self.frames = Frames(conn.fileno())
        self.reading = threading.Lock()
        self.standby = threading.Lock()
        self.state = threading.Lock()
        self.send_lock = threading.Lock()
        self.waiting: deque[Request] = deque()
        self.rung = False  # the bell woke the standby thread: a request is coming, perhaps not written yet
        self.running = 0
        self.idle_threads = 0
        self.stopping = False
        self.bell = bell
        self.nudge = os.pipe()
        os.set_blocking(self.nudge[1], False)
        self.sleeper = select.poll()
        self.sleeper.register(bell, select.POLLIN)
        self.sleeper.register(self.nudge[0], select.POLLIN)

    def serve(self) -> None:
        """Take turns on this thread and ``threads`` others until told to stop."""
        others = [
            threading.Thread(target=self.turns, name=f"glovebox-worker_{i}", daemon=True) for i in range(self.threads)
        ]
        for thread in others:
            thread.start()
        self.turns()
        for thread in others:
            thread.join()

    def turns(self) -> None:
        try:
            request = self.next()
            while request is not None:
                request = self.run(request)
        except BaseException:  # the turns' own bookkeeping failed (what a call raises, ``_answer`` catches)
            # This thread may hold a request it read, counted as running, that no other thread
            # will ever run or answer: its caller would wait for good. The worker ends instead,
            # and the pool answers its calls ``internal_error`` (audited once) and replaces it.
            logger.critical("worker %d stops: a thread taking turns at its pipe failed", os.getpid(), exc_info=True)
            os._exit(EXIT_TURN_FAILED)

    def run(self, request: Request) -> Request | None:
        """Run ``request`` and answer it; then the request this thread runs next, or None to leave."""
        try:
            answer = _answer(self.runtime, request)
        except BaseException:
            with self.state:
                self.running -= 1
            raise
        with self.state:  # (one step with ``read_turn``'s letting go: a full worker's pipe is always taken back)
            self.running -= 1
            follow = self._take() if self.waiting else None
            held = follow is None and not self.stopping and self.reading.acquire(blocking=False)
            if held:
                self.page[0] = 1  # before the answer: the caller's next request finds a reader
        _send_answer(self.answers, self.send_lock, request.call_id, answer)
        if follow is not None:
            return follow
        if held and (following := self.read_turn()) is not None:
            return following
        return self.next()

    def next(self) -> Request | None:
        """The request this thread runs next (counted as running), or None to leave."""
        while True:
            with self.state:
                if self.waiting and self.running < self.threads:
                    return self._take()
                if self.stopping:
                    return None
            if self.reading.acquire(blocking=False):
                self.page[0] = 1
                if (request := self.read_turn()) is not None:
                    return request
                with self.state:  # (a drain may have left requests that a thread is now free to run)
                    if self.stopping or (self.waiting and self.running < self.threads):
                        continue
            self.idle()

    def _take(self) -> Request:
        """The oldest waiting request, counted as running (``state`` held)."""
        self.running += 1
        if self.running >= self.threads:
            self.page[0] = 1  # full: a finishing thread reads next, nobody need be rung
        return self.waiting.popleft()

    def read_turn(self) -> Request | None:
        """Read a request (``reading`` held) when a thread is free to run it; let go of the pipe; that request.

        None when stopping, or when every thread runs a call: then nobody reads (a request
        waits in the pipe, where the kernel holds it) and byte 0 stays 1, so the pool rings
        no bell; the first thread to finish its call takes the pipe back.
        """
        request = None
        try:
            with self.state:
                full = self.running >= self.threads
            if full:
                self.drain()
            elif (request := self.read()) is not None:
                with self.state:
                    if self.running < self.threads:
                        self.running += 1
                    else:  # (a thread took one from ``waiting`` meanwhile)
                        self.waiting.append(request)
                        request = None
        finally:
            buffered = self.frames.buffered()  # (the buffer is only looked at with ``reading`` held)
            with self.state:  # one step with ``run``'s taking back
                stopping = self.stopping
                full = not stopping and self.running >= self.threads
                self.page[0] = int(full)  # full: a finishing thread reads next, nobody need be rung
                self.reading.release()
        if not full and (stopping or buffered or self.frames.readable()):  # a request no ring announced, or the end
            with contextlib.suppress(BlockingIOError):  # wake the standby thread (full: it is being woken)
                os.write(self.nudge[1], b"\0")
        return request

    def drain(self) -> None:
        """Move the requests the pipe holds into ``waiting`` (``reading`` held): after a ring, at least
        one (the pool may ring before it writes), then what the pipe holds without waiting."""
        rung, self.rung = self.rung, False
        while not self.stopping and (rung or self.frames.buffered() or self.frames.readable()):
            rung = False
            if (request := self.read()) is None:
                break
            with self.state:
                self.waiting.append(request)

    def idle(self) -> None:
        """Sleep until the bell, a nudge, or (while calls run) :data:`STANDBY_MS`, one idle thread at a time."""
        self._count_idle(+1)
        try:
            with self.standby:
                if self.stopping:
                    return
                for fd, events in self.sleeper.poll(STANDBY_MS if self.running else IDLE_MS):
                    if events & select.POLLIN:
                        os.read(fd, 4096)
                        self.rung = self.rung or fd == self.bell
                    elif fd == self.bell:  # the pool is gone (the pipe's end says so to the reader)
                        self.sleeper.unregister(fd)
        finally:
            self._count_idle(-1)

    def _count_idle(self, change: int) -> None:
        with self.state:
            self.idle_threads += change
            self.page[1] = min(self.idle_threads, 255)  # (byte 1: for whoever watches the worker)

    def read(self) -> Request | None:
        """The next request on the pipe (skipping what is not one), or None once stopping."""
        while not self.stopping:
            try:
                data = self.frames.next()
            except (EOFError, OSError):
                break  # the parent is gone (or its stream broke): nobody will read an answer
            try:
                request = decode(data)
            except BadRequest as exc:
                logger.error("worker %d skips a message that is not a request: %s", os.getpid(), exc)
                if exc.call_id is not None:
                    _send(self.answers, self.send_lock, ("failed", exc.call_id))
                continue
            if request is not None:
                return request
            break
        self.stopping = True
        return None


def _answer(runtime: Runtime, request: Request) -> tuple[Any, ...]:
    """The message that answers ``request``: ``("result", ...)``, or ``("failed", call_id)`` when the call raised."""
    call_id, name, principal, trace = request.call_id, request.name, request.principal, request.trace
    spans: list[Any] = []
    token = _tracing.attach_headers(trace) if trace else None
    run = RUN_CONTEXT.set(request.run) if request.run is not None else None
    try:
        if request.refusal is not None and is_unicode(name, principal):  # as Runtime.call refuses it, first
            result = AuditRecorder(runtime.audit).refuse(Call(name, None, principal, call_id), request.refusal)
        else:  # (a name or principal that is not valid Unicode is refused before the input)
            result = runtime.send(Call(name, request.input, principal, call_id, spans=spans))
        result.meta["worker_pid"] = os.getpid()
        recorded = _tracing.span_ids(spans[0]) if spans else None
        return ("result", call_id, result.to_dict(), recorded)
    except Exception:
        logger.exception("call %s raised in worker %d", call_id, os.getpid())
        return ("failed", call_id)
    finally:
        if run is not None:
            RUN_CONTEXT.reset(run)
        _tracing.detach(token)


def _send_answer(conn: Connection, send_lock: threading.Lock, call_id: str, answer: tuple[Any, ...]) -> None:
    try:
        data = pickle.dumps(answer, pickle.HIGHEST_PROTOCOL)
        with send_lock:
            conn.send_bytes(data)
    except Exception:
        logger.exception("cannot send the answer of call %s to the pool", call_id)
        _send(conn, send_lock, ("failed", call_id))


def _send(conn: Connection, send_lock: threading.Lock, answer: tuple[Any, ...]) -> None:
    try:
        data = pickle.dumps(answer, pickle.HIGHEST_PROTOCOL)
        with send_lock:
            conn.send_bytes(data)
    except OSError:
        pass  # the parent is gone
