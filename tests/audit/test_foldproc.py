"""The home's fold process: started by a writer, one per home, killed and restarted without losing a row."""

from __future__ import annotations

import logging
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
import glovebox.audit._foldproc as foldproc
from glovebox.audit import _rowform as _audit


def record(call_id: str) -> dict[str, Any]:
    return {
        "call_id": call_id,
        "principal": "anonymous",
        "tool": "echo@1.0.0",
        "outcome": "ok",
        "fuel_used": 1,
        "duration_ms": 0.5,
        "egress": {"denials": []},
        "input": {"naïve": "日本\ud800"},
    }


def eventually(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Poll ``check`` until it returns something true (a loaded machine may take seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def chained(home: Path) -> list[str]:
    """The call ids in the chain, read raw: no fold of this test's own."""
    if not (home / "audit.sqlite").exists():
        return []
    with sqlite3.connect(home / "audit.sqlite") as db:
        return [row[0] for row in db.execute("SELECT call_id FROM audit ORDER BY seq")]


def folders_of(home: Path) -> list[int]:
    """The pids of the fold processes running for ``home`` (read from /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and str(home).encode() in argv and foldproc._BOOT.encode() in argv:
            pids.append(int(entry.name))
    return pids


@pytest.fixture(autouse=True)
def _quick_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(foldproc, "START_DELAY_S", 0.05)


def test_a_writers_rows_are_chained_by_a_process_of_the_home_not_a_thread(tmp_path: Path) -> None:
    log = glovebox.AuditLog(tmp_path)
    log.append(record("a"))
    eventually(lambda: chained(tmp_path) == ["a"], "the row is chained with no reader folding")
    assert foldproc.folder_running(tmp_path)
    assert log._writer.folder is not None and folders_of(tmp_path) == [log._writer.folder.pid]
    assert not any(thread.name == "glovebox-audit-fold" for thread in threading.enumerate())
    log.append(record("b"))
    eventually(lambda: chained(tmp_path) == ["a", "b"], "a later row is chained too")
    assert glovebox.AuditLog(tmp_path).verify().ok
    log.close()


def test_a_killed_fold_process_is_restarted_and_no_row_is_lost_or_doubled(tmp_path: Path) -> None:
    log = glovebox.AuditLog(tmp_path)
    log.append(record("r0"))
    (first,) = eventually(lambda: folders_of(tmp_path), "a folder starts")
    os.kill(first, signal.SIGKILL)
    eventually(lambda: first not in folders_of(tmp_path), "the folder is dead")
    for n in range(1, 200):
        log.append(record(f"r{n}"))
    (second,) = eventually(lambda: folders_of(tmp_path), "the writer starts another folder")
    assert second != first
    eventually(lambda: len(chained(tmp_path)) == 200, "the new folder chains every row")
    assert chained(tmp_path) == [f"r{n}" for n in range(200)]
    log.close()
    verification = glovebox.AuditLog(tmp_path).verify()
    assert verification.ok and verification.rows == 200, verification.problem


@pytest.mark.slow  # fold processes killed and restarted
def test_a_fold_process_killed_mid_fold_loses_and_doubles_nothing(tmp_path: Path) -> None:
    log = glovebox.AuditLog(tmp_path)
    log.append(record("start"))  # the first append asks for a folder
    returned = ["start"]
    for round_ in range(5):
        (pid,) = eventually(lambda: folders_of(tmp_path), "a folder runs")
        for n in range(300):  # a burst, so the kill lands while it folds
            log.append(record(f"k{round_}-{n}"))
            returned.append(f"k{round_}-{n}")
        os.kill(pid, signal.SIGKILL)
        eventually(lambda: pid not in folders_of(tmp_path), "the folder is dead")  # noqa: B023 (called at once)
        log.append(record(f"after{round_}"))  # the next check starts a fresh one
        returned.append(f"after{round_}")
    log.close()
    reader = glovebox.AuditLog(tmp_path)
    verification = reader.verify()
    assert verification.ok, verification.problem
    assert [r["call_id"] for r in reader.records()] == returned
    reader.close()


CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import glovebox
    import glovebox.audit._foldproc as foldproc
    foldproc.START_DELAY_S = 0.0
    foldproc.CHECK_S = 0.0  # check at every append: the race between writers is as tight as it gets
    log = glovebox.AuditLog(Path(sys.argv[1]))
    row = {"principal": "p", "tool": "t", "outcome": "ok", "fuel_used": 0, "duration_ms": 0.0, "egress": {}}
    for n in range(int(sys.argv[3])):
        log.append({**row, "call_id": f"{sys.argv[2]}-{n}"})
        print(f"{sys.argv[2]}-{n}", flush=True)
    if sys.argv[4] == "hold":
        time.sleep(600)  # keeps its journal file, and so the folder, alive until killed
    log.close()
    """
)


def test_two_writer_processes_share_one_fold_process(tmp_path: Path) -> None:
    children = [
        subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), tag, "300", "hold"], stdout=subprocess.PIPE)
        for tag in ("x", "y")
    ]
    try:
        for child in children:
            assert child.stdout is not None
            for _ in range(300):
                child.stdout.readline()
        eventually(lambda: len(chained(tmp_path)) == 600, "one folder chains both writers' rows")
        assert len(folders_of(tmp_path)) == 1
    finally:
        for child in children:
            child.kill()
            child.wait()
            assert child.stdout is not None
            child.stdout.close()
    assert glovebox.AuditLog(tmp_path).verify().rows == 600


def test_a_writer_and_its_folder_both_killed_keep_every_returned_row(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), "w", "400", "hold"], stdout=subprocess.PIPE)
    assert child.stdout is not None
    returned = [child.stdout.readline().decode().strip() for _ in range(400)]
    for pid in folders_of(tmp_path):
        os.kill(pid, signal.SIGKILL)
    child.kill()
    child.wait()
    child.stdout.close()
    reader = glovebox.AuditLog(tmp_path)
    assert [r["call_id"] for r in reader.records()] == returned
    assert reader.verify().ok
    reader.close()


def test_the_fold_process_exits_once_no_writer_is_left(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path), "e", "50", "close"], capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    # The child's folder outlives it, folds what is left and exits (its IDLE_EXIT_S is the default there).
    eventually(lambda: not folders_of(tmp_path), "the folder exits", timeout=120)
    assert not foldproc.folder_running(tmp_path)
    assert list((tmp_path / "audit.journal").iterdir()) == []
    assert len(chained(tmp_path)) == 50


def test_a_fold_process_that_cannot_start_is_retried_and_readers_still_see_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python-here"))
    log = glovebox.AuditLog(tmp_path)
    with caplog.at_level(logging.WARNING, logger="glovebox.audit"):
        log.append(record("a"))
        eventually(lambda: "cannot start the audit fold process" in caplog.text, "the failure is logged")
    assert not foldproc.folder_running(tmp_path)
    assert [r["call_id"] for r in log.records()] == ["a"]  # a reader folds for itself
    log.close()


def test_a_fold_process_that_fails_is_restarted_with_a_pause_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(foldproc, "_BOOT", "import sys; sys.exit(3)")  # a folder that dies at once
    log = glovebox.AuditLog(tmp_path)
    with caplog.at_level(logging.WARNING, logger="glovebox.audit"):
        log.append(record("a"))
        eventually(
            lambda: log._writer.folder is not None and log._writer.folder._failures == 0 and log._writer.folder.pid,
            "started",
        )

        def failed_twice() -> bool:
            log.append(record("x"))
            return caplog.text.count("exited with status 3") >= 2

        eventually(failed_twice, "the writer notices its folder died, restarts it, and notices again")
    assert "another starts in 0.0 s" in caplog.text  # the first failure is retried at once
    assert "another starts in 1.0 s" in caplog.text  # the next after a pause, which grows
    log.close()  # close folds what the folders could not
    assert chained(tmp_path)[0] == "a"


def test_old_canonical_journal_lines_and_plain_ones_fold_into_one_chain(tmp_path: Path) -> None:
    log = glovebox.AuditLog(tmp_path)
    log.append(record("plain"))
    assert log._writer.journal._fd is not None
    line = b"%d %s\n" % (time.time_ns(), _audit.body(record("canonical")))  # what an older release wrote
    os.write(log._writer.journal._fd, line)
    log.append({**record("big"), "output": "x" * (_audit.RAW_LINE_CHARS + 1)})  # too large for a plain line
    log.close()
    reader = glovebox.AuditLog(tmp_path)
    rows = list(reader.records())
    assert [r["call_id"] for r in rows] == ["plain", "canonical", "big"]
    assert rows[0]["input"] == rows[1]["input"] and "\\ud800" in rows[0]["input"]  # escaped the same way
    assert rows[0]["time"].endswith("+00:00") and reader.verify().ok
    reader.close()


def test_the_fold_process_holds_none_of_its_writers_inherited_descriptors(tmp_path: Path) -> None:
    read, write = os.pipe()  # stands for a ProcessPool worker's pipe to its pool, inheritable in the worker
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path), "i", "5", "hold"], stdout=subprocess.PIPE, pass_fds=(write,)
    )
    os.close(write)
    try:
        (pid,) = eventually(lambda: folders_of(tmp_path), "the writer starts a folder")
        pipe = os.readlink(f"/proc/self/fd/{read}")  # pipe:[inode]

        def let_go() -> bool:  # it closes them as it starts; else a pool would wait on its worker's pipe forever
            held = []
            try:
                links = list(Path(f"/proc/{pid}/fd").iterdir())
            except FileNotFoundError:  # the folder has exited: it holds nothing
                return True
            for link in links:
                try:
                    held.append(os.readlink(link))
                except FileNotFoundError:  # closed while it was being looked at
                    continue
            return pipe not in held

        eventually(let_go, "the folder closes the descriptors it inherited", timeout=30)
    finally:
        child.kill()
        child.wait()
        assert child.stdout is not None
        child.stdout.close()
        os.close(read)


def test_a_fold_process_with_nothing_to_do_exits_and_the_next_append_starts_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A live, idle writer keeps its journal file: the folder must not wait on it for ever.
    monkeypatch.setattr(foldproc, "QUIET_EXIT_S", 1.0)
    log = glovebox.AuditLog(tmp_path)
    log.append(record("a"))
    eventually(lambda: chained(tmp_path) == ["a"], "the row is chained")
    first = folders_of(tmp_path)
    assert first and list((tmp_path / "audit.journal").iterdir()), "the writer still holds its journal file"
    eventually(lambda: not folders_of(tmp_path), "the idle folder exits while its writer lives", timeout=30)
    log.append(record("b"))
    eventually(lambda: chained(tmp_path) == ["a", "b"], "the next append starts another folder")
    assert folders_of(tmp_path) not in ([], first)
    log.close()
    assert glovebox.AuditLog(tmp_path).verify().ok
