"""ProcessPool: tool calls on N worker processes, each with its own Runtime on one home.

Each worker (``multiprocessing``'s ``spawn`` context: the engine holds threads
and a native timer, which ``fork`` would not carry over) opens a Runtime with the
pool's arguments on the same ``GLOVEBOX_HOME``, so the workers share the
registry, memory-map the same compiled components from ``cache/compiled/``,
pick up registrations and policy reloads as any Runtime does, and append to the
one audit chain. Each worker has two one-way pipes, requests out and answers
back (a pipe costs about half a socket pair per read and write); a call goes to
the worker with the fewest calls in flight (ties in turn).

Answers come back on the answers pipe, read by one thread at a time (its ``turn``): a
caller of :meth:`ProcessPool.call` waiting for its answer reads the pipe itself
when nobody else is, so a call costs no hand-off between threads here; it
settles every answer it reads, and when its own is in, passes the turn to
another waiting caller, or to the worker's watcher thread when calls from
``acall`` are left (they have no thread to read for them). The watcher also
notices the process ending when nobody is reading.

A worker that dies (killed, out of memory) is replaced. Each call it had in
flight answers ``internal_error``, retryable, with ``details.call_id`` and
``details.worker_pid``; the pool writes that call's audit row unless the worker
wrote one before dying (the call id is chosen here, before dispatch, so the
audit log is looked up by it), so every call leaves exactly one row. In that
narrow case (the row written, the answer lost) the row holds what the tool did.

A ProcessPool is a :class:`Runtime` in this process (its registry, policy,
approvals, breakers, runs and audit log are its own, on the workers' home)
whose calls go to :class:`PoolWorkers` instead of down its own chain.
``run`` (code mode) runs the program in this process; each nested call takes
the path of ``call`` to a worker, carrying its call id and the run's context
(``_procwire``'s ``run``), so its row names the run as on a Runtime.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import pickle
import select
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core import _settings
from ..model._result import CallResult
from ..policy import Policy
from ..runtime._call import Call
from ..runtime._envelope import RUN_CONTEXT, new_call_id
from ..runtime._record import AuditRecorder
from ..runtime._runtime import Runtime
from ..runtime.executors import Workers
from ..telemetry import _tracing
from ..telemetry._calllog import log_call
from . import _procwire

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

__all__ = ["PoolWorkers", "ProcessPool"]

logger = logging.getLogger("glovebox")
#: Seconds ``close`` waits for a worker to finish its calls before killing it.
CLOSE_TIMEOUT_S = 120.0
#: Longest wait before replacing a worker that died before it was ready.
MAX_RESTART_DELAY_S = 5.0
#: Calls queued on a worker (beyond its threads) past which each request rings its bell, so it drains its pipe.
QUEUED_BEFORE_RING = 8
#: A request longer than this (bytes) rings the bell, so a full worker reads it before the pipe fills.
#: (Unrung, a full worker's pipe holds at most 8 requests of 4 KiB: half of a pipe's 64 KiB.)
LARGE_REQUEST = 4096
#: ``_Worker.turn`` while the worker's watcher thread reads its pipe.
_WATCHER = "watcher"


@dataclass
class _Pending:
    #: Set with the answer for a call from ``acall`` (a caller of ``call`` reads ``result`` instead).
    future: Future[CallResult] | None
    name: str
    value: Any
    principal: str | None
    started: float = field(default_factory=time.perf_counter)
    #: ``(trace_id, span_id)`` of the ``glovebox.call`` span the worker recorded, if it did.
    span: tuple[int, int] | None = None
    #: The run context of a nested call of a code-mode run (``meta.run``), or None.
    run: dict[str, Any] | None = None
    #: Held while a caller of ``call`` sleeps (``waiting``); released when its answer is in or the turn is its.
    wake: threading.Lock | None = None
    waiting: bool = False
    call_id: str = ""
    result: CallResult | None = None


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection  # the write end of the worker's requests
    answers: Connection  # the read end of its answers
    pending: dict[str, _Pending] = field(default_factory=dict)
    send_lock: threading.Lock = field(default_factory=threading.Lock)
    alive: bool = True
    ready: bool = False
    reader: threading.Thread | None = None
    frames: _procwire.Frames = field(init=False)
    #: Who reads the pipe now: None, ``_WATCHER``, or the ``_Pending`` of the caller reading it.
    turn: _Pending | str | None = None
    #: Sleeping callers of ``call`` (the next turn goes to one of them); calls with no caller thread.
    sleepers: list[_Pending] = field(default_factory=list)
    detached: int = 0
    exited: bool = False  # the process ended (its pipe is read to the end, by the watcher)
    ended: bool = False  # the pipe's end was read
    nudge: tuple[int, int] = field(default_factory=os.pipe)  # written to wake the watcher
    #: The page shared with the worker: byte 0 is 1 while a thread of the worker holds its pipe.
    page: mmap.mmap | None = None
    #: The write end of the worker's bell, rung when a request is sent while byte 0 is 0.
    bell: int = -1

    def __post_init__(self) -> None:
        self.frames = _procwire.Frames(self.answers.fileno())
        os.set_blocking(self.nudge[1], False)

    @property
    def pid(self) -> int:
        assert self.process.pid is not None
        return self.process.pid


class ProcessPool(Runtime):
    """Runs calls in ``processes`` worker processes, each holding a Runtime on one home.

    Args:
        processes: how many worker processes (default: the CPU count).
        home: as for :class:`Runtime` (resolved here, so every worker uses the same one).
        policy: as for :class:`Runtime`: a file (reloaded by each worker when it
            changes) or a ``Policy``; default ``GLOVEBOX_POLICY``.
        threads: calls each worker runs at once (on threads), so calls waiting
            on an upstream do not queue behind each other.
        initializer: called as ``initializer(*initargs)`` in each worker process
            before its Runtime opens (to configure a tracer provider or logging
            there); pickled to the workers like the other arguments. One that
            raises ends the worker, which is replaced (after a growing pause).
        initargs: the arguments of ``initializer``.
        **options: the other keyword arguments of :class:`Runtime`
            (``require_signatures``, ``grants``, ``transport``, ``engine``);
            they are pickled to the workers, except ``tracer_provider``, which
            stays in this process (see below).

    Tracing: each call carries the caller's trace context (W3C ``traceparent``)
    to its worker. A worker whose process has a tracer provider records the
    call's ``glovebox.call`` span and its steps there, as a child of the caller's
    span; otherwise the pool records the ``glovebox.call`` span in this process
    (with ``tracer_provider`` or the global provider), from the envelope. Either
    way a call has one ``glovebox.call`` span, and this process logs its
    ``glovebox.calls`` line with that span's ids.

    Raises:
        TypeError: an argument cannot be sent to a worker process (not picklable).
        ValueError: ``processes`` or ``threads`` is below 1.
        InvalidPolicy: as :class:`Runtime` raises it.

    ``call`` and ``acall`` answer the same :class:`CallResult` as ``Runtime.call``,
    with ``meta["worker_pid"]`` naming the process that ran the call. ``run``,
    ``arun`` and ``runs`` are those of :class:`Runtime` (code mode): the program
    runs in this process and each nested call on a worker, journaled in the
    home's ``runs.sqlite``, so a run resumes on a pool or a Runtime alike. Programs
    that make a pool must guard their entry point (``if __name__ == "__main__":``),
    as ``multiprocessing``'s spawn start method requires. Use it as a context
    manager, or call ``close()``.
    """

    def __init__(
        self,
        processes: int | None = None,
        home: str | os.PathLike[str] | None = None,
        policy: str | os.PathLike[str] | Policy | None = None,
        *,
        threads: int = 4,
        initializer: Callable[..., object] | None = None,
        initargs: tuple[Any, ...] = (),
        **options: Any,
    ) -> None:
        count = processes if processes is not None else os.cpu_count() or 1
        if count < 1 or threads < 1:
            raise ValueError("processes and threads must be at least 1")
        tracing = _tracing.Tracing(options.pop("tracer_provider", None))
        worker_options: dict[str, Any] = {
            "home": _settings.home_dir(home),
            "policy": policy if policy is not None else _settings.policy_file(),
            **options,
        }
        init = (initializer, tuple(initargs))
        try:
            pickle.dumps((worker_options, init))
        except Exception as exc:
            raise TypeError(f"ProcessPool's arguments must be picklable to reach its workers: {exc}") from exc
        super().__init__(**worker_options)  # refuses bad arguments here, not in every worker
        try:
            self._run_on(PoolWorkers(count, threads, worker_options, init, tracing, AuditRecorder(self.audit)))
        except BaseException:
            super().close()
            raise

    def __enter__(self) -> ProcessPool:
        return self

    @property
    def runtime(self) -> Runtime:
        """This pool itself: the Runtime that answers for the registry, the policy and approvals."""
        return self

    @property
    def pids(self) -> list[int]:
        """The process ids of the live workers."""
        assert isinstance(self._workers, PoolWorkers)
        return self._workers.pids


class PoolWorkers(Workers):
    """The worker processes of a :class:`ProcessPool` and the pipes to them."""

    def __init__(
        self,
        count: int,
        threads: int,
        options: dict[str, Any],
        init: tuple[Callable[..., object] | None, tuple[Any, ...]],
        tracing: _tracing.Tracing,
        recorder: AuditRecorder,
    ) -> None:
        self._options = options
        self._init = init
        self._tracing = tracing
        self._recorder = recorder
        import multiprocessing

        self._context = multiprocessing.get_context("spawn")
        self._threads = threads
        self._cond = threading.Condition()
        self._closed = False
        self._turn = 0
        self._waiting = 0
        self._restart_delay = 0.1
        self._workers: list[_Worker] = []
        try:
            for _ in range(count):
                self._workers.append(self._start())
        except BaseException:
            self.close()
            raise

    # -- lifecycle -----------------------------------------------------------

    @property
    def pids(self) -> list[int]:
        """The process ids of the live workers."""
        with self._cond:
            return [worker.pid for worker in self._workers if worker.alive]

    def close(self) -> None:
        """Let the workers finish the calls in flight, then stop them. Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            workers = list(self._workers)
            self._cond.notify_all()
        for worker in workers:
            self._send(worker, None)
        for worker in workers:
            worker.process.join(CLOSE_TIMEOUT_S)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
        for worker in workers:
            if worker.reader is not None:
                worker.reader.join()

    def _start(self) -> _Worker:
        from multiprocessing.connection import Connection

        from ._procworker import serve

        # Two one-way pipes, not a socket pair: a pipe's read and write cost about half a socket's.
        requests, ours = self._context.Pipe(duplex=False)
        answers, theirs = self._context.Pipe(duplex=False)
        with tempfile.TemporaryFile() as backing:  # unlinked: the page is only in the two mappings
            os.ftruncate(backing.fileno(), _procwire.FLAG_BYTES)
            page = mmap.mmap(backing.fileno(), _procwire.FLAG_BYTES)
            flag = Connection(os.dup(backing.fileno()))  # (a Connection crosses to the child as a descriptor)
        bell_read, bell = os.pipe()
        os.set_blocking(bell, False)
        ring = Connection(bell_read)
        process = self._context.Process(
            target=serve,
            args=(requests, self._options, self._threads, *self._init),
            kwargs={"flag": flag, "bell": ring, "answers": theirs},
            name="glovebox-worker",
            daemon=True,
        )
        try:
            process.start()
        except BaseException:
            page.close()
            os.close(bell)
            ours.close()
            answers.close()
            raise
        finally:  # the child has its own copies now
            requests.close()
            theirs.close()
            flag.close()
            ring.close()
        worker = _Worker(process, ours, answers, page=page, bell=bell)
        worker.reader = threading.Thread(target=self._watch, args=(worker,), name="glovebox-pool", daemon=True)
        worker.reader.start()
        return worker

    @property
    def in_flight(self) -> int:
        """Calls sent to the workers and not answered yet (running there, or in a worker's line)."""
        with self._cond:
            return sum(len(worker.pending) for worker in self._workers)

    @property
    def queued(self) -> int:
        """Calls waiting here for a live worker (while every worker is being replaced)."""
        with self._cond:
            return self._waiting

    # -- calls ------------------------------------------------------------------

    def send(self, call: Call) -> CallResult:
        """Run ``call`` in a worker process (the whole chain runs there); wait here for its answer."""
        tracer, started = self._tracing.tracer(), time.time_ns()
        call_id = call.call_id or new_call_id()
        worker, pending = self._submit(
            call.tool, call.input, call.principal, call_id, RUN_CONTEXT.get(), threading.Lock()
        )
        result = self._wait(worker, pending)
        _report(tracer, started, pending.span, result)
        return result

    async def asend(self, call: Call) -> CallResult:
        """``send`` without blocking the event loop (the wait is on the worker's answer)."""
        import asyncio  # imported here to keep `import glovebox` light

        tracer, started = self._tracing.tracer(), time.time_ns()
        _, pending = self._submit(call.tool, call.input, call.principal, call.call_id or new_call_id())
        assert pending.future is not None
        result = await asyncio.wrap_future(pending.future)
        _report(tracer, started, pending.span, result)
        return result

    def _submit(
        self,
        name: str,
        value: Any,
        principal: str | None,
        call_id: str,
        run: dict[str, Any] | None = None,
        wake: threading.Lock | None = None,
    ) -> tuple[_Worker, _Pending]:
        """Send the call to a worker; ``wake`` (held here) when a thread will wait for it in ``_wait``."""
        if not isinstance(name, str):
            raise TypeError(f"tool name must be a str, not {type(name).__name__}")
        if principal is not None and not isinstance(principal, str):
            raise TypeError(f"principal must be a str or None, not {type(principal).__name__}")
        # As JSON text: no value of the caller's is unpickled in a worker (see ``_procwire``).
        payload = _procwire.encode(call_id, name, value, principal, _tracing.carrier(), run)
        pending = _Pending(
            Future() if wake is None else None, name, value, principal, run=run, wake=wake, call_id=call_id
        )
        if wake is not None:
            wake.acquire()
        worker = self._dispatch(call_id, pending)
        self._send(worker, payload)
        if wake is None:
            with self._cond:
                if worker.turn is None:  # nobody reads: the watcher will
                    self._pass(worker)
        return worker, pending

    def _dispatch(self, call_id: str, pending: _Pending) -> _Worker:
        """Choose the live worker with the fewest calls in flight and book the call on it."""
        with self._cond:
            while True:
                if self._closed:
                    raise ValueError("this ProcessPool is closed")
                live = [worker for worker in self._workers if worker.alive]
                if live:
                    break
                self._waiting += 1
                try:
                    self._cond.wait()
                finally:
                    self._waiting -= 1
            self._turn += 1
            turn = self._turn
            chosen = min(range(len(live)), key=lambda i: (len(live[i].pending), (i - turn) % len(live)))
            worker = live[chosen]
            worker.pending[call_id] = pending
            worker.detached += pending.wake is None
            return worker

    def _send(self, worker: _Worker, payload: bytes | None) -> None:
        """Write to a worker's pipe, and ring its bell when needed (see ``_procworker._Turns``);
        a dead worker's calls are answered by its watcher."""
        data = payload if payload is not None else _procwire.STOP
        # Rung when no thread of the worker holds its pipe, and when calls pile up there or a request
        # is large: a worker whose threads all run calls reads its pipe only when rung, so it never fills.
        crowded = len(worker.pending) > self._threads + QUEUED_BEFORE_RING or len(data) > LARGE_REQUEST
        try:
            with worker.send_lock:
                if crowded and worker.page is not None:  # before: the worker reads while this writes
                    self._ring(worker)
                worker.conn.send_bytes(data)
                if not crowded and worker.page is not None and not worker.page[0]:
                    self._ring(worker)
        except (OSError, ValueError):
            pass

    @staticmethod
    def _ring(worker: _Worker) -> None:
        with contextlib.suppress(BlockingIOError):  # full: rung already
            os.write(worker.bell, b"\0")

    # -- answers -------------------------------------------------------------

    def _wait(self, worker: _Worker, pending: _Pending) -> CallResult:
        """The answer of a call made by this thread: read the pipe when it is this thread's turn, else sleep."""
        assert pending.wake is not None
        try:
            while True:
                with self._cond:
                    if pending.result is not None:
                        if worker.turn is pending:  # given the turn as its answer came in
                            self._pass(worker)
                        return pending.result
                    mine = worker.turn is None or worker.turn is pending
                    if mine:
                        worker.turn = pending
                    else:
                        pending.waiting = True
                        worker.sleepers.append(pending)
                if mine:
                    self._read(worker, pending)  # (it passes the turn on before it returns)
                    if pending.result is not None:
                        return pending.result
                else:
                    pending.wake.acquire()
        except BaseException:  # interrupted: the call is left to the watcher, and so is the pipe
            with self._cond:
                if pending.waiting:
                    pending.waiting = False
                    worker.sleepers.remove(pending)
                if worker.pending.get(pending.call_id) is pending:
                    pending.wake = None
                    worker.detached += 1
                if worker.turn is None or worker.turn is pending:
                    self._pass(worker)
            raise

    def _read(self, worker: _Worker, mine: _Pending | None) -> None:
        """Read and settle answers until ``mine`` is answered (the watcher: until its turn is over)."""
        ended = False
        try:
            while not self._turn_over(worker, mine):
                try:
                    data = worker.frames.next()
                except _procwire.BadFrame as exc:  # its stream cannot be read past this: the worker is lost
                    logger.error("worker %d sent %s; stopping it", worker.pid, exc)
                    worker.process.kill()
                    ended = True
                    break
                except (EOFError, OSError):
                    ended = True
                    break
                self._heard(worker, data)
        finally:
            with self._cond:  # one step, so the watcher sees the end only once the turn is its
                worker.ended = worker.ended or ended
                self._pass(worker)

    def _turn_over(self, worker: _Worker, mine: _Pending | None) -> bool:
        if mine is not None:  # (only the reader sets ``ended``, and ``result`` is set once)
            return worker.ended or mine.result is not None
        with self._cond:
            return worker.ended or self._successor(worker) != _WATCHER

    def _successor(self, worker: _Worker) -> _Pending | str | None:
        """Who should read the pipe next (the lock held): the watcher while calls no thread waits on are
        left or the process ended, else a sleeping caller, else nobody."""
        if worker.ended or worker.exited or worker.detached:
            return _WATCHER
        return worker.sleepers[0] if worker.sleepers else None

    def _pass(self, worker: _Worker) -> None:
        """Give the pipe to its next reader and wake it (the lock held)."""
        nxt = worker.turn = self._successor(worker)
        if nxt == _WATCHER:
            if worker.alive:  # (a dead worker's watcher has left, and closed its pipe)
                with contextlib.suppress(BlockingIOError):  # full: the watcher has nudges to read
                    os.write(worker.nudge[1], b"\0")
        elif isinstance(nxt, _Pending):
            self._rouse(worker, nxt)

    def _rouse(self, worker: _Worker, pending: _Pending) -> None:
        """Wake the caller sleeping on ``pending`` (the lock held)."""
        if pending.waiting:
            assert pending.wake is not None
            pending.waiting = False
            worker.sleepers.remove(pending)
            pending.wake.release()

    def _watch(self, worker: _Worker) -> None:
        """The watcher: read the pipe when given the turn, until the process ends; then settle what it left."""
        nudge, sentinel = worker.nudge[0], worker.process.sentinel
        poller = select.poll()  # (not select.select: a busy program's descriptors pass FD_SETSIZE)
        poller.register(nudge, select.POLLIN)
        poller.register(sentinel, select.POLLIN)
        while not worker.ended:
            ready = {fd for fd, _ in poller.poll()}
            if nudge in ready:
                os.read(nudge, 4096)
            with self._cond:
                if sentinel in ready:
                    worker.exited = True  # its pipe is read to the end, by this thread
                    poller.unregister(sentinel)
                    if worker.turn is None:
                        worker.turn = _WATCHER
                mine = worker.turn == _WATCHER
            if mine:
                self._read(worker, None)
        self._died(worker)

    def _heard(self, worker: _Worker, data: bytes) -> None:
        """Act on one message of a worker: it is ready, or a call's answer."""
        try:
            message = pickle.loads(data)
        except Exception:
            logger.exception("unreadable answer from worker %d", worker.pid)
            return
        if message[0] == "ready":
            worker.ready = True
            self._restart_delay = 0.1
        elif message[0] == "result":
            self._settle(worker, *message[1:4])
        else:
            self._settle(worker, message[1])

    def _settle(self, worker: _Worker, call_id: str, envelope: dict[str, Any] | None = None, span: Any = None) -> None:
        result = None
        if envelope is not None:
            try:
                result = CallResult.from_dict(envelope)
            except ValueError:
                logger.exception("unreadable answer to call %s from worker %d", call_id, worker.pid)
        with self._cond:
            pending = worker.pending.pop(call_id, None)
            if pending is None:
                return
            worker.detached -= pending.wake is None
            if result is not None:
                pending.span = span if _is_span_ids(span) else None
                if pending.future is None:  # a caller of ``call`` (or one interrupted): one step
                    pending.result = result
                    self._rouse(worker, pending)
                    return
        self._answer(worker, pending, result if result is not None else self._lost(worker, call_id, pending))

    def _answer(self, worker: _Worker, pending: _Pending, result: CallResult) -> None:
        with self._cond:
            pending.result = result
            self._rouse(worker, pending)
        if pending.future is not None:
            pending.future.set_result(result)

    def _died(self, worker: _Worker) -> None:
        """Answer the calls a dead worker left, and start its replacement unless closing."""
        worker.process.join()
        with self._cond:
            worker.alive = False
            left = dict(worker.pending)
            worker.pending.clear()
            worker.detached = 0
            closing = self._closed
        for fd in worker.nudge:
            os.close(fd)
        with worker.send_lock:  # (a sender uses them under it: the descriptors' numbers may be reused)
            worker.conn.close()
            worker.answers.close()
            os.close(worker.bell)
            worker.bell = -1
            if worker.page is not None:
                worker.page.close()
                worker.page = None

        if not closing:
            logger.error("worker %d ended (exit code %s); replacing it", worker.pid, worker.process.exitcode)
        for call_id, pending in left.items():
            self._answer(worker, pending, self._lost(worker, call_id, pending))
        if not closing:
            self._replace(worker)

    def _replace(self, worker: _Worker) -> None:
        if not worker.ready:  # it died starting: do not spin
            time.sleep(self._restart_delay)
            self._restart_delay = min(self._restart_delay * 2, MAX_RESTART_DELAY_S)
        with self._cond:
            if self._closed:
                return
            fresh = self._start()
            self._workers[self._workers.index(worker)] = fresh
            self._cond.notify_all()

    def _lost(self, worker: _Worker, call_id: str, pending: _Pending) -> CallResult:
        """The answer of a call whose worker died or failed before answering; audited once."""
        call = Call(pending.name, pending.value, pending.principal, call_id, started=pending.started)
        where = {"worker_pid": worker.pid}
        return self._recorder.lost(call, what="the worker process running this call", where=where, run=pending.run)


def _is_span_ids(value: Any) -> bool:
    """A worker's ``(trace_id, span_id)``: two positive ints (anything else is not taken)."""
    return isinstance(value, tuple) and len(value) == 2 and all(type(part) is int and part > 0 for part in value)


def _report(tracer: Any, started_ns: int, span: tuple[int, int] | None, result: CallResult) -> None:
    """The call's ``glovebox.calls`` line, and its ``glovebox.call`` span here unless the worker recorded it."""
    if span is not None:
        _tracing.remote_call(span, result)
    elif tracer is not None:
        _tracing.past_call(tracer, started_ns, result)
    else:
        log_call(result.ok, result.code, result.meta)
