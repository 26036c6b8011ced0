"""The audit log: a record per call, redaction, tamper detection, and nothing lost on SIGKILL."""

from __future__ import annotations

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

ROOT = Path(__file__).resolve().parents[1]


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
        " fuel_used, duration_ms, egress, input, output, hash, hash, truncated FROM audit WHERE seq = 3",
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
