"""CallThreads: the acall pool whose submit never starts a thread on the caller's thread."""

from __future__ import annotations

import threading
import time

import pytest

from glovebox.runtime._callthreads import CallThreads


def test_jobs_run_and_answer_in_their_futures() -> None:
    pool = CallThreads(4)
    futures = [pool.submit(lambda i=i: i * i) for i in range(50)]
    assert [f.result(timeout=10) for f in futures] == [i * i for i in range(50)]
    pool.shutdown()


def test_an_exception_reaches_the_future() -> None:
    pool = CallThreads(1)
    future = pool.submit(lambda: 1 // 0)
    with pytest.raises(ZeroDivisionError):
        future.result(timeout=10)
    pool.shutdown()


def test_submit_starts_no_worker_on_the_callers_thread() -> None:
    pool = CallThreads(8, "cts")
    before = set(threading.enumerate())  # the objects: a new thread may reuse an ident of one that ended since
    release = threading.Event()
    futures = [pool.submit(lambda: release.wait(10)) for _ in range(8)]
    deadline = time.monotonic() + 10
    while pool.threads < 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    release.set()
    assert all(f.result(timeout=10) for f in futures)
    started = [t for t in threading.enumerate() if t not in before and t.name.startswith("cts-")]
    assert {t.name for t in started} >= {"cts-spawner", *(f"cts-{i}" for i in range(8))}
    assert pool.threads == 8  # one per blocked job, never more than max_threads
    pool.shutdown()
    assert not any(t.is_alive() for t in started if t.name != "cts-spawner")


def test_max_threads_bounds_the_workers_and_queued_jobs_still_run() -> None:
    pool = CallThreads(2)
    futures = [pool.submit(lambda: time.sleep(0.01) or threading.current_thread().name) for _ in range(20)]
    names = {f.result(timeout=10) for f in futures}
    assert len(names) <= 2 and pool.threads <= 2
    pool.shutdown()


def test_a_job_cancelled_before_it_ran_calls_its_callbacks_and_never_runs() -> None:
    pool = CallThreads(1)
    gate = threading.Event()
    first = pool.submit(lambda: gate.wait(10))
    ran: list[int] = []
    second = pool.submit(lambda: ran.append(1))
    seen: list[bool] = []
    second.add_done_callback(lambda f: seen.append(f.cancelled()))
    assert second.cancel()
    gate.set()
    assert first.result(timeout=10)
    pool.shutdown()
    assert seen == [True] and ran == []


def test_shutdown_runs_the_queued_jobs_then_refuses_new_ones() -> None:
    pool = CallThreads(1)
    futures = [pool.submit(lambda i=i: (time.sleep(0.005), i)[1]) for i in range(10)]
    pool.shutdown(wait=True)
    assert [f.result(timeout=0) for f in futures] == list(range(10))
    with pytest.raises(RuntimeError):
        pool.submit(lambda: None)
    pool.shutdown()  # idempotent


def test_a_dropped_pool_stops_its_workers() -> None:
    pool = CallThreads(2, "dropped")
    pool.submit(lambda: None).result(timeout=10)
    workers = [t for t in threading.enumerate() if t.name.startswith("dropped-") and t.name != "dropped-spawner"]
    assert workers
    del pool
    for worker in workers:
        worker.join(timeout=10)
    assert not any(worker.is_alive() for worker in workers)


def test_jobs_queued_before_any_worker_started_still_run_on_shutdown() -> None:
    pool = CallThreads(1)
    pool._state.spawner = threading.Thread(target=lambda: None)  # a spawner that never starts a worker
    future = pool.submit(lambda: 1)
    pool.shutdown()
    assert future.result(timeout=10) == 1
