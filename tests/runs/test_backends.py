"""Code mode on a ProcessPool: the program runs in the pool's process, each nested call on a worker.

Real guests, a real upstream counting its hits, the home's ``runs.sqlite`` shared
by the pool and a plain Runtime: a run paused on the pool resumes on a Runtime,
and the other way round, and the approved call runs once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import glovebox

from .conftest import HitCounter
from .test_python_runs import APPROVED_PY
from .test_python_runs import THREE_STEPS as THREE_STEPS_PY
from .test_runs import THREE_STEPS

APPROVED = """export default async function (input, tools) {
  const first = await tools.call("hc", { url: input.base + "/first" });
  const second = await tools.call("hc-approve", { url: input.base + "/approved" });
  return { first: JSON.parse(first.body).hit, second: JSON.parse(second.body).hit };
}"""


@pytest.fixture
def pool(run_home: tuple[Path, Path]) -> Iterator[glovebox.ProcessPool]:
    home, policy = run_home
    with glovebox.ProcessPool(2, home=home, policy=policy) as made:
        yield made


def egress(row: dict[str, Any]) -> dict[str, Any]:
    value = row["egress"]
    return value if isinstance(value, dict) else dict(json.loads(value))


def check_nested_rows(audit: glovebox.AuditLog, result: glovebox.RunResult, principal: str) -> None:
    """Each nested call left one row, under the call id the run reports, naming the run and its step."""
    assert result.calls, result.to_dict()
    for step, call in enumerate(result.calls):
        rows = [row for row in audit.records() if row["call_id"] == call["call_id"]]
        assert len(rows) == 1, (call, rows)
        assert rows[0]["principal"] == principal
        assert egress(rows[0])["run"]["run_id"] == result.run_id
        assert egress(rows[0])["run"]["step"] == step


def test_a_three_step_program_on_a_process_pool(pool: glovebox.ProcessPool) -> None:
    assert isinstance(pool, glovebox.CallBackend)
    result = pool.run(THREE_STEPS, input={"text": "one two three\nfour"}, principal="agent")
    assert result.status == "done", result.to_dict()
    assert result.output == {"words": 4, "lines": 2, "doubled": 8, "total": 10}
    assert [call["tool"] for call in result.calls] == ["text-stats", "calc", "calc"]
    check_nested_rows(pool.audit, result, "agent")
    assert [record.run_id for record in pool.runs.list()] == [result.run_id]


def test_a_nested_call_runs_on_a_worker(pool: glovebox.ProcessPool, upstream: HitCounter) -> None:
    program = 'export default async function (i, tools) { return (await tools.call("hc", { url: i.u })).status; }'
    answer: list[glovebox.RunResult] = []
    running = threading.Thread(
        target=lambda: answer.append(pool.run(program, input={"u": upstream.url("/hold/w")}, principal="agent"))
    )
    running.start()
    try:
        assert upstream.held.wait(60), "the nested call never reached the upstream"
        assert pool.in_flight == 1  # booked on a worker: the pool's own count, not the front Runtime's
    finally:
        upstream.release.set()
        running.join(60)
    assert answer and answer[0].status == "done" and answer[0].output == "ok", answer


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_arun_on_a_process_pool(pool: glovebox.ProcessPool, anyio_backend: str) -> None:
    result = await pool.arun(THREE_STEPS, input={"text": "a b c"}, principal="agent")
    assert result.status == "done" and result.output["doubled"] == 6, result.to_dict()


def test_paused_on_a_pool_resumes_on_a_runtime_and_the_approved_call_runs_once(
    run_home: tuple[Path, Path], upstream: HitCounter
) -> None:
    home, policy = run_home
    with glovebox.ProcessPool(2, home=home, policy=policy) as pool:
        paused = pool.run(APPROVED, input={"base": upstream.url("")}, principal="agent")
        assert paused.status == "paused" and paused.error is not None, paused.to_dict()
        assert paused.error.code == "approval_required"
        assert upstream.hits == {"/first": 1}
        assert pool.runs.resume(paused.run_id).status == "paused"  # not approved yet: nothing repeats
        assert upstream.hits == {"/first": 1}
        pool.approve(paused.error.details["approval_id"], principal="admin")
    with glovebox.Runtime(home=home, policy=policy) as rt:
        assert rt.runs.show(paused.run_id).status == "paused"
        done = rt.runs.resume(paused.run_id)
        assert done.status == "done", done.to_dict()
        assert done.output == {"first": 1, "second": 1}
        assert [call["replayed"] for call in done.calls] == [True, False]
        assert upstream.hits == {"/first": 1, "/approved": 1}
        check_nested_rows(rt.audit, done, "agent")


def test_paused_on_a_runtime_resumes_on_a_pool(run_home: tuple[Path, Path], upstream: HitCounter) -> None:
    home, policy = run_home
    with glovebox.Runtime(home=home, policy=policy) as rt:
        paused = rt.run(APPROVED, input={"base": upstream.url("")}, principal="agent")
        assert paused.status == "paused" and paused.error is not None
        rt.approve(paused.error.details["approval_id"], principal="admin")
    with glovebox.ProcessPool(2, home=home, policy=policy) as pool:
        done = pool.runs.resume(paused.run_id)
        assert done.status == "done" and done.output == {"first": 1, "second": 1}, done.to_dict()
        assert upstream.hits == {"/first": 1, "/approved": 1}
        assert pool.runs.show(paused.run_id).status == "done"
        assert pool.runs.resume(paused.run_id).output == done.output  # finished: answered as it ended
        assert upstream.hits == {"/first": 1, "/approved": 1}


def test_a_hidden_tool_is_absent_on_the_pool_too(pool: glovebox.ProcessPool) -> None:
    program = """export default async function (input, tools) {
      const answers = [];
      for (const name of ["primes", "nothing-here"]) {
        try { await tools.call(name, {}); } catch (e) { answers.push([e.code, e.message.replace(name, "NAME")]); }
      }
      return { answers, wrappers: Object.keys(tools), found: await tools.search("prime") };
    }"""
    result = pool.run(program, principal="agent")
    assert result.status == "done", result.to_dict()
    hidden, unknown = result.output["answers"]
    assert hidden == unknown and hidden[0] == "tool_not_found" and "primes" not in hidden[1]
    assert "primes" not in result.output["wrappers"] and result.output["found"] == []
    assert "primes" not in pool.runs.declarations("agent")


@pytest.mark.parametrize(
    ("principal", "program", "code"),
    [
        ("outsider", 'await tools.call("text-stats", { text: "x" })', "tool_not_found"),  # lacks its scope
        ("agent", 'await tools.call("calc", { expression: 7 })', "invalid_input"),  # refused by the worker
        # 2 calls a minute, counted by each of the 2 workers: the fifth call finds one at its quota
        ("outsider", 'for (let i = 0; i < 5; i++) await tools.call("calc", { expression: "1" })', "rate_limited"),
    ],
)
def test_a_refused_nested_call_is_a_tool_call_error_through_the_pool(
    pool: glovebox.ProcessPool, principal: str, program: str, code: str
) -> None:
    caught = pool.run(
        "export default async function (input, tools) {"
        f"  try {{ {program}; return null; }}"
        "  catch (e) { return { name: e.name, code: e.code, ok: e instanceof tools.ToolCallError }; } }",
        principal=principal,
    )
    assert caught.output == {"name": "ToolCallError", "code": code, "ok": True}, caught.to_dict()
    refused = caught.calls[-1]
    assert refused["code"] == code
    row = pool.audit.find(refused["call_id"])
    assert row is not None and row["outcome"] == code and egress(row)["run"]["run_id"] == caught.run_id


def test_a_python_program_on_a_pool_pauses_and_resumes_on_a_runtime(
    run_home: tuple[Path, Path], upstream: HitCounter
) -> None:
    home, policy = run_home
    with glovebox.ProcessPool(2, home=home, policy=policy) as pool:
        done = pool.run(THREE_STEPS_PY, input={"text": "one two three\nfour"}, principal="agent", lang="py")
        assert done.status == "done" and done.output["total"] == 10, done.to_dict()
        check_nested_rows(pool.audit, done, "agent")
        paused = pool.run(APPROVED_PY, input={"base": upstream.url("")}, principal="agent", lang="py")
        assert paused.status == "paused" and paused.error is not None, paused.to_dict()
        pool.approve(paused.error.details["approval_id"], principal="admin")
    with glovebox.Runtime(home=home, policy=policy) as rt:
        resumed = rt.runs.resume(paused.run_id)
        assert resumed.output == {"first": 1, "second": 1}, resumed.to_dict()
        assert [call["replayed"] for call in resumed.calls] == [True, False]
        assert upstream.hits == {"/first": 1, "/approved": 1}


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_arun_of_a_python_program_on_a_process_pool(pool: glovebox.ProcessPool, anyio_backend: str) -> None:
    result = await pool.arun(THREE_STEPS_PY, input={"text": "a b c"}, principal="agent", lang="py")
    assert result.status == "done" and result.output["doubled"] == 6, result.to_dict()
