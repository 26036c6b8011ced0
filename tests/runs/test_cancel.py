"""Cancelling a run is accountable: one audit row naming who cancelled, kept in the run too.

Attacks: a principal without the operator's scopes cancelling another's run
(``permission_denied``, nothing changes, no row); a cancel of a finished run
(nothing changes, no row); a resume after a cancel (nothing runs).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import glovebox

from .conftest import HitCounter, run_policy
from .test_backends import APPROVED

#: A principal who may resume and cancel others' runs: it reads the audit log and approves.
OPERATOR = "  operator: {scopes: [glovebox:audit, glovebox:approve]}\n"


@pytest.fixture
def operated(run_home: tuple[Path, Path], upstream: HitCounter) -> tuple[Path, Path]:
    """The run home, with a policy that also knows the operator."""
    home, policy = run_home
    policy.write_text(run_policy(upstream.port).replace("  admin:", OPERATOR + "  admin:"))
    return home, policy


def _run_rows(rt: glovebox.Runtime) -> list[dict[str, Any]]:
    return [row for row in rt.audit.records() if row["tool"] == "glovebox:run"]


def _egress(row: dict[str, Any]) -> dict[str, Any]:
    value = row["egress"]
    return value if isinstance(value, dict) else dict(json.loads(value))


def _cli(home: Path, policy: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "glovebox", "--home", str(home), "--policy", str(policy), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600)


def test_a_cancel_writes_one_row_naming_who_cancelled(operated: tuple[Path, Path], upstream: HitCounter) -> None:
    home, policy = operated
    with glovebox.Runtime(home=home, policy=policy) as rt:
        paused = rt.run(APPROVED, input={"base": upstream.url("")}, principal="agent")
        assert paused.status == "paused", paused.to_dict()
        before = len(_run_rows(rt))
        # Neither a principal without scopes nor an approver who cannot read the audit log may cancel it.
        for intruder, missing in (("outsider", "glovebox:audit"), ("admin", "glovebox:audit")):
            with pytest.raises(glovebox.PermissionDenied, match=missing) as refused:
                rt.runs.cancel(paused.run_id, by=intruder)
            assert refused.value.code == "permission_denied"
            assert refused.value.details["scopes"] == ["glovebox:audit", "glovebox:approve"]
        record = rt.runs.record(paused.run_id)
        assert record is not None and record.status == "paused" and len(_run_rows(rt)) == before
        # The operator may: the run is cancelled, the result and one row name the operator.
        cancelled = rt.runs.cancel(paused.run_id, by="operator")
        assert cancelled.status == "cancelled" and cancelled.meta["cancelled_by"] == "operator", cancelled.to_dict()
        rows = _run_rows(rt)
        assert len(rows) == before + 1
        row = rows[-1]
        assert row["call_id"] == cancelled.meta["call_id"] and row["outcome"] == "cancelled"
        assert row["principal"] == "agent", "the row is the run's owner's, and names who cancelled it"
        run = _egress(row)["run"]
        assert run["by"] == "operator" and run["action"] == "cancel" and run["status"] == "cancelled"
        assert run["run_id"] == paused.run_id and run["previous_call_id"] == paused.meta["call_id"]
        # A finished run: the cancel changes nothing and writes nothing; a resume runs nothing.
        again = rt.runs.cancel(paused.run_id, by="agent")
        assert again.to_dict() == cancelled.to_dict() and len(_run_rows(rt)) == before + 1
        rt.approve(paused.error.details["approval_id"], principal="admin")  # type: ignore[union-attr]
        resumed = rt.runs.resume(paused.run_id)
        assert resumed.status == "cancelled" and upstream.hits == {"/first": 1}
        assert rt.audit.verify().ok
        # By default the canceller is the run's own principal.
        own = rt.run(APPROVED, input={"base": upstream.url("/own")}, principal="agent")  # another approval
        assert own.status == "paused", own.to_dict()
        mine = rt.runs.cancel(own.run_id)
        assert mine.meta["cancelled_by"] == "agent"
        assert _egress(_run_rows(rt)[-1])["run"]["by"] == "agent"


def test_runs_cancel_by_on_the_cli(operated: tuple[Path, Path], upstream: HitCounter) -> None:
    home, policy = operated
    with glovebox.Runtime(home=home, policy=policy) as rt:
        paused = rt.run(APPROVED, input={"base": upstream.url("")}, principal="agent")
        assert paused.status == "paused", paused.to_dict()
    refused = _cli(home, policy, "runs", "cancel", paused.run_id, "--by", "outsider")
    assert refused.returncode != 0 and "permission_denied" in refused.stderr and "glovebox:audit" in refused.stderr
    done = _cli(home, policy, "runs", "cancel", paused.run_id, "--by", "operator")
    assert done.returncode == 1, done.stderr  # not done: cancelled
    envelope = json.loads(done.stdout)
    assert envelope["status"] == "cancelled" and envelope["meta"]["cancelled_by"] == "operator"
    shown = _cli(home, policy, "runs", "show", paused.run_id)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["cancelled_by"] == "operator"
    with glovebox.Runtime(home=home, policy=policy) as rt:
        row = rt.audit.find(envelope["meta"]["call_id"])
        assert row is not None and row["outcome"] == "cancelled" and _egress(row)["run"]["by"] == "operator"


def test_a_run_cancelled_while_it_executes_has_its_attempts_row_and_the_cancels(
    operated: tuple[Path, Path], upstream: HitCounter
) -> None:
    home, policy = operated
    program = """export default async function (input, tools) {
      await tools.call("hc", { url: input.base + "/hold/one" });
      await tools.call("hc", { url: input.base + "/two" });
      return "finished";
    }"""
    with glovebox.Runtime(home=home, policy=policy) as rt:
        answers: list[glovebox.RunResult] = []
        running = threading.Thread(
            target=lambda: answers.append(rt.run(program, input={"base": upstream.url("")}, principal="agent"))
        )
        running.start()
        try:
            assert upstream.held.wait(120), "the first call never reached the upstream"
            (record,) = rt.runs.list()
            cancelled = rt.runs.cancel(record.run_id, by="operator")
        finally:
            upstream.release.set()
            running.join(120)
        assert cancelled.status == "cancelled" and cancelled.meta["cancelled_by"] == "operator"
        (ended,) = answers
        assert ended.status == "cancelled" and ended.meta["cancelled_by"] == "operator", ended.to_dict()
        assert upstream.hits["/two"] == 0, "the program stopped at its next host call"
        rows = _run_rows(rt)
        assert [row["call_id"] for row in rows] == [cancelled.meta["call_id"], ended.meta["call_id"]]
        cancel_row, attempt_row = rows
        assert cancel_row["outcome"] == attempt_row["outcome"] == "cancelled"
        assert _egress(cancel_row)["run"]["action"] == "cancel" and "action" not in _egress(attempt_row)["run"]
        assert _egress(cancel_row)["run"]["previous_call_id"] == attempt_row["call_id"]
        assert attempt_row["attempt"] == 1
