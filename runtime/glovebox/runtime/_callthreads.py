"""``CallThreads``: the threads ``Runtime.acall`` runs admitted calls on, grown off the event loop.

A ``ThreadPoolExecutor`` starts a thread inside ``submit`` whenever none is
idle, and ``Thread.start`` waits until the new thread has taken the GIL: on a
burst of a thousand ``acall``\\ s the event loop's thread spent 0.9–1.6 s
starting 600+ threads, one GIL hand-over each, while the calls already running
held it. Here ``submit`` only queues the job: a spawner thread of the pool's
own starts the workers the queue needs (up to ``max_threads``), so the event
loop never waits for a thread to start. Idle workers are kept, as the
executor's are, so a server's later bursts find them ready.

Jobs run in submission order; a job's ``Future`` is cancelled (and its
``done`` callbacks called) when it is cancelled before a worker takes it, as
with ``ThreadPoolExecutor``. On ``shutdown``, at interpreter exit, or when the
pool is dropped unclosed, the workers finish the jobs already queued and stop.
"""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["CallThreads"]

T = TypeVar("T")

_Job = tuple[Future[Any], Callable[[], Any]] | None  # None: a worker's signal to stop


class CallThreads:
    """A pool of up to ``max_threads`` worker threads whose ``submit`` never starts a thread."""

    def __init__(self, max_threads: int, name: str = "glovebox") -> None:
        if max_threads < 1:
            raise ValueError("max_threads must be at least 1")
        self._state = state = _State(max_threads, name)
        weakref.finalize(self, state.stop)
        register = getattr(threading, "_register_atexit", None)  # run before the interpreter joins threads
        if register is not None:
            with contextlib.suppress(RuntimeError):  # the interpreter is already exiting
                register(functools.partial(_stop_if_alive, weakref.ref(state)))

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Queue ``fn``; its result (or exception) comes in the returned future.

        Raises:
            RuntimeError: the pool is shut down.
        """
        return self._state.submit(fn)

    @property
    def threads(self) -> int:
        """Worker threads started so far."""
        return len(self._state.workers)

    def shutdown(self, wait: bool = True) -> None:
        """Refuse new jobs; the workers finish the queued ones and stop (joined when ``wait``). Idempotent."""
        state = self._state
        state.stop()
        if wait:
            with state.lock:
                workers = list(state.workers)
            for worker in workers:
                if worker is not threading.current_thread():
                    _join(state, worker)


def _join(state: _State, worker: threading.Thread) -> None:
    """Join ``worker``, which the spawner may have counted and not started yet."""
    while True:
        try:
            worker.join()
            return
        except RuntimeError:  # counted, its start still under way
            with state.lock:
                if worker not in state.workers:
                    return  # its start failed: nothing to join
            time.sleep(0.001)


class _State:
    """What the workers and the spawner share (never the pool itself, so an unclosed pool can be dropped)."""

    def __init__(self, max_threads: int, name: str) -> None:
        self.max = max_threads
        self.name = name
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.workers: list[threading.Thread] = []
        self.idle = 0  # workers not running a job (starting, or waiting for one)
        self.closed = False
        self.spawner: threading.Thread | None = None

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        with self.lock:
            if self.closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self.jobs.put((future, fn))
            short = self.idle < self.jobs.qsize() and len(self.workers) < self.max
            if short and self.spawner is None:
                self.spawner = threading.Thread(target=self.spawn, name=f"{self.name}-spawner", daemon=True)
                self.spawner.start()  # once in the pool's life
        if short:
            self.wake.set()
        return future

    def stop(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            # jobs queued before the spawner started any worker: one worker runs them
            extra = self._worker() if not self.workers and self.jobs.qsize() else None
            for _ in self.workers:  # behind every queued job: those run first
                self.jobs.put(None)
        self.wake.set()
        if extra is not None:
            self._start(extra)

    def _start(self, worker: threading.Thread) -> bool:
        """Start a counted worker; when the system refuses a thread, uncount it (False)."""
        try:
            worker.start()
        except RuntimeError:
            with self.lock:
                self.workers.remove(worker)
                self.idle -= 1
            return False
        return True

    def spawn(self) -> None:
        """Start the workers the queue needs, whenever ``submit`` finds too few idle."""
        while True:
            self.wake.wait()
            self.wake.clear()
            while True:
                with self.lock:
                    if self.closed or len(self.workers) >= self.max or self.jobs.qsize() <= self.idle:
                        break
                    worker = threading.Thread(target=self.work, name=f"{self.name}-{len(self.workers)}", daemon=False)
                    self.workers.append(worker)
                    self.idle += 1
                if not self._start(worker):
                    break
            if self.closed:
                return

    def _worker(self) -> threading.Thread:
        """A new worker, counted (the lock held); the caller starts it."""
        worker = threading.Thread(target=self.work, name=f"{self.name}-{len(self.workers)}", daemon=False)
        self.workers.append(worker)
        self.idle += 1
        return worker

    def work(self) -> None:
        jobs, lock = self.jobs, self.lock
        while True:
            job = jobs.get()
            if job is None:
                return
            with lock:
                self.idle -= 1
            future, fn = job
            if future.set_running_or_notify_cancel():
                try:
                    result = fn()
                except BaseException as error:
                    future.set_exception(error)
                else:
                    future.set_result(result)
            del job, future, fn  # nothing of the job outlives it while the worker waits
            with lock:
                self.idle += 1


def _stop_if_alive(held: weakref.ref[_State]) -> None:
    state = held()
    if state is not None:
        state.stop()
