"""Code mode on a RayRuntime: the program runs on the driver, journaled in its home; each nested call
runs on a replica, with its call id and the run's context, and leaves its own audit row."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

import glovebox  # noqa: E402
from glovebox.ray import RayRuntime  # noqa: E402
from glovebox.scale._raycluster import keep_trap_handlers  # noqa: E402

from .conftest import HitCounter, Sleeper  # noqa: E402
from .test_backends import APPROVED, check_nested_rows  # noqa: E402
from .test_deadline import check_cut_short, short_deadline  # noqa: E402
from .test_mcp_code_backends import http_client, keyed, text_envelope  # noqa: E402
from .test_python_runs import APPROVED_PY  # noqa: E402
from .test_python_runs import THREE_STEPS as THREE_STEPS_PY  # noqa: E402
from .test_runs import THREE_STEPS  # noqa: E402

# One Ray cluster at a time on the machine: the Ray tests share one pytest-xdist worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    with keep_trap_handlers():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        with keep_trap_handlers():
            ray.shutdown()


def test_a_run_on_ray_pauses_resumes_on_a_runtime_and_names_its_run_in_every_row(
    cluster: None, run_home: tuple[Path, Path], upstream: HitCounter
) -> None:
    home, policy = run_home
    with RayRuntime(2, home=home, policy=policy, threads=2, replica_options={"num_cpus": 0.5}) as deployment:
        assert isinstance(deployment, glovebox.CallBackend)
        done = deployment.run(THREE_STEPS, input={"text": "one two three\nfour"}, principal="agent")
        assert done.status == "done", done.to_dict()
        assert done.output == {"words": 4, "lines": 2, "doubled": 8, "total": 10}
        check_nested_rows(deployment.audit, done, "agent")
        caught = deployment.run(
            'export default async function (i, tools) { try { await tools.call("calc", { expression: 7 }); }'
            " catch (e) { return [e.name, e.code]; } }",
            principal="agent",
        )
        assert caught.output == ["ToolCallError", "invalid_input"], caught.to_dict()  # refused on a replica
        paused = deployment.run(APPROVED, input={"base": upstream.url("")}, principal="agent")
        assert paused.status == "paused" and paused.error is not None, paused.to_dict()
        deployment.approve(paused.error.details["approval_id"], principal="admin")
    with glovebox.Runtime(home=home, policy=policy) as rt:
        assert {record.run_id for record in rt.runs.list()} == {done.run_id, caught.run_id, paused.run_id}
        resumed = rt.runs.resume(paused.run_id)
        assert resumed.output == {"first": 1, "second": 1}, resumed.to_dict()
        assert upstream.hits == {"/first": 1, "/approved": 1}
        row = rt.audit.find(caught.calls[0]["call_id"])
        assert row is not None and row["outcome"] == "invalid_input"
        egress = row["egress"] if isinstance(row["egress"], dict) else json.loads(row["egress"])
        assert egress["run"]["run_id"] == caught.run_id


def test_a_python_run_on_ray_pauses_and_resumes_on_ray(
    cluster: None, run_home: tuple[Path, Path], upstream: HitCounter
) -> None:
    home, policy = run_home
    with RayRuntime(2, home=home, policy=policy, threads=2, replica_options={"num_cpus": 0.5}) as deployment:
        done = deployment.run(THREE_STEPS_PY, input={"text": "one two three\nfour"}, principal="agent", lang="py")
        assert done.status == "done" and done.output["total"] == 10, done.to_dict()
        check_nested_rows(deployment.audit, done, "agent")
        paused = deployment.run(APPROVED_PY, input={"base": upstream.url("")}, principal="agent", lang="py")
        assert paused.status == "paused" and paused.error is not None, paused.to_dict()
        deployment.approve(paused.error.details["approval_id"], principal="admin")
        resumed = deployment.runs.resume(paused.run_id)
        assert resumed.output == {"first": 1, "second": 1}, resumed.to_dict()
    assert upstream.hits == {"/first": 1, "/approved": 1}


def test_on_ray_the_runs_deadline_crosses_to_the_replica(
    cluster: None, slow_home: tuple[Path, Path], sleeper: Sleeper
) -> None:
    """A nested call on a replica waiting on a slow upstream ends at the run's deadline (``deadline_at``)."""
    home, policy = slow_home
    with RayRuntime(1, home=home, policy=policy, threads=2, replica_options={"num_cpus": 0.5}) as deployment:
        short_deadline(deployment)
        result = check_cut_short(deployment, sleeper)
        (step,) = deployment.runs.journal(result.run_id)
        assert step.result["meta"]["run"]["run_id"] == result.run_id


@contextmanager
def _mcp_on_ray(home: Path, policy: Path, address: str) -> Iterator[str]:
    """``glovebox mcp --code-mode --transport http --backend ray --address A`` running; its base URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [sys.executable, "-m", "glovebox", "--home", str(home), "--policy", str(policy), "mcp", "--code-mode"]
    argv += ["--transport", "http", "--port", str(port), "--backend", "ray", "--address", address, "--replicas", "1"]
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log)
        try:
            deadline = time.monotonic() + 300  # a deadline, not a timing claim: joining Ray takes its time
            while True:
                if server.poll() is not None:
                    log.seek(0)
                    raise AssertionError(log.read().decode(errors="replace"))
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", port)) == 0:
                        break
                assert time.monotonic() < deadline, "the server never listened"
                time.sleep(0.1)
            yield f"http://127.0.0.1:{port}"
        finally:
            server.terminate()
            server.wait(120)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_cli_mcp_code_mode_on_ray_runs_execute_with_nested_calls_on_a_replica(
    cluster: None, run_home: tuple[Path, Path], anyio_backend: str
) -> None:
    """The real CLI server (``mcp --code-mode --backend ray``) driven by the official Python MCP client."""
    home, policy = keyed(run_home)
    with _mcp_on_ray(home, policy, ray.get_runtime_context().gcs_address) as url:
        async with http_client(url, "agent-key") as session:
            listed = sorted(tool.name for tool in (await session.list_tools()).tools)
            assert listed == ["execute", "resume", "search"]
            done = await session.call_tool("execute", {"code": THREE_STEPS, "input": {"text": "one two\nthree"}})
            run = text_envelope(done)
            assert not done.is_error and run["status"] == "done", run
            assert run["output"] == {"words": 3, "lines": 2, "doubled": 6, "total": 8}
    assert [call["tool"] for call in run["calls"]] == ["text-stats", "calc", "calc"]
    assert all(call["code"] is None and not call["replayed"] for call in run["calls"])
    with glovebox.Runtime(home=home, policy=policy) as rt:
        steps = rt.runs.journal(run["run_id"])
        assert [step.result["meta"]["replica"] for step in steps] == ["replica-0"] * 3, "each ran on a replica"
        for step, call in zip(steps, run["calls"], strict=True):
            row = rt.audit.find(call["call_id"])
            assert row is not None and row["principal"] == "agent" and row["outcome"] == "ok"
            egress = row["egress"] if isinstance(row["egress"], dict) else json.loads(row["egress"])
            assert egress["run"]["run_id"] == run["run_id"] and egress["run"]["step"] == step.seq
        assert rt.audit.verify().ok
