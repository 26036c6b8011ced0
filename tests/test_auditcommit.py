"""Audit appends: one chain under concurrent threads, AuditLogs and processes; shared commits."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox import _audit
from glovebox._auditcommit import GENESIS, GroupCommit, Pending


def record(call_id: str, **extra: Any) -> dict[str, Any]:
    base = {
        "call_id": call_id,
        "principal": "anonymous",
        "tool": "echo@1.0.0",
        "digest": "sha256:" + "a" * 64,
        "input_digest": "sha256:" + "b" * 64,
        "decision": "allow",
        "outcome": "ok",
        "fuel_used": 10,
        "duration_ms": 0.5,
        "egress": {"denials": []},
        "input": None,
        "output": None,
    }
    return {**base, **extra}


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"input": {"b": 1, "a": "naïve 日本"}, "output": [1, 2.5, None]},
        {"principal": "p\ud800", "tool": "t\udfff@1", "input": {"k\ud800": "v"}},
        {"output": "x" * (_audit.MAX_TEXT_CHARS + 5), "principal": "p" * 5000},
        {"truncated": "all", "egress": {}, "input": None},
        {"decision": None, "digest": None, "input_digest": None, "outcome": "tool_not_found"},
        {"principal": 42, "fuel_used": True, "duration_ms": float("inf")},
        {"principal": 'q"\\\n\t\x00\u2028', "duration_ms": -0.0, "fuel_used": 2**70},
        {"duration_ms": 1e-7, "tool": "ünï@2"},
        {"egress": {"denials": [{"host": "x"}], "http": []}},
        {"egress": {"denials": ()}, "output": {"denials": []}},
    ],
)
def test_the_hash_cut_around_seq_is_the_row_hash(extra: dict[str, Any]) -> None:
    pending = _audit._prepare(record("c1", **extra))
    got = pending.chain(7, "f" * 64)
    assert pending.row["seq"] == 7 and pending.row["prev_hash"] == "f" * 64
    assert got == _audit.row_hash("f" * 64, pending.row)


def test_threads_and_two_logs_on_one_home_keep_one_chain(tmp_path: Path) -> None:
    logs = [glovebox.AuditLog(tmp_path), glovebox.AuditLog(tmp_path)]
    seqs: dict[str, int] = {}

    def append(worker: int) -> None:
        log = logs[worker % 2]
        for i in range(150):
            call_id = f"w{worker}-{i}"
            seqs[call_id] = log.append(record(call_id))

    threads = [threading.Thread(target=append, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    check = glovebox.AuditLog(tmp_path)
    verification = check.verify()
    assert verification.ok, verification.problem
    assert verification.rows == 900
    assert {r["call_id"]: r["seq"] for r in check.records()} == seqs  # each append returned its own row's seq
    for log in [*logs, check]:
        log.close()


def test_a_row_appended_by_another_writer_is_chained_onto(tmp_path: Path) -> None:
    first, second = glovebox.AuditLog(tmp_path), glovebox.AuditLog(tmp_path)
    assert first.append(record("a")) == 1
    assert second.append(record("b")) == 2
    assert first.append(record("c")) == 3  # its head in memory (row 1) is stale: re-read, not a fork
    assert second.append(record("d")) == 4
    assert first.verify().ok and first.verify().rows == 4
    first.close()
    second.close()


def test_a_head_row_changed_underneath_is_not_chained_onto_from_memory(tmp_path: Path) -> None:
    log = glovebox.AuditLog(tmp_path)
    log.append(record("a"))
    log.append(record("b"))
    with log._database.connection() as db:
        db.execute("DELETE FROM audit WHERE seq = 2")
    assert log.append(record("c")) == 2  # chained onto row 1, as the database says
    assert log.verify().ok
    log.close()


def test_a_row_the_table_refuses_is_not_dropped_silently(tmp_path: Path) -> None:
    log = glovebox.AuditLog(tmp_path)
    log.append(record("a"))
    with pytest.raises(sqlite3.IntegrityError, match="outcome"):
        log.append(record("b", outcome=None))  # the one-statement append ignores it; the locked one raises
    assert log.append(record("c")) == 2
    assert log.verify().ok and [r["call_id"] for r in log.records()] == ["a", "c"]
    log.close()


def test_a_table_that_allows_a_null_hash_is_appended_to_under_the_write_lock(tmp_path: Path) -> None:
    columns = ", ".join(f"{name} {'INTEGER PRIMARY KEY' if name == 'seq' else ''}" for name in _audit._COLUMNS)
    with sqlite3.connect(tmp_path / "audit.sqlite") as db:
        db.execute(f"CREATE TABLE audit ({columns})")
    first, second = glovebox.AuditLog(tmp_path), glovebox.AuditLog(tmp_path)
    assert first._committer._insert_at_head is None
    assert [first.append(record("a")), second.append(record("b")), first.append(record("c"))] == [1, 2, 3]
    assert first.verify().ok and all(r["hash"] for r in first.records())
    first.close()
    second.close()


CHILD = textwrap.dedent(
    """
    import sys, threading
    import glovebox
    log = glovebox.AuditLog(__import__("pathlib").Path(sys.argv[1]))
    out = threading.Lock()

    def work(worker):
        for i in range(400):
            call_id = f"{sys.argv[2]}-{worker}-{i}"
            log.append({"call_id": call_id, "principal": "p", "tool": "t", "outcome": "ok",
                        "fuel_used": 0, "duration_ms": 0.0, "egress": {}})
            with out:
                print(call_id, flush=True)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    """
)


def _spawn(home: Path, tag: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(home), tag], stdout=subprocess.PIPE, text=True, env=os.environ.copy()
    )


def test_processes_with_threads_keep_one_chain(tmp_path: Path) -> None:
    children = [_spawn(tmp_path, tag) for tag in ("x", "y")]
    returned = []
    for child in children:
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0
        returned += out.split()
    log = glovebox.AuditLog(tmp_path)
    verification = log.verify()
    assert verification.ok, verification.problem
    assert verification.rows == len(returned) == 3200
    log.close()


def test_sigkill_of_a_threaded_appender_loses_no_returned_row(tmp_path: Path) -> None:
    child = _spawn(tmp_path, "k")
    assert child.stdout is not None
    returned = []
    for line in child.stdout:
        returned.append(line.strip())
        if len(returned) == 500:
            os.kill(child.pid, signal.SIGKILL)
            break
    returned += [line.strip() for line in child.stdout if line.strip()]
    child.stdout.close()
    assert child.wait(timeout=60) == -signal.SIGKILL, "the child was killed mid-burst"
    assert 500 <= len(returned) < 1600
    log = glovebox.AuditLog(tmp_path)
    assert set(returned) <= {r["call_id"] for r in log.records()}
    assert log.verify().ok
    log.close()


class _HeldCommit:
    """Wraps GroupCommit._commit: the first batch waits for ``release``; batches are recorded."""

    def __init__(self, committer: GroupCommit) -> None:
        self.inner: Callable[[list[Pending]], None] = committer._commit
        self.entered = threading.Event()
        self.release = threading.Event()
        self.batches: list[list[str]] = []

    def __call__(self, batch: list[Pending]) -> None:
        self.batches.append([p.row["call_id"] for p in batch])
        if len(self.batches) == 1:
            self.entered.set()
            self.release.wait()
        self.inner(batch)


def _wait_for_queue(committer: GroupCommit, length: int) -> None:
    while len(committer._queue) < length:  # the followers are queueing behind the held leader
        time.sleep(0.001)


def test_rows_waiting_behind_a_commit_are_committed_together(tmp_path: Path) -> None:
    log = glovebox.AuditLog(tmp_path)
    committer = log._committer
    held = _HeldCommit(committer)
    committer._commit = held  # type: ignore[method-assign]
    leader = threading.Thread(target=log.append, args=(record("lead"),))
    leader.start()
    assert held.entered.wait(30)
    followers = [threading.Thread(target=log.append, args=(record(f"f{n}"),)) for n in range(5)]
    for thread in followers:
        thread.start()
    _wait_for_queue(committer, 5)
    held.release.set()
    for thread in [leader, *followers]:
        thread.join()
    assert held.batches[0] == ["lead"]
    assert sorted(held.batches[1]) == [f"f{n}" for n in range(5)]  # one commit for all five
    assert len(held.batches) == 2
    assert log.verify().ok and log.verify().rows == 6
    log.close()


def test_a_failed_commit_fails_each_row_of_its_batch_and_the_next_commit_works(tmp_path: Path) -> None:
    log = glovebox.AuditLog(tmp_path)
    committer = log._committer
    held = _HeldCommit(committer)
    inner = held.inner

    def broken(batch: list[Pending]) -> None:
        if len(held.batches) == 2:
            raise OSError("disk full")
        inner(batch)

    held.inner = broken
    committer._commit = held  # type: ignore[method-assign]
    errors: list[BaseException] = []

    def append(call_id: str) -> None:
        try:
            log.append(record(call_id))
        except OSError as exc:
            errors.append(exc)

    leader = threading.Thread(target=append, args=("lead",))
    leader.start()
    assert held.entered.wait(30)
    followers = [threading.Thread(target=append, args=(f"f{n}",)) for n in range(3)]
    for thread in followers:
        thread.start()
    _wait_for_queue(committer, 3)
    held.release.set()
    for thread in [leader, *followers]:
        thread.join()
    assert len(errors) == 3 and all(str(e) == "disk full" for e in errors)
    assert log.append(record("after")) == 2
    assert [r["call_id"] for r in log.records()] == ["lead", "after"]
    assert log.verify().ok
    log.close()


def test_an_empty_log_starts_at_genesis(tmp_path: Path) -> None:
    log = glovebox.AuditLog(tmp_path)
    assert log.append(record("a")) == 1
    assert next(log.records())["prev_hash"] == GENESIS
    log.close()
