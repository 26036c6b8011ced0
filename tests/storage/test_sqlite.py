"""The SQLite databases under a home: opened by many processes at once, a bounded pool
of connections borrowed per use, nothing reopened after close."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import threading
from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

import glovebox
from glovebox.storage._sqlite import Database, retry_locked

OPENERS = 40


def _open_home(home: str, barrier: Barrier) -> None:
    barrier.wait()
    glovebox.Runtime(home=home).close()


@pytest.mark.slow  # processes racing to open one home
def test_many_processes_open_a_fresh_home_at_once(tmp_path: Path) -> None:
    home = tmp_path / "fresh"
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["glovebox"])
    barrier = ctx.Barrier(OPENERS)
    workers = [ctx.Process(target=_open_home, args=(str(home), barrier)) for _ in range(OPENERS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    assert [worker.exitcode for worker in workers] == [0] * OPENERS
    for name in ("registry.sqlite", "audit.sqlite", "approvals.sqlite"):
        db = sqlite3.connect(home / name)
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        db.close()


def test_retry_locked_waits_out_a_lock_and_gives_up_on_other_errors() -> None:
    pauses: list[float] = []
    answers = iter([sqlite3.OperationalError("database is locked")] * 3 + [None])

    def flaky() -> str:
        error = next(answers)
        if error is not None:
            raise error
        return "done"

    assert retry_locked(flaky, sleep=pauses.append) == "done"
    assert len(pauses) == 3 and pauses[0] < pauses[-1]
    memory = sqlite3.connect(":memory:")
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        retry_locked(lambda: memory.execute("SELECT * FROM missing_table"), sleep=pauses.append)
    memory.close()
    assert len(pauses) == 3


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _in_threads(count: int, job: Callable[[], None]) -> None:
    for _ in range(count):
        thread = threading.Thread(target=job)
        thread.start()
        thread.join()


def test_short_lived_threads_do_not_leak_connections(
    runtime: glovebox.Runtime, build_guest: Callable[[str], Path]
) -> None:
    runtime.register(build_guest("echo"), {"name": "echo", "version": "1.0.0"})
    assert runtime.call("echo", {"n": 0}).ok
    before = _fds()
    results: list[bool] = []
    _in_threads(200, lambda: results.append(runtime.call("echo", {"n": 1}).ok))
    assert results == [True] * 200
    assert _fds() - before < 10  # the threads borrowed pooled connections and gave them back
    assert runtime._registry._database.open_connections == 1
    assert len(list(runtime.audit.records())) == 201


def test_a_thread_using_a_closed_runtime_gets_value_error(
    runtime: glovebox.Runtime, build_guest: Callable[[str], Path]
) -> None:
    runtime.register(build_guest("echo"), {"name": "echo", "version": "1.0.0"})
    runtime.close()
    errors: list[BaseException] = []

    def late() -> None:
        try:
            runtime.call("echo", {})
        except ValueError as exc:
            errors.append(exc)

    _in_threads(1, late)
    assert [str(error) for error in errors] == ["this Runtime is closed"]


def test_a_closed_database_opens_no_connection_for_a_new_thread(tmp_path: Path) -> None:
    database = Database(tmp_path / "x.sqlite", "CREATE TABLE IF NOT EXISTS t (x INTEGER);")
    database.close()
    errors: list[BaseException] = []

    def late() -> None:
        try:
            with database.connection():
                pass
        except ValueError as exc:
            errors.append(exc)

    _in_threads(1, late)
    assert [str(error) for error in errors] == ["this Runtime is closed"]
    assert database.open_connections == 0


def test_writers_in_one_process_wait_in_line_instead_of_timing_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Thousands of calls in flight commit audit rows at once: SQLite's busy handler
    # polls and is not fair, so writers of one process queue on a lock of their own.
    monkeypatch.setattr(glovebox.storage._sqlite, "BUSY_TIMEOUT_S", 0.05)
    database = Database(tmp_path / "line.sqlite", "CREATE TABLE IF NOT EXISTS t (n INTEGER);")
    holding, errors = threading.Event(), []

    def hold() -> None:
        with database.write() as db:
            db.execute("INSERT INTO t VALUES (0)")
            holding.set()
            threading.Event().wait(0.5)  # the write lock, held well past the busy timeout

    def write(n: int) -> None:
        try:
            with database.write() as db:
                db.execute("INSERT INTO t VALUES (?)", (n,))
        except sqlite3.OperationalError as exc:
            errors.append(exc)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait()
    writers = [threading.Thread(target=write, args=(n,)) for n in range(1, 17)]
    for thread in writers:
        thread.start()
    for thread in [holder, *writers]:
        thread.join()
    assert errors == []
    with database.connection() as db:
        assert db.execute("SELECT count(*) FROM t").fetchone() == (17,)
    database.close()
