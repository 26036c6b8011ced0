"""A run's accountability and safety under concurrency: one audit row per attempt, a lease on the run.

Attacks: two processes resuming one crashed run at once (the lease lets one
through, the other answers ``run_busy`` naming it, and the upstream counts the
next step once); the holder killed by SIGKILL (its lease expires, then the run
resumes); an attempt whose lease was taken over (it writes nothing more); a
resume by a principal who lacks the operator's scopes.
"""

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
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.runs._host import RunBounds
from glovebox.runs._runner import RUN_LIMITS

from .conftest import run_policy, send_hit, serve

#: A principal who may resume others' runs: it reads the audit log and approves.
OPERATOR = "  operator: {scopes: [glovebox:audit, glovebox:approve]}\n"


class Gates:
    """An HTTP server on 127.0.0.1 counting hits per path: ``/gate/NAME`` waits until ``open(NAME)``,
    ``/slow/...`` answers after 300 ms."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self._changed = threading.Condition()
        self._open: set[str] = set()
        gates = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with gates._changed:
                    gates.hits[self.path] += 1
                    hit = gates.hits[self.path]
                    gates._changed.notify_all()
                    if self.path.startswith("/gate/"):
                        name = self.path.removeprefix("/gate/")
                        gates._changed.wait_for(lambda: name in gates._open, timeout=120)
                if self.path.startswith("/slow/"):
                    time.sleep(0.3)
                send_hit(self, hit)

            def log_message(self, *args: Any) -> None:
                pass

        self.server, _ = serve(Handler)
        self.port = self.server.server_address[1]

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_hits(self, path: str, count: int, timeout: float = 300) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: self.hits[path] >= count, timeout), dict(self.hits)

    def open(self, name: str) -> None:
        with self._changed:
            self._open.add(name)
            self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self._open.add("*")
            self._open.update(p.removeprefix("/gate/") for p in self.hits)
            self._changed.notify_all()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def gates() -> Iterator[Gates]:
    server = Gates()
    yield server
    server.close()


def _policy(path: Path, port: int, lease_seconds: float | None = None) -> Path:
    text = run_policy(port).replace("  admin:", OPERATOR + "  admin:")
    if lease_seconds is not None:
        text += f"runs:\n  lease_seconds: {lease_seconds}\n"
    path.write_text(text)
    return path


@pytest.fixture
def home(
    tmp_path: Path, gates: Gates, build_example: Callable[[str], Path], build_guest: Callable[[str], Path]
) -> Path:
    """A home with calc, hc and hc-approve, whose manifests reach the gate server."""
    home = tmp_path / "home"
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [gates.port], "methods": ["GET"]}
    rule |= {"paths": ["/**"], "allow_private": True}
    with glovebox.Runtime(home=home, policy=_policy(tmp_path / "setup.yaml", gates.port)) as rt:
        rt.register(build_example("calc"))
        for name in ("hc", "hc-approve"):
            rt.register(build_guest("http_client"), manifest={"name": name, "capabilities": {"http": [rule]}})
    return home


def _egress(row: dict[str, Any]) -> dict[str, Any]:
    egress = row["egress"]
    return egress if isinstance(egress, dict) else json.loads(egress)


PAUSING = """
export default async function (input, tools) {
  const first = await tools.call("calc", { expression: "6 * 7" });
  const held = await tools.call("hc-approve", { url: input.base + "/approved" });
  return [first.value, JSON.parse(held.body).hit];
}
"""


def test_each_attempt_has_its_own_audit_row_and_its_nested_calls_name_it(
    home: Path, gates: Gates, tmp_path: Path
) -> None:
    policy = _policy(tmp_path / "operator.yaml", gates.port)
    with glovebox.Runtime(home=home, policy=policy) as rt:
        paused = rt.run(PAUSING, input={"base": gates.url()}, principal="agent", lang="js")
        assert paused.status == "paused", paused.to_dict()
        first = rt.audit.find(paused.meta["call_id"])
        assert first is not None and first["tool"] == "glovebox:run" and first["principal"] == "agent"
        assert first["outcome"] == "approval_required" and first["attempt"] == 1
        assert first["first_call_id"] == first["call_id"] and first["digest"].startswith("sha256:")
        run = _egress(first)["run"]
        assert run["run_id"] == paused.run_id and run["attempt"] == 1 and run["by"] == "agent"
        assert run["status"] == "paused" and "previous_call_id" not in run
        calc = rt.audit.find(paused.calls[0]["call_id"])
        assert calc is not None
        nested = _egress(calc)["run"]
        assert nested.pop("deadline_at") > time.time(), "the run's deadline it was held to (a minute on)"
        assert nested == {"run_id": paused.run_id, "step": 0, "parent_call_id": first["call_id"]}

        rt.approve(paused.error.details["approval_id"], principal="admin")  # type: ignore[union-attr]
        with pytest.raises(glovebox.PermissionDenied, match="glovebox:audit"):
            rt.runs.resume(paused.run_id, by="admin")  # approves, but does not read the audit log
        done = rt.runs.resume(paused.run_id, by="operator")
        assert done.status == "done" and done.output == [42, 1], done.to_dict()
        assert done.meta["resumed_by"] == "operator" and done.meta["attempts"] == 2
        second = rt.audit.find(done.meta["call_id"])
        assert second is not None and second["outcome"] == "ok" and second["principal"] == "agent"
        assert second["attempt"] == 2 and second["first_call_id"] == first["call_id"]
        run = _egress(second)["run"]
        assert run["by"] == "operator" and run["previous_call_id"] == first["call_id"] and run["replayed"] == 1
        approved = rt.audit.find(done.calls[1]["call_id"])
        assert approved is not None and approved["principal"] == "agent", "the nested call stays the owner's"
        assert _egress(approved)["run"]["parent_call_id"] == second["call_id"]
        record = rt.runs.record(paused.run_id)
        assert record is not None and record.resumed_by == "operator" and record.lease_owner is None
        assert rt.runs.record("no-such-run") is None
        assert rt.audit.verify().ok
        assert gates.hits["/approved"] == 1
    listed = subprocess.run(
        [sys.executable, "-m", "glovebox", "--home", str(home), "audit", "tail", "--tool", "glovebox:run"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == 2 and all("glovebox:run" in line and " agent " in line for line in lines)
    assert "approval_required" in lines[0] and " ok " in lines[1] and done.meta["call_id"] in lines[1]
    shown = subprocess.run(
        [sys.executable, "-m", "glovebox", "--home", str(home), "runs", "show", paused.run_id],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["resumed_by"] == "operator" and report["lease"] is None


HOLDING = """
export default async function (input, tools) {
  const one = await tools.call("hc", { url: input.base + "/one" });
  const two = await tools.call("hc", { url: input.base + "/gate/" + input.gate });
  const three = await tools.call("hc", { url: input.base + "/three" });
  return [one, two, three].map((answer) => JSON.parse(answer.body).hit);
}
"""


def test_a_resume_while_another_attempt_executes_the_run_is_run_busy(home: Path, gates: Gates, tmp_path: Path) -> None:
    policy = _policy(tmp_path / "operator.yaml", gates.port)
    with glovebox.Runtime(home=home, policy=policy) as rt:
        answers: list[glovebox.RunResult] = []
        runner = threading.Thread(
            target=lambda: answers.append(
                rt.run(HOLDING, input={"base": gates.url(), "gate": "busy"}, principal="agent", lang="js")
            )
        )
        runner.start()
        try:
            gates.wait_hits("/gate/busy", 1)
            (record,) = rt.runs.list()
            refused = rt.runs.resume(record.run_id)
        finally:
            gates.open("busy")
            runner.join(300)
        assert refused.status == "running" and refused.error is not None and refused.error.code == "run_busy"
        assert refused.error.retryable and refused.error.details["holder"] == record.lease_owner
        assert f"pid {os.getpid()}" in refused.error.message and record.run_id in refused.error.message
        assert refused.error.details["retry_after_ms"] > 0
        row = rt.audit.find(refused.meta["call_id"])
        assert row is not None and row["outcome"] == "run_busy" and row["tool"] == "glovebox:run"
        assert _egress(row)["run"]["holder"] == record.lease_owner
        (done,) = answers
        assert done.status == "done" and done.output == [1, 1, 1], done.to_dict()
        assert dict(gates.hits) == {"/one": 1, "/gate/busy": 1, "/three": 1}


def test_an_attempt_whose_lease_was_taken_over_writes_nothing_more(home: Path, gates: Gates, tmp_path: Path) -> None:
    policy = _policy(tmp_path / "operator.yaml", gates.port)
    with glovebox.Runtime(home=home, policy=policy) as rt:
        answers: list[glovebox.RunResult] = []
        runner = threading.Thread(
            target=lambda: answers.append(
                rt.run(HOLDING, input={"base": gates.url(), "gate": "stolen"}, principal="agent", lang="js")
            )
        )
        runner.start()
        try:
            gates.wait_hits("/gate/stolen", 1)
            (record,) = rt.runs.list()
            with sqlite3.connect(home / "runs.sqlite") as db:  # another process took the run over
                db.execute(
                    "UPDATE runs SET lease_owner = 'thief', lease_expires = ? WHERE run_id = ?",
                    (time.time() + 600, record.run_id),
                )
        finally:
            gates.open("stolen")
            runner.join(300)
        (lost,) = answers
        assert lost.status == "running" and lost.error is not None and lost.error.code == "run_busy"
        assert not lost.error.retryable and lost.error.details["holder"] == "thief"
        steps = rt.runs.journal(record.run_id)
        assert [step.state for step in steps] == ["done", "started"], "its result was not written"
        after = rt.runs.record(record.run_id)
        assert after is not None and after.status == "running" and after.lease_owner == "thief"
        assert gates.hits["/three"] == 0, "it made no call after losing the lease"
        row = rt.audit.find(lost.meta["call_id"])
        assert row is not None and row["outcome"] == "run_busy"


CHILD = textwrap.dedent(
    """
    import sys
    import glovebox
    home, policy, program, base = sys.argv[1:]
    with glovebox.Runtime(home=home, policy=policy) as rt:
        rt.run(open(program).read(), input={"base": base, "gate": "crash"}, principal="agent", lang="js")
    """
)


def _resume(home: Path, policy: Path, run_id: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "glovebox", "--home", str(home), "--policy", str(policy), "runs", "resume", run_id]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_processes_resuming_a_crashed_run_at_once_make_its_next_call_once(
    home: Path, gates: Gates, tmp_path: Path
) -> None:
    program = tmp_path / "plan.js"
    program.write_text(HOLDING)
    short = _policy(tmp_path / "short.yaml", gates.port, lease_seconds=0.5)  # the holder that dies
    errors = tmp_path / "child.err"
    with errors.open("wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(home), str(short), str(program), gates.url()],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        gates.wait_hits("/gate/crash", 1)
        with glovebox.Runtime(home=home, policy=short) as rt:
            (record,) = rt.runs.list()
        assert record.status == "running" and f"pid {child.pid}" in (record.lease_owner or "")
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL, errors.read_text()
    with glovebox.Runtime(home=home, policy=short) as rt:
        for _ in range(600):  # the dead holder renews no more: its lease expires
            now = rt.runs.record(record.run_id)
            if now is not None and not now.leased():
                break
            time.sleep(0.1)
        else:
            pytest.fail("the dead holder's lease never expired")
    long = _policy(tmp_path / "long.yaml", gates.port)  # the resumers' leases outlive this test
    first, second = _resume(home, long, record.run_id), _resume(home, long, record.run_id)
    try:
        gates.wait_hits("/gate/crash", 2)  # one resumer is making the step the crash cut short
        while first.poll() is None and second.poll() is None:
            time.sleep(0.05)
        loser, winner = (first, second) if first.poll() is not None else (second, first)
        refused = json.loads(loser.communicate(timeout=300)[0])
        assert loser.returncode == 1
        assert refused["status"] == "running" and refused["error"]["code"] == "run_busy", refused
        assert f"pid {winner.pid}" in refused["error"]["details"]["holder"]
        assert record.run_id in refused["error"]["message"]
    finally:
        gates.open("crash")
    out, err = winner.communicate(timeout=600)
    assert winner.returncode == 0, err
    envelope = json.loads(out)
    assert envelope["status"] == "done" and envelope["output"] == [1, 2, 1], envelope
    # /one was done: replayed. /gate/crash was in flight at the kill: the winner made it again, the loser never.
    assert dict(gates.hits) == {"/one": 1, "/gate/crash": 2, "/three": 1}
    with glovebox.Runtime(home=home, policy=long) as rt:
        rows = [r for r in rt.audit.records() if r["tool"] == "glovebox:run"]
        assert sorted(r["outcome"] for r in rows) == ["abandoned", "ok", "run_busy"]
        (ok,) = [r for r in rows if r["outcome"] == "ok"]
        assert ok["attempt"] == 2 and _egress(ok)["run"]["previous_call_id"] == record.attempt_call_id
        # The killed attempt's row, written once, by the winner that took the run over from it.
        (killed,) = [r for r in rows if r["outcome"] == "abandoned"]
        assert killed["call_id"] == record.attempt_call_id and killed["attempt"] == 1
        assert _egress(killed)["run"]["taken_over_by"] == ok["call_id"]
        assert rt.audit.verify().ok


def test_the_runs_deadline_counts_the_time_spent_in_nested_calls(home: Path, gates: Gates, tmp_path: Path) -> None:
    policy = _policy(tmp_path / "operator.yaml", gates.port)
    with glovebox.Runtime(home=home, policy=policy) as rt:
        rt.runs.runner.limits = RUN_LIMITS.model_copy(update={"timeout_ms": 3000})
        rt.runs.runner.bounds = RunBounds(max_steps=200)
        result = rt.run(
            "export default async function (input, tools) {"
            '  for (let i = 0; ; i++) await tools.call("hc", { url: input.base + "/slow/" + i }); }',
            input={"base": gates.url()},
            principal="agent",
            lang="js",
        )
    # The program itself spends almost no fuel; only the 300 ms each nested call waits ends it.
    assert result.status == "failed" and result.error is not None and result.error.code == "timeout", result.to_dict()
    assert 0 < sum(gates.hits.values()) < 200
