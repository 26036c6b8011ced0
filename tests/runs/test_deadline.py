"""A nested call never outlives its run: the run's deadline cuts it short, on every backend.

The tool waits on a real upstream on 127.0.0.1 that sleeps far past the run's
deadline; its own timeout (30 s) is longer still. The nested call must answer
``timeout`` saying the run's deadline cut it (its own audit row too), and the
run must end ``failed`` with ``timeout`` near its deadline, not the tool's.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import glovebox
from glovebox.runs._runner import RUN_LIMITS

from .conftest import TOOL_TIMEOUT_MS, Sleeper

#: The run's deadline: much shorter than the tool's own timeout (``TOOL_TIMEOUT_MS``, 30 s).
RUN_TIMEOUT_MS = 2_000
#: How long a run may take in these tests before it counts as having waited for its tool (generous:
#: well above the run's 2 s on a loaded machine, well below the tool's 30 s).
WELL_BEFORE_THE_TOOL_S = 20.0

SLOW = """export default async function (input, tools) {
  const answer = await tools.call("hc", { url: input.base + "/sleep" });
  return answer.status;
}"""


def short_deadline(backend: Any) -> None:
    """Give the backend's runs a 2 s deadline (the runner's limits, as the other runs tests do)."""
    backend.runs.runner.limits = RUN_LIMITS.model_copy(update={"timeout_ms": RUN_TIMEOUT_MS})


def check_cut_short(backend: Any, sleeper: Sleeper) -> glovebox.RunResult:
    """Run the slow program on ``backend``; assert the run and its nested call ended by the run's deadline."""
    warm = backend.run("export default async function () { return 1; }", lang="js")  # the runner compiled once
    assert warm.status == "done", warm.to_dict()
    started = time.monotonic()
    result = backend.run(SLOW, input={"base": sleeper.base}, principal="agent", lang="js")
    elapsed = time.monotonic() - started
    assert result.status == "failed" and result.error is not None, result.to_dict()
    assert result.error.code == "timeout", result.to_dict()
    assert elapsed < WELL_BEFORE_THE_TOOL_S, f"the run waited {elapsed:.1f} s: its nested call outlived it"
    assert not sleeper.release.is_set() and sleeper.hits["/sleep"] == 1, "the upstream never answered"
    # The nested call answered timeout, saying the run's deadline (not its own 30 s) cut it short.
    (step,) = backend.runs.journal(result.run_id)
    envelope = step.result
    assert step.state == "done" and envelope["ok"] is False, envelope
    error = envelope["error"]
    assert error["code"] == "timeout" and error["details"]["deadline"] == "run", error
    assert error["details"]["tool_timeout_ms"] == TOOL_TIMEOUT_MS, error
    assert error["details"]["timeout_ms"] <= RUN_TIMEOUT_MS and "the run's deadline" in error["message"]
    assert envelope["meta"]["run"]["deadline_at"] > 0
    # Its own audit row says so too, and names its run and attempt.
    row = backend.audit.find(envelope["meta"]["call_id"])
    assert row is not None and row["outcome"] == "timeout" and row["principal"] == "agent", row
    run = json.loads(row["egress"])["run"] if isinstance(row["egress"], str) else row["egress"]["run"]
    assert run["run_id"] == result.run_id and run["parent_call_id"] == result.meta["call_id"]
    attempt = backend.audit.find(result.meta["call_id"])
    assert attempt is not None and attempt["tool"] == "glovebox:run" and attempt["outcome"] == "timeout"
    return result


def test_a_nested_call_waiting_on_a_slow_upstream_ends_at_the_runs_deadline(
    slow_home: tuple[Path, Path], sleeper: Sleeper
) -> None:
    home, policy = slow_home
    with glovebox.Runtime(home=home, policy=policy) as rt:
        short_deadline(rt)
        check_cut_short(rt, sleeper)


def test_a_direct_call_keeps_its_own_timeout(slow_home: tuple[Path, Path], sleeper: Sleeper) -> None:
    """Outside a run nothing is cut: the same call waits for its upstream (released here after 3 s)."""
    home, policy = slow_home
    with glovebox.Runtime(home=home, policy=policy) as rt:
        threading.Timer(3.0, sleeper.release.set).start()
        result = rt.call("hc", {"url": sleeper.base + "/sleep"}, principal="agent")
    assert result.ok and result.output["status"] == "ok", result.to_dict()
    assert "run" not in result.meta


def test_a_program_that_catches_the_timeout_still_ends_at_its_deadline(
    slow_home: tuple[Path, Path], sleeper: Sleeper
) -> None:
    """Catching the nested call's timeout and calling again does not buy the program more time."""
    home, policy = slow_home
    program = """export default async function (input, tools) {
      for (let i = 0; i < 1000; i++) {
        try { await tools.call("hc", { url: input.base + "/sleep" }); } catch (e) { if (e.code !== "timeout") throw e; }
      }
      return "outlived";
    }"""
    with glovebox.Runtime(home=home, policy=policy) as rt:
        short_deadline(rt)
        assert rt.run("export default async function () { return 1; }", lang="js").ok  # the runner compiled
        started = time.monotonic()
        result = rt.run(program, input={"base": sleeper.base}, principal="agent", lang="js")
        elapsed = time.monotonic() - started
        assert result.status == "failed" and result.error is not None, result.to_dict()
        assert result.error.code == "timeout", result.to_dict()
        assert elapsed < WELL_BEFORE_THE_TOOL_S, f"the run took {elapsed:.1f} s"
        for call in result.calls:
            assert call["code"] == "timeout", result.calls


def test_on_a_process_pool_the_deadline_crosses_to_the_worker(slow_home: tuple[Path, Path], sleeper: Sleeper) -> None:
    home, policy = slow_home
    with glovebox.ProcessPool(2, home=home, policy=policy) as pool:
        short_deadline(pool)
        result = check_cut_short(pool, sleeper)
        (step,) = pool.runs.journal(result.run_id)
        assert step.result["meta"]["worker_pid"] > 0, "the nested call ran on a worker"


def test_the_runners_first_build_does_not_count_against_the_first_runs_deadline(rt: glovebox.Runtime) -> None:
    """The runner is built on the first run (a compile of tens of seconds on a cold cache): the run's
    deadline, and so its nested calls', starts once it is built, as does the lease's clock."""
    short_deadline(rt)
    runner = rt.runs.runner
    build = runner._component

    def slow_build(lang: str) -> Any:
        time.sleep(RUN_TIMEOUT_MS / 1000 + 0.5)  # a build that outlasts the whole of the run's deadline
        return build(lang)

    runner._component = slow_build
    program = 'export default async function (i, tools) { return (await tools.calc({ expression: "6 * 7" })).value; }'
    result = rt.run(program, principal="agent", lang="js")
    assert result.status == "done" and result.output == 42, result.to_dict()
    assert [call["code"] for call in result.calls] == [None], result.calls
