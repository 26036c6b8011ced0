"""Audit appends: journaled per writer, folded into one chain under threads, AuditLogs and processes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

import glovebox
import glovebox.audit._foldproc
import glovebox.audit._journal
from glovebox.audit import _rowform as _audit
from glovebox.audit._chain import GENESIS
from glovebox.audit._journal import Journal


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
    given = {"time": "2026-12-05T00:00:00.000001+00:00", **record("c1", **extra)}
    pending = _audit.prepare(given)
    # The row prepared is the row its canonical JSON reads back as (the fold no longer reads it back).
    read_back = _audit._pending(_audit.body(given)).row
    assert repr(sorted(pending.row.items())) == repr(sorted(read_back.items()))
    got = pending.chain(7, "f" * 64)
    assert pending.row["seq"] == 7 and pending.row["prev_hash"] == "f" * 64
    assert got == _audit.row_hash("f" * 64, pending.row)


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"input": {"b": 1, "a": "naïve 日本 \u2028"}, "output": [1, 2.5, None, 1e-05, 1e16, -(2**63)]},
        {"principal": "p\ud800", "input": {"k\ud800": "v"}},  # a lone surrogate: orjson refuses it
        {"fuel_used": 2**70},  # past 64 bits: orjson refuses it
        {"duration_ms": float("nan")},  # orjson would write null: never given to it
        {"egress": {"denials": [{"ms": float("-inf")}]}},
        {"output": (1, float("inf"))},
        {"input": {1: "a key that is not a string"}},
        {"principal": type("Name", (str,), {})("a str subclass")},
        {"egress": {"denials": [], "http": [{"url": "https://x/\n", "ms": 0.1 + 0.2, "status": 200}]}},
    ],
)
def test_a_line_reads_back_as_the_record_the_c_encoder_would_give(extra: dict[str, Any]) -> None:
    """Whether orjson or the C encoder wrote a line, the fold reads the same record (so the same row and hash)."""
    given = record("c1", **extra)
    written = _audit.line(5, given)
    assert written.startswith(b"5 r") and written.endswith(b"\n") and b"\n" not in written[:-1]
    read = json.loads(written[3:])
    expected = json.loads(_audit._PLAIN(given))
    assert repr(read) == repr(expected)  # repr: NaN == NaN, -0.0 and 1 vs 1.0 told apart
    # The fold reads the record with orjson where orjson wrote it (the line's JSON then ends with a space).
    assert repr(_audit._read_record(written[3:-1])) == repr(expected)
    assert _audit.from_line(5, written[2:-1]).head == _audit.prepare(expected).head


@pytest.mark.parametrize(
    ("text", "orjson_reads"),
    [
        (b'{"fuel_used": 1} ', True),
        (b'{"fuel_used": 36893488147419103232}', False),  # the C encoder's line: the integer, exactly
        (b'{"duration_ms": NaN} ', False),  # orjson refuses it: json reads it
        (b'{"principal": "p\\ud800"} ', False),  # a lone surrogate's escape: json reads it
    ],
)
def test_the_fold_reads_with_orjson_only_the_lines_orjson_wrote(text: bytes, orjson_reads: bool) -> None:
    """A line without the mark (the C encoder's, or a glovebox before it) is read by ``json``, exactly."""
    got = _audit._read_record(text)
    expected = json.loads(text)
    if orjson_reads:
        assert got == orjson.loads(text)
    else:
        assert repr(got) == repr(expected)


def stored_audit(home: Path) -> list[str]:
    """Everything the audit log keeps on disk, as text: each chained row and each unfolded journal line.

    Folds first (as every reader does), then reads the table and the journal
    files raw, so a test looking for a value that must never be stored sees
    both places it could be.
    """
    log = glovebox.AuditLog(home)
    log.fold()
    log.close()
    with sqlite3.connect(home / "audit.sqlite") as db:
        rows = [json.dumps(row, ensure_ascii=False) for row in db.execute("SELECT * FROM audit")]
    lines = [line for path in (home / "audit.journal").iterdir() for line in path.read_text().splitlines()]
    return rows + lines


def call_ids(log: glovebox.AuditLog) -> list[str]:
    return [r["call_id"] for r in log.records()]


def test_threads_and_two_logs_on_one_home_keep_one_chain(tmp_path: Path) -> None:
    logs = [glovebox.AuditLog(tmp_path), glovebox.AuditLog(tmp_path)]

    def append(worker: int) -> None:
        log = logs[worker % 2]
        for i in range(150):
            log.append(record(f"w{worker}-{i}"))

    threads = [threading.Thread(target=append, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    check = glovebox.AuditLog(tmp_path)
    verification = check.verify()
    assert verification.ok, verification.problem
    assert verification.rows == 900
    chained = call_ids(check)
    assert sorted(chained) == sorted(f"w{w}-{i}" for w in range(6) for i in range(150))
    for worker in range(6):  # each thread's rows keep the order it wrote them in
        mine = [c for c in chained if c.startswith(f"w{worker}-")]
        assert mine == [f"w{worker}-{i}" for i in range(150)]
    for log in [*logs, check]:
        log.close()
    assert list((tmp_path / "audit.journal").iterdir()) == []  # every journal folded and removed


def test_rows_of_two_writers_are_chained_in_the_order_they_were_written(tmp_path: Path) -> None:
    first, second = glovebox.AuditLog(tmp_path), glovebox.AuditLog(tmp_path)
    for call_id, log in zip("abcdef", [first, second, first, second, second, first], strict=True):
        log.append(record(call_id))
    assert call_ids(first) == list("abcdef")
    assert first.verify().ok and first.verify().rows == 6
    first.close()
    second.close()


def test_a_head_row_deleted_underneath_is_not_given_to_the_next_row(tmp_path: Path) -> None:
    # The next row is placed after the head the database keeps (audit_head), not after whatever
    # row the table ends with: a deleted last row leaves a gap that verify names.
    log = glovebox.AuditLog(tmp_path)
    log.append(record("a"))
    log.append(record("b"))
    log.fold()
    with log._database.connection() as db:
        db.execute("DELETE FROM audit WHERE seq = 2")
    log.append(record("c"))
    assert [(r["seq"], r["call_id"]) for r in log.records()] == [(1, "a"), (3, "c")]
    verification = log.verify()
    assert (verification.ok, verification.seq) == (False, 3) and "row(s) 2..2 were deleted" in str(verification.problem)
    log.close()


def test_a_row_the_table_refuses_is_not_dropped_silently(tmp_path: Path) -> None:
    log = glovebox.AuditLog(tmp_path)
    log.append(record("a"))
    with pytest.raises(ValueError, match="needs outcome"):
        log.append(record("b", outcome=None))
    log.append(record("c"))
    assert log.verify().ok and call_ids(log) == ["a", "c"]
    log.close()


def test_rows_the_database_refuses_stay_in_the_journal_until_it_takes_them(tmp_path: Path) -> None:
    log = glovebox.AuditLog(tmp_path)
    log.append(record("a"))
    log.fold()
    with sqlite3.connect(tmp_path / "audit.sqlite") as db:
        db.execute("CREATE TRIGGER full BEFORE INSERT ON audit BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    log.append(record("b"))  # the call is not held up by the broken database
    with pytest.raises(sqlite3.IntegrityError, match="disk full"):
        log.fold()
    assert [r["call_id"] for r in log._chain.pages(0)] == ["a"]
    with sqlite3.connect(tmp_path / "audit.sqlite") as db:
        db.execute("DROP TRIGGER full")
    log.append(record("c"))
    assert call_ids(log) == ["a", "b", "c"] and log.verify().ok
    log.close()


def test_a_number_too_large_for_sqlite_is_kept_bare_and_holds_nothing_back(tmp_path: Path) -> None:
    log = glovebox.AuditLog(tmp_path)
    log.append(record("huge", fuel_used=2**70))
    log.append(record("after"))
    rows = list(log.records())
    assert [(r["call_id"], r["fuel_used"], r["truncated"]) for r in rows] == [("huge", 0, "all"), ("after", 10, None)]
    assert log.verify().ok
    log.close()


def test_writers_never_wait_for_the_chain_lock(tmp_path: Path) -> None:
    log = glovebox.AuditLog(tmp_path)
    holder = sqlite3.connect(tmp_path / "audit.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    threads = [
        threading.Thread(target=lambda n=n: [log.append(record(f"t{n}-{i}")) for i in range(50)]) for n in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)  # every append returned while the lock was held
    assert [r["call_id"] for r in log._chain.pages(0)] == []
    holder.execute("ROLLBACK")
    holder.close()
    assert len(call_ids(log)) == 200 and log.verify().ok
    log.close()


@pytest.mark.slow  # CLI processes beside a live writer
def test_the_cli_in_another_process_sees_a_live_writers_unfolded_rows(tmp_path: Path) -> None:
    writer = glovebox.AuditLog(tmp_path)
    writer.append(record("before"))
    writer.fold()
    writer._writer.folder.stop()  # type: ignore[union-attr]
    writer.append(record("returned"))  # journaled, not folded: its writer is alive and idle
    assert [r["call_id"] for r in writer._chain.pages(0)] == ["before"]
    for command in (["tail", "--json"], ["export", "--jsonl"], ["verify"]):
        done = subprocess.run(
            [sys.executable, "-m", "glovebox", "--home", str(tmp_path), "audit", *command],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        if command[0] != "verify":
            assert '"returned"' in done.stdout
        else:
            assert done.stdout.startswith("audit log ok: 2 records"), done.stdout
    writer.close()


def test_a_dead_writers_cut_last_line_is_dropped_and_its_file_removed(tmp_path: Path) -> None:
    writer = glovebox.AuditLog(tmp_path)
    writer.append(record("whole"))
    writer._writer.folder.stop()  # type: ignore[union-attr]
    (journal,) = (tmp_path / "audit.journal").glob("*.jsonl")
    with journal.open("ab") as f:
        f.write(b'123 {"call_id": "cut", "princ')  # what a writer killed mid-write leaves
    writer._writer.journal.close()  # the writer is gone
    reader = glovebox.AuditLog(tmp_path)
    assert call_ids(reader) == ["whole"] and reader.verify().ok
    assert not journal.exists()
    reader.close()


def test_a_live_writers_unfinished_line_waits_for_its_end(tmp_path: Path) -> None:
    writer = glovebox.AuditLog(tmp_path)
    writer.append(record("first"))
    writer._writer.folder.stop()  # type: ignore[union-attr]
    line = b"%d %s\n" % (time.time_ns(), _audit.body(record("second")))
    fd = writer._writer.journal._fd
    assert fd is not None
    os.write(fd, line[:20])  # the writer is half-way through a write
    reader = glovebox.AuditLog(tmp_path)
    assert call_ids(reader) == ["first"]
    os.write(fd, line[20:])
    assert call_ids(reader) == ["first", "second"] and reader.verify().ok
    writer.close()
    reader.close()


def test_a_failed_write_moves_the_writer_to_a_fresh_file(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import resource, signal, sys
        from pathlib import Path
        import glovebox
        row = {"principal": "p", "tool": "t", "outcome": "ok", "fuel_used": 0, "duration_ms": 0.0, "egress": {}}
        log = glovebox.AuditLog(Path(sys.argv[1]))
        log.append({**row, "call_id": "before"})
        log._writer.folder.stop()
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        size = next(Path(sys.argv[1], "audit.journal").glob("*.jsonl")).stat().st_size
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 40, resource.RLIM_INFINITY))
        try:
            log.append({**row, "call_id": "refused", "input": "x" * 200})
        except OSError as exc:
            print("refused:", exc.errno, flush=True)
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        log.append({**row, "call_id": "after"})
        log._writer.journal.close()
        """
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused: ")  # EFBIG: the line did not fit
    files = sorted((tmp_path / "audit.journal").glob("*.jsonl"))
    assert len(files) == 2  # the file with the cut line, and the fresh one
    log = glovebox.AuditLog(tmp_path)
    assert call_ids(log) == ["before", "after"] and log.verify().ok
    assert list((tmp_path / "audit.journal").iterdir()) == []
    log.close()


def test_a_long_running_writer_moves_to_fresh_files_and_folded_ones_are_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(glovebox.audit._journal, "ROTATE_BYTES", 2000)
    log = glovebox.AuditLog(tmp_path)
    for n in range(40):
        log.append(record(f"r{n}"))
    assert call_ids(log) == [f"r{n}" for n in range(40)] and log.verify().ok
    assert len(list((tmp_path / "audit.journal").iterdir())) <= 1  # only the file being written is kept
    log.close()
    assert list((tmp_path / "audit.journal").iterdir()) == []


def test_close_cuts_the_folders_pause_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(glovebox.audit._foldproc, "START_DELAY_S", 3600.0)
    log = glovebox.AuditLog(tmp_path)
    log.append(record("a"))  # the folder now pauses an hour before it folds
    closing = threading.Thread(target=log.close)
    closing.start()
    closing.join(timeout=60)
    assert not closing.is_alive()
    reader = glovebox.AuditLog(tmp_path)
    assert call_ids(reader) == ["a"]  # close folded it
    reader.close()


def test_journal_files_are_private_to_the_host_user(tmp_path: Path) -> None:
    log = glovebox.AuditLog(tmp_path)
    log.append(record("a"))
    directory = tmp_path / "audit.journal"
    assert directory.stat().st_mode & 0o777 == 0o700
    assert all(path.stat().st_mode & 0o777 == 0o600 for path in directory.iterdir())
    log.close()


def test_a_staging_file_of_a_writer_that_died_before_naming_it_is_removed(tmp_path: Path) -> None:
    directory = tmp_path / "audit.journal"
    directory.mkdir()
    (directory / ".1-00.jsonl").write_bytes(b"")
    log = glovebox.AuditLog(tmp_path)
    log.append(record("a"))
    assert call_ids(log) == ["a"]
    assert not (directory / ".1-00.jsonl").exists()
    log.close()


def test_a_file_a_live_writer_is_still_naming_is_left_alone_by_folds_and_sweeps(tmp_path: Path) -> None:
    # A writer between creating its dot-named file and locking it: neither a fold (which reads only
    # named files) nor the sweep (which waits for no writer to be naming one) may remove it.
    directory = tmp_path / "audit.journal"
    directory.mkdir()
    staging = directory / ".1-01.jsonl"
    with glovebox.audit._journal._naming(directory):
        staging.write_bytes(b"")
        log = glovebox.AuditLog(tmp_path)
        log.append(record("a"))
        assert call_ids(log) == ["a"]
        assert staging.exists()
        log.close()
    reader = glovebox.AuditLog(tmp_path)  # its writer died before naming it: the next sweep removes it
    assert call_ids(reader) == ["a"] and not staging.exists()
    reader.close()


def test_appending_to_a_closed_log_raises(tmp_path: Path) -> None:
    log = glovebox.AuditLog(tmp_path)
    log.append(record("a"))
    log.close()
    with pytest.raises(ValueError, match="closed"):
        log.append(record("b"))
    reader = glovebox.AuditLog(tmp_path)
    assert call_ids(reader) == ["a"]
    reader.close()


def test_a_journal_opens_its_file_on_the_first_write(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    assert list(tmp_path.iterdir()) == []
    journal.write(b"1 {}\n")
    (path,) = tmp_path.iterdir()
    assert path.read_bytes() == b"1 {}\n" and not path.name.startswith(".")
    journal.close()
    journal.close()


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


@pytest.mark.slow  # writer processes racing
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


def test_an_empty_log_starts_at_genesis(tmp_path: Path) -> None:
    log = glovebox.AuditLog(tmp_path)
    log.append(record("a"))
    assert next(log.records())["prev_hash"] == GENESIS
    log.close()


OPENERS = 50


def _open_at_once_and_call(home: Path, turn: int) -> list[dict[str, Any]]:
    """``OPENERS`` threads each open a Runtime on ``home`` at the same moment and make one call."""
    barrier = threading.Barrier(OPENERS)
    answers: list[dict[str, Any]] = []

    def open_and_call(n: int) -> None:
        barrier.wait()
        with glovebox.Runtime(home=home) as rt:
            answers.append(rt.call("echo", {"turn": turn, "n": n}).to_dict())

    threads = [threading.Thread(target=open_and_call, args=(n,)) for n in range(OPENERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def test_runtimes_opened_at_once_on_one_home_lose_no_call(tmp_path: Path, build_guest: Any) -> None:
    # Each opener's first call creates its journal file while the others' first folds sweep the
    # directory: no call may fail because another Runtime opened the same home.
    home = tmp_path / "home"
    with glovebox.Runtime(home=home) as rt:
        rt.register(build_guest("echo"), {"name": "echo"})
    for turn in range(3):
        answers = _open_at_once_and_call(home, turn)
        assert len(answers) == OPENERS and [a["error"] for a in answers if not a["ok"]] == []
    log = glovebox.AuditLog(home)
    verification = log.verify()
    assert verification.ok and verification.rows == 3 * OPENERS
    log.close()


def test_processes_opening_one_home_at_once_lose_no_call(tmp_path: Path, build_guest: Any) -> None:
    home = tmp_path / "home"
    with glovebox.Runtime(home=home) as rt:
        rt.register(build_guest("echo"), {"name": "echo"})
    code = textwrap.dedent(
        """
        import sys, threading, glovebox
        barrier = threading.Barrier(8)
        bad = []
        def work(n):
            barrier.wait()
            with glovebox.Runtime(home=sys.argv[1]) as rt:
                for i in range(2):
                    result = rt.call("echo", {"n": n, "i": i})
                    if not result.ok:
                        bad.append(result.to_dict())
        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(bad)
        """
    )
    children = [
        subprocess.Popen([sys.executable, "-c", code, str(home)], stdout=subprocess.PIPE, text=True) for _ in range(6)
    ]
    outs = [child.communicate(timeout=300)[0] for child in children]
    assert [child.returncode for child in children] == [0] * 6
    assert outs == ["[]\n"] * 6
    log = glovebox.AuditLog(home)
    verification = log.verify()
    assert verification.ok and verification.rows == 6 * 8 * 2
    log.close()
    assert [p.name for p in (home / "audit.journal").iterdir()] == []
