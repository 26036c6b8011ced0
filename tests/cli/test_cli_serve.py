"""``glovebox serve`` and ``glovebox mcp`` options, through the real command in its own process.

``--max-running`` reaches the Runtime that runs the calls (the server process's,
or every worker's with ``--processes N``): one computing call holds the only
compute slot so a quick call waits until it ends (and runs beside it with two), many concurrent
calls under one slot all answer correctly, and a bad value is a usage error.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import httpx
import pytest

import glovebox
from glovebox.cli._serve import _calls

from ..conftest import metric_samples
from ..scale.test_process_pool import _server, _until
from ..servers.test_mcp import envelope, stdio_client

BuildGuest = Callable[[str], Path]
AGENT = {"Authorization": "Bearer agent-key"}
POLICY = f"""
version: 1
principals:
  agent:
    api_key_sha256: [{hashlib.sha256(b"agent-key").hexdigest()}]
defaults:
  action: allow
"""


@pytest.fixture
def spin_home(tmp_path: Path, build_guest: BuildGuest) -> tuple[Path, Path]:
    """``spin`` (computes until its fuel or its 2 s deadline runs out), ``quick`` (an echo), agent may call both."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    home = tmp_path / "home"
    with glovebox.Runtime(home=home, policy=policy) as rt:
        spin = {"fuel": 10_000_000_000, "timeout_ms": 2_000}
        rt.register(build_guest("loop_forever"), {"name": "spin", "limits": spin})
        rt.register(build_guest("echo"), {"name": "quick"})
    return home, policy


def _live_instances(http: httpx.Client) -> int:
    [(_, live)] = metric_samples(http.get("/metrics").text, "glovebox_live_instances")
    return int(live)


@pytest.mark.parametrize(("running", "first"), [("1", "spin"), ("2", "quick")])
def test_serve_max_running_holds_a_quick_call_behind_a_computing_one(
    spin_home: tuple[Path, Path], running: str, first: str
) -> None:
    home, policy = spin_home
    command = ("serve", "--processes", "1", "--max-running", running)
    with _server(home, policy, *command) as url, httpx.Client(base_url=url, timeout=60, headers=AGENT) as http:
        with ThreadPoolExecutor(1) as pool:
            spinning = pool.submit(http.post, "/v1/tools/spin/call", json={"input": {}})
            _until(lambda: _live_instances(http) == 1, "spin to run its wasm")  # it holds a compute slot
            quick = http.post("/v1/tools/quick/call", json={"input": {"a": 1}}).json()
            spin = spinning.result().json()
    assert quick["output"] == {"a": 1} and spin["error"]["code"] in {"timeout", "fuel_exhausted"}
    with glovebox.Runtime(home=home) as rt:  # a call writes its audit row before it gives its slot up
        seq = {
            name: rt.audit.find(answer["meta"]["call_id"])["seq"] for name, answer in [("spin", spin), ("quick", quick)]
        }  # type: ignore[index]
    assert min(seq, key=seq.__getitem__) == first, seq


def test_serve_max_running_one_answers_many_concurrent_calls(spin_home: tuple[Path, Path]) -> None:
    home, policy = spin_home
    command = ("serve", "--processes", "1", "--max-running", "1")
    with _server(home, policy, *command) as url, httpx.Client(base_url=url, timeout=60, headers=AGENT) as http:
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda i: http.post("/v1/tools/quick/call", json={"input": {"i": i}}), range(64)))
    assert [a.json().get("output") for a in answers] == [{"i": i} for i in range(64)]


async def _many_calls(call: Callable[[int], object]) -> None:
    async with anyio.create_task_group() as group:
        for i in range(32):
            group.start_soon(call, i)


def test_mcp_stdio_max_running_one_answers_many_concurrent_calls(spin_home: tuple[Path, Path]) -> None:
    home, policy = spin_home
    outputs: dict[int, object] = {}

    async def main() -> None:
        async with stdio_client(home, policy, "--principal", "agent", "--max-running", "1") as client:

            async def call(i: int) -> None:
                result = await client.call_tool("quick", {"i": i})
                outputs[i] = envelope(result).get("output")

            await _many_calls(call)  # type: ignore[arg-type]

    anyio.run(main)
    assert outputs == {i: {"i": i} for i in range(32)}


@pytest.mark.slow
def test_mcp_http_with_processes_and_max_running_one_answers_many_concurrent_calls(
    spin_home: tuple[Path, Path],
) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    home, policy = spin_home
    outputs: dict[int, object] = {}
    pids: set[int] = set()

    async def main(url: str) -> None:
        async with httpx2.AsyncClient(headers=AGENT, timeout=60) as http:
            async with Client(streamable_http_client(url + "/mcp", http_client=http), cache=None) as client:  # type: ignore[arg-type]

                async def call(i: int) -> None:
                    answer = envelope(await client.call_tool("quick", {"i": i}))
                    outputs[i] = answer.get("output")
                    pids.add(answer["meta"]["worker_pid"])

                await _many_calls(call)  # type: ignore[arg-type]

    command = ("mcp", "--transport", "http", "--processes", "2", "--max-running", "1")
    with _server(home, policy, *command) as url:
        anyio.run(main, url)
    assert outputs == {i: {"i": i} for i in range(32)}
    assert len(pids) == 2


@pytest.mark.slow
def test_every_worker_holds_the_servers_max_running(_isolated_env: Path) -> None:
    with glovebox.Runtime(home=_isolated_env) as rt:
        with _calls(rt, 2, "local", None, 2, max_in_flight=7, max_queued=5, max_running=1) as pool:
            assert isinstance(pool, glovebox.ProcessPool)
            assert {key: pool._workers._options[key] for key in ("max_in_flight", "max_queued", "max_running")} == {
                "max_in_flight": 7,
                "max_queued": 5,
                "max_running": 1,
            }


@pytest.mark.parametrize("command", ["serve", "mcp"])
@pytest.mark.parametrize("value", ["0", "-2", "many"])
def test_a_bad_max_running_is_a_usage_error_naming_the_option(command: str, value: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "glovebox", command, "--max-running", value],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )
    assert done.returncode == 2 and done.stdout == ""
    last = done.stderr.splitlines()[-1]
    assert last.startswith("error [usage_error]: Invalid value for '--max-running': "), done.stderr
