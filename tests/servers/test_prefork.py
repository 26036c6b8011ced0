"""``glovebox serve|mcp --workers N``: N server processes on one port, sharing one home.

Each test runs the real command in its own process (``_server``), with real
worker processes; which worker answers a connection is read from ``/healthz``'s
``pid`` (a keep-alive client stays on the worker that accepted its connection).
"""

from __future__ import annotations

import hashlib
import os
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

import glovebox

from ..scale.test_process_pool import _server, _until
from .test_mcp import envelope

pytestmark = [pytest.mark.system, pytest.mark.slow]

BuildGuest = Callable[[str], Path]
AGENT = {"Authorization": "Bearer agent-key"}
POLICY = f"""
version: 1
principals:
  agent:
    api_key_sha256: [{hashlib.sha256(b"agent-key").hexdigest()}]
    scopes: [run]
  admin: {{scopes: [run, glovebox:approve]}}
defaults:
  action: allow
rules:
  - {{tool: sensitive, action: require_approval}}
approvals: {{ttl_s: 600}}
"""


@pytest.fixture
def home(tmp_path: Path, build_guest: BuildGuest) -> tuple[Path, Path]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    home = tmp_path / "home"
    with glovebox.Runtime(home=home, policy=policy) as rt:
        rt.register(build_guest("echo"), {"name": "echo"})
        rt.register(build_guest("echo"), {"name": "sensitive"})
    return home, policy


@contextmanager
def _clients_per_worker(url: str, workers: int) -> Iterator[dict[int, httpx.Client]]:
    """One keep-alive client on each of ``workers`` distinct server processes (by ``/healthz``'s pid)."""
    with ExitStack() as stack:
        found: dict[int, httpx.Client] = {}

        def one_more() -> bool:
            client = stack.enter_context(httpx.Client(base_url=url, timeout=60, headers=AGENT))
            found.setdefault(client.get("/healthz").json()["pid"], client)
            return len(found) == workers

        _until(one_more, f"connections accepted by {workers} server processes")
        yield found


def test_two_workers_serve_one_port_into_one_valid_audit_chain(home: tuple[Path, Path]) -> None:
    home_dir, policy = home
    with _server(home_dir, policy, "serve", "--workers", "2", "--processes", "1") as url:
        with _clients_per_worker(url, 2) as clients:
            assert len(set(clients)) == 2

            def calls(client: httpx.Client) -> list[object]:
                return [client.post("/v1/tools/echo/call", json={"input": {"i": i}}).json() for i in range(40)]

            with ThreadPoolExecutor(2) as both:  # both workers call at once
                answers = [a for each in both.map(calls, clients.values()) for a in each]
            assert all(a["ok"] for a in answers)  # type: ignore[index]
            assert httpx.post(f"{url}/v1/tools/echo/call", json={"input": {}}).status_code == 401
    with glovebox.Runtime(home=home_dir) as rt:
        verified = rt.audit.verify()
        ids = {row["call_id"] for row in rt.audit.records()}
    assert verified.ok, verified
    assert {a["meta"]["call_id"] for a in answers} <= ids  # type: ignore[index]


def test_an_approval_asked_through_one_worker_is_used_through_the_other(home: tuple[Path, Path]) -> None:
    home_dir, policy = home
    with _server(home_dir, policy, "serve", "--workers", "2", "--processes", "1") as url:
        with _clients_per_worker(url, 2) as clients:
            first, second = clients.values()
            asked = first.post("/v1/tools/sensitive/call", json={"input": {"q": 1}}).json()
            assert asked["error"]["code"] == "approval_required"
            with glovebox.Runtime(home=home_dir, policy=policy) as rt:  # as `glovebox approve` does
                rt.approve(asked["error"]["details"]["approval_id"], principal="admin")
            used = second.post("/v1/tools/sensitive/call", json={"input": {"q": 1}}).json()
            assert used["ok"] and used["output"] == {"q": 1}
            again = first.post("/v1/tools/sensitive/call", json={"input": {"q": 1}}).json()
            assert again["error"]["code"] == "approval_required"  # used once, by the other worker


def test_a_killed_worker_is_replaced_and_the_port_keeps_answering(home: tuple[Path, Path]) -> None:
    home_dir, policy = home
    with _server(home_dir, policy, "serve", "--workers", "2", "--processes", "1") as url:
        with _clients_per_worker(url, 2) as clients:
            victim, survivor = clients
            os.kill(victim, signal.SIGKILL)
            answer = clients[survivor].post("/v1/tools/echo/call", json={"input": {"n": 1}}).json()
            assert answer["output"] == {"n": 1}

        def replaced() -> bool:
            with _clients_per_worker(url, 2) as now:
                return victim not in now and survivor in now

        _until(replaced, "the killed worker's replacement to serve")


def test_mcp_over_http_with_two_workers_answers_calls(home: tuple[Path, Path]) -> None:
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    home_dir, policy = home
    answers: list[dict[str, Any]] = []

    async def main(url: str) -> None:
        for _ in range(4):  # stateless: each client's requests may land on either worker
            async with httpx2.AsyncClient(headers=AGENT, timeout=60) as http:
                transport = streamable_http_client(f"{url}/mcp", http_client=http)
                async with Client(transport, cache=None) as client:  # type: ignore[arg-type]
                    tools = {tool.name for tool in (await client.list_tools()).tools}
                    assert tools == {"echo", "sensitive"}
                    answers.append(envelope(await client.call_tool("echo", {"x": 1})))

    with _server(home_dir, policy, "mcp", "--transport", "http", "--workers", "2", "--processes", "1") as url:
        anyio.run(main, url)
    assert [a["output"] for a in answers] == [{"x": 1}] * 4


@pytest.mark.parametrize(
    "command",
    [
        ("serve", "--workers", "2", "--backend", "ray"),
        ("mcp", "--workers", "2"),
    ],
)
def test_workers_with_what_they_cannot_serve_is_a_usage_error(
    home: tuple[Path, Path], command: tuple[str, ...]
) -> None:
    from click.testing import CliRunner

    from glovebox.cli._main import cli

    home_dir, policy = home
    result = CliRunner().invoke(cli, ["--home", str(home_dir), "--policy", str(policy), *command])
    assert result.exit_code == 2, result.output
    assert "--workers" in result.output


def test_a_worker_app_serves_on_its_own_runtime_and_closes_it_after_its_lifespan(home: tuple[Path, Path]) -> None:
    from starlette.testclient import TestClient

    from glovebox.servers._prefork import Spec, worker_app

    home_dir, policy = home
    spec = Spec("http", str(home_dir), str(policy), {"max_running": 1}, ("local", {}), {"max_body_bytes": 4096})
    app = worker_app(spec)
    with TestClient(app) as client:  # type: ignore[arg-type]
        answer = client.post("/v1/tools/echo/call", json={"input": {"n": 2}}, headers=AGENT).json()
        assert answer["output"] == {"n": 2}
        assert client.get("/ui").status_code == 404  # the console is a one-process server's
        assert client.post("/v1/tools/echo/call", content=b"x" * 5000, headers=AGENT).status_code == 413
    with pytest.raises(ValueError, match="closed"):  # the worker's Runtime closed with the app
        app.backend.call("echo", {"n": 3}, principal="agent")  # type: ignore[attr-defined]
