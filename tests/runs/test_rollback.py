"""Compensation: a failed run rolled back through its tools' compensations, newest first, each once,
even after a SIGKILL mid-rollback (runs/_rollback.py, runs/_compensations.py)."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import glovebox
from glovebox.cli._main import cli

from .conftest import serve

PROGRAM = """export default async function (input, tools) {
  await tools.call("make", { url: input.base + "/make/a", undo: input.base + input.undo + "a" });
  await tools.call("make", { url: input.base + "/make/b", undo: input.base + input.undo + "b" });
  await tools.call("make", { url: 3, undo: "" });  // the third step fails: invalid_input
  return "unreachable";
}"""


class Ledger:
    """An HTTP server on 127.0.0.1 that records each request when it arrives (``arrived``) and
    commits it (``committed``) only when its client is still there to be answered; a request for
    ``hold`` waits until ``release`` is set first."""

    def __init__(self) -> None:
        self.arrived: Counter[str] = Counter()
        self.committed: list[str] = []
        self.held = threading.Event()
        self.release = threading.Event()
        self.hold: str | None = None
        ledger = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                ledger.arrived[self.path] += 1
                if self.path == ledger.hold:
                    ledger.held.set()
                    ledger.release.wait(60)
                    if _closed(self.connection):
                        return  # its client is gone: nothing is committed
                ledger.committed.append(self.path)
                body = json.dumps({"path": self.path}).encode()
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server, _ = serve(Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def _closed(connection: socket.socket) -> bool:
    readable, _, _ = select.select([connection], [], [], 0.5)
    return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""


@pytest.fixture
def ledger() -> Iterator[Ledger]:
    server = Ledger()
    yield server
    server.close()


def _policy(port: int) -> str:
    return f"""
version: 1
principals:
  agent: {{scopes: []}}
  admin: {{scopes: [glovebox:approve, glovebox:audit]}}
defaults:
  action: allow
grants:
  - tool: "*"
    http:
      - {{host: 127.0.0.1, schemes: [http], ports: [{port}], methods: [GET], paths: ["/**"], allow_private: true}}
"""


@pytest.fixture
def home(tmp_path: Path, ledger: Ledger, build_guest: Callable[[str], Path]) -> tuple[Path, Path]:
    """A home with ``make`` (an HTTP call undone by ``unmake`` of its input's ``undo`` URL) and
    ``unmake``, and a policy that allows them (to the ledger's port only)."""
    policy = tmp_path / "policy.yaml"
    port = int(ledger.base.rsplit(":", 1)[1])
    policy.write_text(_policy(port))
    home = tmp_path / "home"
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [port], "methods": ["GET"], "paths": ["/**"]}
    rule["allow_private"] = True
    http = {"http": [rule]}
    compensate = {"tool": "unmake", "input_from": {"/url": "/input/undo"}}
    schema = {"type": "object", "required": ["url"], "properties": {"url": {"type": "string"}}}
    make = {"name": "make", "capabilities": http, "compensate": compensate, "input_schema": schema}
    with glovebox.Runtime(home=home, policy=policy) as rt:
        rt.register(build_guest("http_client"), make)
        rt.register(build_guest("http_client"), {"name": "unmake", "capabilities": http})
    return home, policy


def _cli(home: tuple[Path, Path], *args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(cli, ["--home", str(home[0]), "--policy", str(home[1]), *args])
    assert result.output.startswith("{"), (result.output, result.exception)
    return result.exit_code, json.loads(result.output)


def _failed_run(home: tuple[Path, Path], ledger: Ledger, undo: str = "/undo/") -> str:
    with glovebox.Runtime(home=home[0], policy=home[1]) as rt:
        failed = rt.run(PROGRAM, input={"base": ledger.base, "undo": undo}, principal="agent", lang="js")
    assert failed.status == "failed" and failed.error is not None, failed.to_dict()
    assert [call["code"] is None for call in failed.calls] == [True, True, False]
    return failed.run_id


def _rows(home: Path, run_id: str) -> list[dict[str, Any]]:
    audit = glovebox.AuditLog(home)
    try:
        found = [(row, json.loads(row["egress"] or "{}").get("run", {})) for row in audit.records()]
    finally:
        audit.close()
    return [
        {**row, "run": run} for row, run in found if run.get("run_id") == run_id and run.get("action") == "rollback"
    ]


@pytest.mark.system
def test_a_failing_third_step_is_rolled_back_in_reverse_once_each(home: tuple[Path, Path], ledger: Ledger) -> None:
    program = home[0].parent / "plan.js"
    program.write_text(PROGRAM)
    code, envelope = _cli(
        home, "run", str(program), "--principal", "agent", "--rollback-on-failure",
        "--input", json.dumps({"base": ledger.base, "undo": "/undo/"}),
    )  # fmt: skip
    assert code == 1 and envelope["status"] == "failed", envelope
    rollback = envelope["rollback"]
    assert rollback["status"] == "rolled_back" and rollback["ok"], rollback
    assert [(c["step"], c["tool"], c["compensation"]) for c in rollback["compensations"]] == [
        (1, "make@0.0.0", "unmake"),
        (0, "make@0.0.0", "unmake"),
    ]
    assert ledger.committed == ["/make/a", "/make/b", "/undo/b", "/undo/a"]  # newest first, once each
    rows = _rows(home[0], envelope["run_id"])  # each compensation a full call with its own audit row
    assert [(row["tool"], row["outcome"], row["run"]["step"]) for row in rows] == [
        ("unmake@0.0.0", "ok", 1),
        ("unmake@0.0.0", "ok", 0),
    ]
    assert [row["call_id"] for row in rows] == [c["call_id"] for c in rollback["compensations"]]
    code, again = _cli(home, "runs", "rollback", envelope["run_id"])  # rolled back already: nothing more runs
    assert code == 0 and [c["replayed"] for c in again["compensations"]] == [True, True], again
    code, shown = _cli(home, "runs", "show", envelope["run_id"])
    assert shown["rollback"] == "rolled_back" and shown["program_digest"].startswith("sha256:"), shown
    assert ledger.committed == ["/make/a", "/make/b", "/undo/b", "/undo/a"]


CHILD = """
import sys
import glovebox
home, policy, run_id = sys.argv[1:]
with glovebox.Runtime(home=home, policy=policy) as rt:
    glovebox.rollback_run(rt, run_id)
"""


@pytest.mark.system
def test_a_rollback_killed_midway_resumes_and_makes_each_compensation_once(
    home: tuple[Path, Path], ledger: Ledger, tmp_path: Path
) -> None:
    run_id = _failed_run(home, ledger)
    ledger.hold = "/undo/a"  # b's undo goes through, then a's waits: the rollback is killed there
    errors = tmp_path / "child.err"
    with errors.open("wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(home[0]), str(home[1]), run_id], stdout=subprocess.DEVNULL, stderr=stderr
        )
    try:
        assert ledger.held.wait(300), errors.read_text()
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL
    ledger.release.set()  # a's undo had no client left to answer: not committed
    assert ledger.committed == ["/make/a", "/make/b", "/undo/b"] and ledger.arrived["/undo/a"] == 1
    with glovebox.Runtime(home=home[0], policy=home[1]) as rt:
        assert rt.runs.store.rollback_status(run_id) == "rolling_back"
        resumed = glovebox.rollback_run(rt, run_id)  # at once: the holder is a dead process of this host
        assert rt.runs.store.rollback_status(run_id) == "rolled_back"
    assert resumed.ok, resumed.to_dict()
    entries = [(c["step"], c["replayed"], c["reran"]) for c in resumed.compensations]
    assert entries == [(1, True, False), (0, False, True)]  # b's not made again; a's, in flight, made again
    assert ledger.committed == ["/make/a", "/make/b", "/undo/b", "/undo/a"]  # each compensation once
    rows = _rows(home[0], run_id)
    assert [(row["run"]["step"], row["outcome"]) for row in rows] == [(1, "ok"), (0, "ok")]
    assert rows[1]["call_id"] == resumed.compensations[1]["call_id"]  # the same call id as the killed attempt's


@pytest.mark.system
def test_a_running_or_paused_run_is_not_rolled_back_and_others_need_operator_scopes(
    home: tuple[Path, Path], ledger: Ledger
) -> None:
    run_id = _failed_run(home, ledger)
    with glovebox.Runtime(home=home[0], policy=home[1]) as rt:
        with pytest.raises(glovebox.PermissionDenied, match="may not roll back"):
            glovebox.rollback_run(rt, run_id, by="outsider")
        assert ledger.committed == ["/make/a", "/make/b"]
        assert glovebox.rollback_run(rt, run_id, by="admin").ok
        rt.runs.store.set_status(run_id, "paused")
        with pytest.raises(ValueError, match="only a finished run"):
            glovebox.rollback_run(rt, run_id)
    rows = _rows(home[0], run_id)
    assert [row["run"]["by"] for row in rows] == ["admin", "admin"] and all(r["principal"] == "agent" for r in rows)


def test_input_from_maps_pointers_of_the_call_into_the_compensations_input() -> None:
    from glovebox.model._manifest import Compensation
    from glovebox.runs._rollback import compensation_input

    undo = Compensation(tool="unpost", input_from={"": "/output/ref", "/reason": "/input/why", "/a~1b/c": "/input/n/0"})
    assert compensation_input(undo, {"why": "rollback", "n": [3]}, {"ref": {"id": 9}}) == {
        "id": 9,
        "reason": "rollback",
        "a/b": {"c": 3},
    }
    assert compensation_input(Compensation(tool="x"), {"k": 1}, None) == {"k": 1}  # no input_from: the call's input
    with pytest.raises(KeyError):
        compensation_input(Compensation(tool="x", input_from={"/id": "/output/missing"}), {}, {})
    with pytest.raises(ValueError, match="JSON pointer"):
        Compensation(tool="x", input_from={"id": "/output/id"})
    with pytest.raises(ValueError, match="into /input or /output"):
        Compensation(tool="x", input_from={"/id": "/elsewhere"})


@pytest.mark.system
@pytest.mark.parametrize(
    ("edit", "which"),
    [
        ("UPDATE compensations SET state = 'failed' WHERE seq = 1", 1),  # would undo b twice
        ('UPDATE compensations SET input = \'{"url": "http://elsewhere/"}\' WHERE seq = 0', 0),
        ("DELETE FROM compensations WHERE seq = 1", None),  # its head sees it gone
    ],
)
def test_an_edited_compensation_record_is_refused_on_rollback_with_journal_tampered(
    home: tuple[Path, Path], ledger: Ledger, edit: str, which: int | None
) -> None:
    run_id = _failed_run(home, ledger)
    with glovebox.Runtime(home=home[0], policy=home[1]) as rt:
        assert glovebox.rollback_run(rt, run_id).ok
    undone = ["/make/a", "/make/b", "/undo/b", "/undo/a"]
    assert ledger.committed == undone
    with closing(sqlite3.connect(home[0] / "runs.sqlite")) as db, db:
        assert db.execute(edit + " AND run_id = ?", (run_id,)).rowcount == 1
    with glovebox.Runtime(home=home[0], policy=home[1]) as rt:
        with pytest.raises(glovebox.JournalTampered) as refused:
            glovebox.rollback_run(rt, run_id)
        assert rt.runs.store.rollback_status(run_id) == "rolled_back", "a refused rollback claims nothing"
    assert refused.value.code == "journal_tampered" and refused.value.details["compensation"] == which
    assert ledger.committed == undone, "no compensation called again"
    result = CliRunner().invoke(cli, ["--home", str(home[0]), "--policy", str(home[1]), "runs", "rollback", run_id])
    assert result.exit_code != 0 and "error [journal_tampered]" in result.output, result.output


@pytest.mark.system
def test_compensations_written_before_their_seals_are_sealed_once_as_they_stand(
    home: tuple[Path, Path], ledger: Ledger
) -> None:
    run_id = _failed_run(home, ledger)
    with glovebox.Runtime(home=home[0], policy=home[1]) as rt:
        assert glovebox.rollback_run(rt, run_id).ok
    with closing(sqlite3.connect(home[0] / "runs.sqlite")) as db, db:  # as a glovebox before the seals wrote it
        db.execute("ALTER TABLE compensations DROP COLUMN seal")
        db.execute("ALTER TABLE runs DROP COLUMN compensations_head")
    with glovebox.Runtime(home=home[0], policy=home[1]) as rt:
        again = glovebox.rollback_run(rt, run_id)  # sealed on open: it stands, and nothing is undone twice
        assert again.ok and [c["replayed"] for c in again.compensations] == [True, True], again.to_dict()
    with closing(sqlite3.connect(home[0] / "runs.sqlite")) as db, db:
        db.execute("UPDATE compensations SET seal = NULL WHERE run_id = ? AND seq = 0", (run_id,))
    with glovebox.Runtime(home=home[0], policy=home[1]) as rt:  # a seal dropped later is never sealed again
        with pytest.raises(glovebox.JournalTampered):
            glovebox.rollback_run(rt, run_id)
    assert ledger.committed == ["/make/a", "/make/b", "/undo/b", "/undo/a"]
