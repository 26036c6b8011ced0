"""The audit log: a record per call, redaction, tamper detection, and nothing lost on SIGKILL."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import glovebox
from glovebox.cli._main import cli
from glovebox.policy import parse_policy

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def echo_rt(runtime: glovebox.Runtime, build_guest: Callable[[str], Path]) -> glovebox.Runtime:
    runtime.register(build_guest("echo"), {"name": "echo"})
    runtime.register(build_guest("echo"), {"name": "locked", "required_scopes": ["admin"]})
    return runtime


def test_every_call_is_recorded_including_refused_ones(echo_rt: glovebox.Runtime) -> None:
    ok = echo_rt.call("echo", {"password": "hunter2"}, principal="ann")
    denied = echo_rt.call("locked", {}, principal="ann")
    missing = echo_rt.call("nope", {})
    records = echo_rt.audit.tail(10)
    assert [r["call_id"] for r in records] == [ok.meta["call_id"], denied.meta["call_id"], missing.meta["call_id"]]
    first, second, third = records
    assert first["tool"] == "echo@0.0.0" and first["outcome"] == "ok" and first["decision"] == "allow"
    assert first["digest"] == ok.meta["digest"] and first["input_digest"].startswith("sha256:")
    assert first["fuel_used"] == ok.meta["fuel_used"] > 0 and first["principal"] == "ann"
    assert first["input"] is None and first["output"] is None, "inputs are stored only when the policy asks"
    assert json.loads(first["egress"]) == {"denials": []}
    assert second["outcome"] == "permission_denied" and second["decision"] == "block"
    assert third["outcome"] == "tool_not_found" and third["tool"] == "nope" and third["principal"] == "anonymous"
    assert echo_rt.audit.verify().ok


def test_inputs_and_outputs_stored_on_request_with_secrets_redacted(echo_rt: glovebox.Runtime) -> None:
    text = "version: 1\nrules: [{action: allow}]\naudit: {store_inputs: true, store_outputs: true}\n"
    with glovebox.Runtime(home=echo_rt.home, policy=parse_policy(text)) as rt:
        value = {"user": "ann", "auth": {"API_Key": "k", "list": [{"token": "t", "n": 1}]}, "Authorization": "B x"}
        call_id = rt.call("echo", value).meta["call_id"]
        record = rt.audit.find(call_id)
    assert record is not None
    redacted = {"user": "ann", "auth": {"API_Key": "[redacted]", "list": [{"token": "[redacted]", "n": 1}]}}
    redacted["Authorization"] = "[redacted]"
    assert json.loads(record["input"]) == redacted == json.loads(record["output"])
    assert "hunter" not in json.dumps(record) and '"k"' not in record["input"]


def filled(rt: glovebox.Runtime, n: int = 6) -> Path:
    for i in range(n):
        rt.call("echo", {"i": i})
    assert rt.audit.verify().ok
    return rt.audit.path


def tamper(path: Path, *statements: str) -> None:
    db = sqlite3.connect(path)
    with db:
        for statement in statements:
            db.execute(statement)
    db.close()


def test_verify_finds_a_changed_row(echo_rt: glovebox.Runtime) -> None:
    tamper(filled(echo_rt), "UPDATE audit SET outcome = 'permission_denied' WHERE seq = 3")
    result = echo_rt.audit.verify()
    assert not result.ok and result.seq == 3 and "contents changed" in (result.problem or "")


def test_verify_finds_a_deleted_row(echo_rt: glovebox.Runtime) -> None:
    tamper(filled(echo_rt), "DELETE FROM audit WHERE seq = 4")
    result = echo_rt.audit.verify()
    assert not result.ok and result.seq == 5 and "row(s) 4..4 were deleted" in (result.problem or "")


def test_verify_finds_an_inserted_row(echo_rt: glovebox.Runtime) -> None:
    path = filled(echo_rt)
    tamper(
        path,
        "UPDATE audit SET seq = seq + 100 WHERE seq >= 4",
        "UPDATE audit SET seq = seq - 99 WHERE seq >= 104",
        "INSERT INTO audit SELECT 4, 'forged', time, principal, tool, digest, input_digest, decision, outcome,"
        " fuel_used, duration_ms, egress, input, output, hash, hash, truncated, attempt, first_call_id"
        " FROM audit WHERE seq = 3",
    )
    result = echo_rt.audit.verify()
    assert not result.ok and result.seq == 4 and "contents changed" in (result.problem or "")


def test_verify_finds_a_consistently_relinked_row(echo_rt: glovebox.Runtime) -> None:
    # Delete row 2, then fix row 3's prev_hash: row 3's own hash no longer matches.
    path = filled(echo_rt)
    tamper(
        path,
        "DELETE FROM audit WHERE seq = 2",
        "UPDATE audit SET seq = 2, prev_hash = (SELECT hash FROM audit WHERE seq = 1) WHERE seq = 3",
    )
    result = echo_rt.audit.verify()
    assert not result.ok and result.seq == 2


def test_cli_tail_verify_export(echo_rt: glovebox.Runtime, tmp_path: Path) -> None:
    path = filled(echo_rt, 3)

    def run(*args: str) -> Result:
        return CliRunner().invoke(cli, ["--home", str(echo_rt.home), "audit", *args], catch_exceptions=False)

    tail = run("tail", "-n", "2")
    assert tail.exit_code == 0 and [line.split()[0] for line in tail.stdout.splitlines()] == ["2", "3"]
    assert "echo@0.0.0" in tail.stdout
    assert [json.loads(line)["seq"] for line in run("tail", "--json").stdout.splitlines()] == [1, 2, 3]
    verified = run("verify")
    head = echo_rt.audit.verify().head_hash
    assert (verified.exit_code, verified.stdout) == (0, f"audit log ok: 3 records, head {head}\n")
    out = tmp_path / "audit.jsonl"
    assert run("export", "--jsonl", "-o", str(out)).exit_code == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["seq"] for r in rows] == [1, 2, 3] and all("hash" in r and "prev_hash" in r for r in rows)
    assert run("export", "--jsonl").stdout == out.read_text()
    tamper(path, "UPDATE audit SET principal = 'mallory' WHERE seq = 2")
    bad = run("verify")
    assert (bad.exit_code, bad.stdout) == (1, "")
    assert bad.stderr.startswith("audit log TAMPERED: ") and "row 2" in bad.stderr


def glovebox_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in its own process."""
    argv = [sys.executable, "-m", "glovebox", "--home", str(home), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


#: A value of row 4 changed into bytes: a BLOB (any column), or TEXT that is not UTF-8.
RETYPED = {
    "principal": "CAST(principal AS BLOB)",
    "principal ": "CAST(x'ff' AS TEXT)",
    "time": "CAST(time AS BLOB)",
    "egress": "CAST(egress AS BLOB)",
    "fuel_used": "CAST(fuel_used AS BLOB)",
    "duration_ms": "x'00'",
    "input": "x''",
    "truncated": "CAST(x'c3' AS TEXT)",
    "prev_hash": "CAST(prev_hash AS BLOB)",
    "hash": "CAST(hash AS BLOB)",
}


@pytest.mark.parametrize("column", RETYPED)
def test_verify_names_a_retyped_value_as_a_changed_row(echo_rt: glovebox.Runtime, column: str) -> None:
    path = filled(echo_rt)
    tamper(path, f"UPDATE audit SET {column.strip()} = {RETYPED[column]} WHERE seq = 4")
    verified = glovebox_cli(echo_rt.home, "audit", "verify")
    assert (verified.returncode, verified.stdout) == (1, ""), verified.stderr
    expected = f"audit log TAMPERED: row 4: contents changed ({column.strip()} no longer text or a number)\n"
    assert verified.stderr == expected
    result = echo_rt.audit.verify()
    assert (result.ok, result.seq, result.rows) == (False, 4, 3)
    # the readers show the row as it is now, without failing on it
    exported = CliRunner().invoke(cli, ["--home", str(echo_rt.home), "audit", "export", "--jsonl"])
    assert exported.exit_code == 0, exported.output
    rows = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [r["seq"] for r in rows] == [1, 2, 3, 4, 5, 6]
    (raw,) = sqlite3.connect(path).execute(f"SELECT CAST({column.strip()} AS BLOB) FROM audit WHERE seq = 4").fetchone()
    assert rows[3][column.strip()] == {"blob": raw.hex()}
    for args in (["tail", "--json"], ["tail"]):
        shown = CliRunner().invoke(cli, ["--home", str(echo_rt.home), "audit", *args])
        assert shown.exit_code == 0 and len(shown.stdout.splitlines()) == 6, shown.output


@pytest.mark.parametrize("value", ["CAST(hash AS BLOB)", "'é' || hash", "CAST(x'ff' AS TEXT)"])
def test_calls_after_a_retyped_head_are_still_chained(echo_rt: glovebox.Runtime, value: str) -> None:
    # The fold reads the head's hash to chain onto: a head changed underneath must not stop it.
    path = filled(echo_rt)
    tamper(path, f"UPDATE audit SET hash = {value} WHERE seq = 6")
    assert echo_rt.call("echo", {"after": 1}).ok
    echo_rt.audit.fold()  # raises when the database refuses the fold
    assert [r["seq"] for r in echo_rt.audit.records()] == [1, 2, 3, 4, 5, 6, 7]
    result = echo_rt.audit.verify()
    assert (result.ok, result.seq) == (False, 6)


HIDE = (
    "CREATE TRIGGER hide AFTER INSERT ON audit WHEN NEW.principal = 'mallory'"
    " BEGIN DELETE FROM audit WHERE seq = NEW.seq; END"
)


def test_a_planted_trigger_cannot_erase_rows_unseen(echo_rt: glovebox.Runtime) -> None:
    path = filled(echo_rt, 3)
    tamper(path, HIDE)
    calls = [echo_rt.call("echo", {"i": i}, principal=who) for i, who in enumerate(["mallory", "ann", "mallory"])]
    assert all(call.ok for call in calls)  # the calls are answered: their rows wait in the journal
    verified = glovebox_cli(echo_rt.home, "audit", "verify")
    assert (verified.returncode, verified.stdout) == (1, "")
    assert verified.stderr.startswith("audit log TAMPERED: the database holds trigger 'hide' on 'audit'")
    assert not echo_rt.audit.verify().ok
    tamper(path, "DROP TRIGGER hide")  # once it is gone, every row the trigger refused is chained
    verified = glovebox_cli(echo_rt.home, "audit", "verify")
    assert (verified.returncode, verified.stdout.split(",")[0]) == (0, "audit log ok: 6 records"), verified.stderr
    recorded = [(r["call_id"], r["principal"]) for r in echo_rt.audit.records()][3:]
    assert recorded == [(call.meta["call_id"], call.meta["principal"]) for call in calls]


@pytest.mark.parametrize(
    "planted",
    [
        "CREATE TRIGGER skip AFTER UPDATE ON audit_journal BEGIN UPDATE audit_journal SET folded = folded + 100; END",
        "CREATE TRIGGER stay AFTER UPDATE ON audit_head BEGIN UPDATE audit_head SET seq = OLD.seq; END",
        "CREATE VIEW clean AS SELECT * FROM audit WHERE principal != 'mallory'",
        "CREATE TRIGGER later AFTER INSERT ON audit BEGIN DELETE FROM audit WHERE principal = 'mallory'; END",
    ],
)
def test_verify_names_any_trigger_or_view(echo_rt: glovebox.Runtime, planted: str) -> None:
    tamper(filled(echo_rt, 2), planted)
    name = planted.split()[2]
    result = echo_rt.audit.verify()
    assert not result.ok and f"holds {planted.split()[1].lower()} {name!r}" in (result.problem or "")


def test_a_trigger_erasing_earlier_rows_leaves_a_gap_after_it_is_dropped(echo_rt: glovebox.Runtime) -> None:
    path = filled(echo_rt, 2)
    tamper(
        path,
        "CREATE TRIGGER later AFTER INSERT ON audit WHEN NEW.principal != 'mallory'"
        " BEGIN DELETE FROM audit WHERE principal = 'mallory'; END",
    )
    assert echo_rt.call("echo", {}, principal="mallory").ok
    echo_rt.audit.fold()  # row 3 is mallory's
    assert echo_rt.call("echo", {}, principal="ann").ok
    echo_rt.audit.fold()  # row 4, whose insert deletes row 3
    tamper(path, "DROP TRIGGER later")
    result = echo_rt.audit.verify()
    assert (result.ok, result.seq) == (False, 4) and "row(s) 3..3 were deleted" in (result.problem or "")


def test_verify_finds_the_head_row_deleted(echo_rt: glovebox.Runtime) -> None:
    path = filled(echo_rt)
    tamper(path, "DELETE FROM audit WHERE seq = 6")
    result = echo_rt.audit.verify()
    assert (result.ok, result.seq) == (False, 5) and "row(s) 6..6 were deleted from the end" in (result.problem or "")
    assert echo_rt.call("echo", {}).ok  # the next row takes place 7, after the head: the gap stays
    result = echo_rt.audit.verify()
    assert (result.ok, result.seq) == (False, 7) and "row(s) 6..6 were deleted" in (result.problem or "")


def test_verify_finds_the_head_record_deleted_or_rows_added_past_it(echo_rt: glovebox.Runtime) -> None:
    path = filled(echo_rt)
    tamper(path, "DELETE FROM audit_head")
    result = echo_rt.audit.verify()
    assert (result.ok, result.seq) == (False, 6) and "head record is missing" in (result.problem or "")
    tamper(path, "INSERT INTO audit_head SELECT 1, seq, hash FROM audit WHERE seq = 5")
    result = echo_rt.audit.verify()
    assert (result.ok, result.seq) == (False, 6) and "is not the chain's head (row 5)" in (result.problem or "")


def test_a_constraint_refusing_rows_fails_verify_and_loses_nothing(echo_rt: glovebox.Runtime) -> None:
    path = filled(echo_rt, 2)
    columns = ", ".join(r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(audit)"))
    (sql,) = sqlite3.connect(path).execute("SELECT sql FROM sqlite_master WHERE name = 'audit'").fetchone()
    checked = sql.rstrip().rstrip(")") + ", CHECK (principal != 'mallory'))"
    tamper(
        path,
        "ALTER TABLE audit RENAME TO old",
        checked,
        f"INSERT INTO audit SELECT {columns} FROM old",
        "DROP TABLE old",
    )
    mallory = echo_rt.call("echo", {}, principal="mallory")
    assert mallory.ok
    result = echo_rt.audit.verify()
    assert not result.ok and "could not be chained: CHECK constraint failed" in (result.problem or "")
    tamper(
        path, "ALTER TABLE audit RENAME TO old", sql, f"INSERT INTO audit SELECT {columns} FROM old", "DROP TABLE old"
    )
    assert echo_rt.audit.verify().ok and echo_rt.audit.find(mallory.meta["call_id"]) is not None


V1_COLUMNS = (
    "seq INTEGER PRIMARY KEY, call_id TEXT NOT NULL, time TEXT NOT NULL, principal TEXT NOT NULL,"
    " tool TEXT NOT NULL, digest TEXT, input_digest TEXT, decision TEXT, outcome TEXT NOT NULL,"
    " fuel_used INTEGER NOT NULL, duration_ms REAL NOT NULL, egress TEXT NOT NULL,"
    " input TEXT, output TEXT, prev_hash TEXT NOT NULL, hash TEXT NOT NULL"
)


def write_v1_home(home: Path, rows: int, *, truncated_column: bool) -> None:
    """An audit log as earlier glovebox releases wrote it: no head table (and, before rows could be cut,
    no ``truncated`` column); each row hashed as ``sha256(prev_hash + canonical JSON of its fields)``."""
    home.mkdir(parents=True)
    db = sqlite3.connect(home / "audit.sqlite")
    db.execute(f"CREATE TABLE audit ({V1_COLUMNS}{', truncated TEXT' if truncated_column else ''})")
    db.execute("CREATE INDEX audit_call_id ON audit (call_id)")
    db.execute("CREATE TABLE audit_journal (name TEXT PRIMARY KEY, folded INTEGER NOT NULL)")
    prev = "0" * 64
    for seq in range(1, rows + 1):
        fields = {
            "seq": seq, "call_id": f"old-{seq}", "time": "2025-01-01T00:00:00.000000+00:00", "principal": "ann",
            "tool": "echo@0.0.0", "digest": "sha256:" + "a" * 64, "input_digest": None, "decision": "allow",
            "outcome": "ok", "fuel_used": 7, "duration_ms": 0.25, "egress": '{"denials": []}',
            "input": None, "output": '{"é": 1}',
        }  # fmt: skip
        text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = hashlib.sha256((prev + text).encode()).hexdigest()
        names = ", ".join([*fields, "prev_hash", "hash"])
        db.execute(
            f"INSERT INTO audit ({names}) VALUES ({', '.join('?' * (len(fields) + 2))})",
            [*fields.values(), prev, digest],
        )
        prev = digest
    db.commit()
    db.close()


@pytest.mark.parametrize("truncated_column", [False, True])
def test_a_home_written_by_an_earlier_release_opens_verifies_and_grows(
    tmp_path: Path, build_guest: Callable[[str], Path], truncated_column: bool
) -> None:
    home = tmp_path / "old"
    write_v1_home(home, 4, truncated_column=truncated_column)
    verified = glovebox_cli(home, "audit", "verify")
    assert verified.returncode == 0 and verified.stdout.startswith("audit log ok: 4 records"), verified.stderr
    with glovebox.Runtime(home=home) as rt:
        rt.register(build_guest("echo"), {"name": "echo"})
        assert rt.call("echo", {}).ok
    verified = glovebox_cli(home, "audit", "verify")
    assert verified.returncode == 0 and verified.stdout.startswith("audit log ok: 5 records"), verified.stderr
    tamper(home / "audit.sqlite", "DELETE FROM audit WHERE seq = 5")  # its head is now kept: the loss shows
    assert glovebox_cli(home, "audit", "verify").stderr.startswith("audit log TAMPERED: row(s) 5..5 were deleted")


def test_rows_an_earlier_release_chains_onto_an_upgraded_home_are_taken_into_the_head(
    echo_rt: glovebox.Runtime,
) -> None:
    # During an upgrade an older process may still fold into this home: it chains onto the last
    # row and keeps no head. Its rows are taken into the head, and later rows follow them.
    path = filled(echo_rt, 2)
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    last = dict(db.execute("SELECT * FROM audit WHERE seq = 2").fetchone())
    db.close()
    fields = {k: last[k] for k in last if k not in ("prev_hash", "hash", "truncated", "attempt", "first_call_id")}
    fields.update(seq=3, call_id="old-writer")
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256((last["hash"] + text).encode()).hexdigest()
    names = ", ".join([*fields, "prev_hash", "hash"])
    marks = ", ".join("?" * (len(fields) + 2))
    db = sqlite3.connect(path)
    with db:
        db.execute(f"INSERT INTO audit ({names}) VALUES ({marks})", [*fields.values(), last["hash"], digest])
    db.close()
    assert echo_rt.call("echo", {}).ok
    assert [r["call_id"] for r in echo_rt.audit.records()][2] == "old-writer"
    result = echo_rt.audit.verify()
    assert result.ok and result.rows == 4, result.problem


def rechain(path: Path, start: int) -> None:
    """What a shell on the host can do: recompute every hash from row ``start`` on, and the head."""
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    with db:
        prev = db.execute("SELECT hash FROM audit WHERE seq = ?", (start - 1,)).fetchone()[0]
        for row in db.execute("SELECT * FROM audit WHERE seq >= ? ORDER BY seq", (start,)).fetchall():
            fields = {
                k: row[k] for k in row.keys() if k not in ("prev_hash", "hash", "truncated", "attempt", "first_call_id")
            }
            text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            digest = hashlib.sha256((prev + text).encode()).hexdigest()
            db.execute("UPDATE audit SET prev_hash = ?, hash = ? WHERE seq = ?", (prev, digest, row["seq"]))
            prev = digest
        db.execute("UPDATE audit_head SET seq = (SELECT max(seq) FROM audit), hash = ?", (prev,))
    db.close()


@pytest.mark.parametrize(
    "rewrite",
    [
        ["UPDATE audit SET principal = 'ann' WHERE seq >= 4"],  # then rechained from row 4
        ["DELETE FROM audit WHERE seq >= 5"],  # cut back to row 4, head moved with it
    ],
)
def test_a_head_kept_off_the_host_finds_a_rewritten_or_cut_tail(echo_rt: glovebox.Runtime, rewrite: list[str]) -> None:
    path = filled(echo_rt)
    recorded = glovebox_cli(echo_rt.home, "audit", "verify").stdout.split()[-1]  # the head, kept elsewhere
    assert glovebox_cli(echo_rt.home, "audit", "verify", "--anchor", recorded).returncode == 0
    tamper(path, *rewrite)
    rechain(path, 4)
    assert glovebox_cli(echo_rt.home, "audit", "verify").returncode == 0  # what the chain alone cannot see
    verified = glovebox_cli(echo_rt.home, "audit", "verify", "--anchor", recorded)
    assert verified.returncode == 1
    expected = f"no row is hashed {recorded}: the chain was cut back or rewritten since that head was recorded"
    assert verified.stderr == f"audit log TAMPERED: {expected}\n"


CHILD = textwrap.dedent(
    """
    import sys, glovebox
    with glovebox.Runtime(home=sys.argv[1]) as rt:
        for i in range(1000):
            result = rt.call("echo", {"i": i})
            assert result.ok, result.to_dict()
            print(result.meta["call_id"], flush=True)
    """
)


def test_sigkill_mid_burst_loses_no_returned_call(echo_rt: glovebox.Runtime) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(echo_rt.home)], stdout=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    assert child.stdout is not None
    returned = []
    for line in child.stdout:
        returned.append(line.strip())
        if len(returned) == 300:
            os.kill(child.pid, signal.SIGKILL)
            break
    returned += [line.strip() for line in child.stdout if line.strip()]
    child.stdout.close()
    assert child.wait(timeout=60) == -signal.SIGKILL, "the child was killed mid-burst"
    assert 300 <= len(returned) < 1000
    log = glovebox.AuditLog(echo_rt.home)
    recorded = {record["call_id"] for record in log.records()}
    assert set(returned) <= recorded
    assert log.verify().ok
    log.close()
