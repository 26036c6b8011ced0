"""require_approval: one approved call, with exactly that principal, tool and input, runs once."""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import glovebox
from glovebox.cli._main import cli
from glovebox.policy import ApprovalStore, parse_policy
from glovebox.runtime._gate import input_digest
from glovebox.schema._schemas import MAX_INPUT_BYTES

POLICY = """
version: 1
principals:
  agent: {scopes: [run]}
  other: {scopes: [run]}
  admin: {scopes: [run, glovebox:approve]}
  boss: {scopes: [run, glovebox:approve]}
rules:
  - {tool: sensitive, action: require_approval}
  - {tool: checked, action: require_approval}
  - {tool: plain, action: allow}
approvals: {ttl_s: 60}
"""


@pytest.fixture
def rt(runtime: glovebox.Runtime, build_guest: Callable[[str], Path]) -> Iterator[glovebox.Runtime]:
    for name in ("sensitive", "plain"):
        runtime.register(build_guest("echo"), {"name": name, "required_scopes": ["run"]})
    with glovebox.Runtime(home=runtime.home, policy=parse_policy(POLICY)) as rt:
        yield rt


def request(rt: glovebox.Runtime, value: object, principal: str = "agent") -> str:
    result = rt.call("sensitive", value, principal=principal)
    assert result.code == "approval_required" and result.error is not None, result.to_dict()
    assert result.meta["fuel_used"] == 0 and "logs" not in result.meta
    approval_id: str = result.error.details["approval_id"]
    return approval_id


def test_approved_call_runs_exactly_once(rt: glovebox.Runtime) -> None:
    approval_id = request(rt, {"q": 1})
    assert request(rt, {"q": 1}) == approval_id, "asking again reuses the pending request"
    assert [a.id for a in rt.pending_approvals()] == [approval_id]
    approval = rt.approve(approval_id, principal="admin")
    assert approval.status == "approved" and approval.approved_by == "admin"
    assert approval.tool == "sensitive@0.0.0" and approval.principal == "agent"
    assert rt.call("sensitive", {"q": 1}, principal="agent").output == {"q": 1}
    assert request(rt, {"q": 1}) != approval_id, "the approval was used up"
    assert rt.audit.tail(2)[0]["decision"] == "approved"


def test_self_approval_is_refused(rt: glovebox.Runtime) -> None:
    approval_id = request(rt, {"q": 2}, principal="admin")
    with pytest.raises(glovebox.PermissionDenied, match="cannot approve its own request"):
        rt.approve(approval_id, principal="admin")
    rt.approve(approval_id, principal="boss")
    assert rt.call("sensitive", {"q": 2}, principal="admin").ok


def test_the_store_refuses_self_approval_with_the_glovebox_error(tmp_path: Path) -> None:
    store = ApprovalStore(tmp_path)
    try:
        pending = store.request("admin", "sensitive@0.0.0", "sha256:00", ttl_s=60)
        with pytest.raises(glovebox.PermissionDenied, match="cannot approve its own request") as info:
            store.approve(pending.id, "admin")
        assert info.value.code == "permission_denied"
        assert info.value.details == {"approval_id": pending.id}
        assert store.get(pending.id).status == "pending"  # type: ignore[union-attr]
    finally:
        store.close()


CHECKED = {"name": "checked", "required_scopes": ["run"], "input_schema": {"properties": {"q": {"maximum": 10}}}}


def test_invalid_input_is_refused_before_any_approval_is_asked_or_spent(
    rt: glovebox.Runtime, build_guest: Callable[[str], Path]
) -> None:
    rt.register(build_guest("echo"), CHECKED)
    first = rt.call("checked", {"q": 1}, principal="agent")
    assert first.code == "approval_required" and first.error is not None
    rt.approve(first.error.details["approval_id"], principal="admin")
    invalid = rt.call("checked", {"q": 99}, principal="agent")
    assert invalid.code == "invalid_input", invalid.to_dict()
    assert rt.pending_approvals() == [], "no approval is asked for input that cannot run"
    assert rt.call("checked", {"q": 1}, principal="agent").output == {"q": 1}
    assert rt.call("checked", {"q": 1}, principal="agent").code == "approval_required", "it ran once"


@pytest.mark.parametrize("value", [{"q": 99}, {"q": 1, "pad": "x" * MAX_INPUT_BYTES}], ids=["schema", "too-large"])
def test_an_approved_but_invalid_input_keeps_its_approval(
    rt: glovebox.Runtime, build_guest: Callable[[str], Path], value: dict[str, object]
) -> None:
    rt.register(build_guest("echo"), CHECKED)
    digest = input_digest(value)
    assert digest is not None
    approval = rt._gate.approvals.request("agent", "checked@0.0.0", digest, ttl_s=60)
    rt.approve(approval.id, principal="admin")
    result = rt.call("checked", value, principal="agent")
    assert result.code == "invalid_input" and result.meta["fuel_used"] == 0
    kept = rt._gate.approvals.get(approval.id)
    assert kept is not None and kept.status == "approved" and kept.used_at is None
    assert rt.audit.tail(1)[0]["decision"] == "require_approval"


def test_replay_with_another_input_or_principal_is_refused(rt: glovebox.Runtime) -> None:
    approval_id = request(rt, {"q": "approved"})
    rt.approve(approval_id, principal="admin")
    other_input = rt.call("sensitive", {"q": "swapped"}, principal="agent")
    assert other_input.code == "approval_required"
    other_principal = rt.call("sensitive", {"q": "approved"}, principal="other")
    assert other_principal.code == "approval_required"
    assert rt.call("sensitive", {"q": "approved"}, principal="agent").ok


def test_only_approvers_approve_and_only_pending_requests(rt: glovebox.Runtime) -> None:
    approval_id = request(rt, {"q": 3})
    with pytest.raises(glovebox.PermissionDenied, match="lacks the approver scope 'glovebox:approve'"):
        rt.approve(approval_id, principal="other")
    with pytest.raises(ValueError, match="no approval request"):
        rt.approve("feedfacefeedface", principal="admin")
    rt.approve(approval_id, principal="admin")
    with pytest.raises(ValueError, match="is approved, not pending"):
        rt.approve(approval_id, principal="boss")
    with pytest.raises(TypeError):
        rt.approve(approval_id, principal=None)  # type: ignore[arg-type]


def test_approvals_expire(rt: glovebox.Runtime) -> None:
    now = [time.time()]
    rt._gate.approvals.clock = lambda: now[0]
    approval_id = request(rt, {"q": 4})
    pending_id = request(rt, {"q": 5})
    rt.approve(approval_id, principal="admin")
    now[0] += 59.9
    assert [a.id for a in rt.pending_approvals()] == [pending_id], "still valid just before ttl_s"
    now[0] += 0.2
    assert rt.pending_approvals() == []
    assert rt.call("sensitive", {"q": 4}, principal="agent").code == "approval_required"
    with pytest.raises(ValueError, match="expired"):
        rt.approve(pending_id, principal="admin")


def test_cli_approve(rt: glovebox.Runtime, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    approval_id = request(rt, {"q": 6})

    def run(*args: str) -> Result:
        return CliRunner().invoke(cli, ["--home", str(rt.home), "--policy", str(policy), *args], catch_exceptions=False)

    refused = run("approve", approval_id, "--principal", "agent")
    assert (refused.exit_code, refused.stdout) == (1, "")
    assert refused.stderr.startswith("error [permission_denied]: ")
    done = run("approve", approval_id, "--principal", "admin")
    assert (done.exit_code, done.stderr) == (0, "")
    assert done.stdout.startswith(f"approved {approval_id}: agent may call sensitive@0.0.0 once with that input until ")
    again = run("approve", approval_id, "--principal", "admin")  # misuse: a ValueError from the library
    assert (again.exit_code, again.stdout) == (1, "")
    assert again.stderr == f"error [invalid_argument]: approval request {approval_id} is approved, not pending\n"
    unknown = run("approve", "nope", "--principal", "admin")
    assert (unknown.exit_code, unknown.stderr) == (1, "error [invalid_argument]: no approval request 'nope'\n")
    ran = run("call", "sensitive", "--input", '{"q": 6}', "--principal", "agent")
    assert ran.exit_code == 0 and json.loads(ran.stdout)["output"] == {"q": 6}


# -- identical requests at once -----------------------------------------------------

ROUNDS = 30
RACERS = 8


def _ids_from_threads(store: ApprovalStore, digest: str) -> set[str]:
    barrier = threading.Barrier(RACERS)
    ids: list[str] = []

    def ask() -> None:
        barrier.wait()
        ids.append(store.request("agent", "sensitive@0.0.0", digest, ttl_s=60).id)

    threads = [threading.Thread(target=ask) for _ in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ids) == RACERS
    return set(ids)


def test_identical_requests_from_threads_share_one_pending_id(tmp_path: Path) -> None:
    store = ApprovalStore(tmp_path)
    try:
        for round_ in range(ROUNDS):
            assert len(_ids_from_threads(store, f"sha256:{round_:02d}")) == 1
        assert len(store.pending()) == ROUNDS
    finally:
        store.close()


def _request_in_process(home: str, digest: str, barrier: Barrier, ids: Queue[str]) -> None:
    store = ApprovalStore(Path(home))
    barrier.wait()
    ids.put(store.request("agent", "sensitive@0.0.0", digest, ttl_s=60).id)
    store.close()


@pytest.mark.slow  # processes started and raced
def test_identical_requests_from_processes_share_one_pending_id(tmp_path: Path) -> None:
    ApprovalStore(tmp_path).close()
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["glovebox"])
    for round_ in range(3):
        barrier, ids = ctx.Barrier(RACERS), ctx.Queue()
        digest = f"sha256:{round_:02d}"
        workers = [
            ctx.Process(target=_request_in_process, args=(str(tmp_path), digest, barrier, ids)) for _ in range(RACERS)
        ]
        for worker in workers:
            worker.start()
        found = {ids.get(timeout=120) for _ in workers}
        for worker in workers:
            worker.join(timeout=120)
        assert [worker.exitcode for worker in workers] == [0] * RACERS
        assert len(found) == 1


def test_pending_page_reads_one_page_and_the_count(tmp_path: Path) -> None:
    now = [1000.0]
    store = ApprovalStore(tmp_path, clock=lambda: now[0])
    try:
        made = []
        for n in range(7):
            now[0] += 1
            made.append(store.request("agent", "sensitive@0.0.0", f"sha256:{n:02d}", ttl_s=60 + n).id)
        store.approve(made[0], "admin")
        page, total = store.pending_page(2, 3)
        assert [a.id for a in page] == made[3:6] and total == 6
        now[0] += 58.5  # request n expires at 1061 + 2n: 1 and 2 have expired
        page, total = store.pending_page(0, 10)
        assert [a.id for a in page] == made[3:] and total == 4
        assert store.pending_page(10, 5) == ([], 4)
    finally:
        store.close()


def test_pending_reads_a_page_when_asked_and_all_otherwise(tmp_path: Path) -> None:
    store = ApprovalStore(tmp_path)
    try:
        made = [store.request("agent", "sensitive@0.0.0", f"sha256:{n:02d}", ttl_s=600).id for n in range(5)]
        assert [a.id for a in store.pending()] == made
        assert [a.id for a in store.pending(offset=1, limit=2)] == made[1:3]
        assert [a.id for a in store.pending(offset=4, limit=10)] == made[4:]
        assert store.pending(offset=9) == []
        with pytest.raises(ValueError, match="must not be negative"):
            store.pending(limit=-1)
    finally:
        store.close()


def test_an_older_home_gains_the_statement_column_and_keeps_its_requests(tmp_path: Path) -> None:
    import sqlite3

    tmp_path.mkdir(exist_ok=True)
    old = sqlite3.connect(tmp_path / "approvals.sqlite")
    old.executescript(  # the table as a release before reasons and statements made it
        "CREATE TABLE approvals (id TEXT PRIMARY KEY, principal TEXT NOT NULL, tool TEXT NOT NULL,"
        " input_digest TEXT NOT NULL, status TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL,"
        " approved_by TEXT, approved_at REAL, used_at REAL);"
        "INSERT INTO approvals VALUES ('0ld', 'agent', 'x@1', 'sha256:a', 'pending', 1, 4e9, NULL, NULL, NULL);"
    )
    old.commit()
    old.close()
    store = ApprovalStore(tmp_path)
    try:
        kept = store.get("0ld")
        assert kept is not None and kept.statement is None and kept.shown is None
        assert kept.to_dict()["statement"] is None
        shown = {"database": "shop", "kind": "delete", "fingerprint": "DELETE FROM orders WHERE id = ?"}
        new = store.request("agent", "x@1", "sql:sha256:b", 60, shown)
        assert store.get(new.id) == new and new.shown == shown
        assert [a.id for a in store.pending()] == ["0ld", new.id]
    finally:
        store.close()
