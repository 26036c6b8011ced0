"""MCP code mode on a ProcessPool: ``glovebox mcp --code-mode --transport http --processes 2``
driven by the official TypeScript client, and an in-process pool-backed server driven by the
official Python client: ``execute``, ``search`` and ``resume``, the approved call running once."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import glovebox
from glovebox.servers._mcp import McpService, streamable_http_app

from ..scale.test_process_pool import _server
from ..servers.test_mcp_ts import NODE, envelope, run_client, value
from .conftest import HitCounter
from .test_backends import APPROVED
from .test_python_runs import APPROVED_PY
from .test_runs import THREE_STEPS

HIDDEN = (
    'export default async function (i, tools) { try { await tools.call("primes", {}); } catch (e) { return e.code; } }'
)


def keyed(run_home: tuple[Path, Path]) -> tuple[Path, Path]:
    """The run home, its policy giving agent the key agent-key and outsider outsider-key."""
    home, policy = run_home
    text = policy.read_text()
    for who in ("agent", "outsider"):
        sha = hashlib.sha256(f"{who}-key".encode()).hexdigest()
        text = text.replace(f"  {who}: {{scopes: [", f"  {who}: {{api_key_sha256: [{sha}], scopes: [", 1)
    policy.write_text(text)
    return home, policy


def approve(home: Path, policy: Path, run: dict[str, Any]) -> None:
    with glovebox.Runtime(home=home, policy=policy) as rt:
        rt.approve(run["error"]["details"]["approval_id"], principal="admin")


@pytest.mark.slow
@pytest.mark.skipif(NODE is None, reason="node is needed for the TypeScript MCP client")
def test_typescript_client_execute_search_and_resume_over_processes(
    run_home: tuple[Path, Path], upstream: HitCounter
) -> None:
    home, policy = keyed(run_home)
    with _server(home, policy, "mcp", "--code-mode", "--transport", "http", "--processes", "2") as base:
        transport = {"type": "http", "url": base + "/mcp", "headers": {"Authorization": "Bearer agent-key"}}
        steps = [
            {"op": "list"},
            {"op": "call", "name": "execute", "arguments": {"code": THREE_STEPS, "input": {"text": "a b\nc"}}},
            {"op": "call", "name": "search", "arguments": {"query": "arithmetic"}},
            {"op": "call", "name": "execute", "arguments": {"code": HIDDEN, "lang": "js"}},
            {"op": "call", "name": "execute", "arguments": {"code": APPROVED, "input": {"base": upstream.url("")}}},
        ]
        connect, listed, done, found, hidden, paused = run_client({"transport": transport, "steps": steps})
        tools = {tool["name"]: tool for tool in value(listed)}
        assert sorted(tools) == ["execute", "resume", "search"]
        assert "text_stats(input: { text: string" in tools["execute"]["description"]
        assert "primes" not in tools["execute"]["description"]
        run = value(done)["structuredContent"]
        assert run["status"] == "done" and run["output"] == {"words": 3, "lines": 2, "doubled": 6, "total": 8}
        assert [tool["name"] for tool in json.loads(value(found)["content"][0]["text"])["tools"]] == ["calc"]
        assert envelope(value(hidden))["output"] == "tool_not_found"
        waiting = envelope(value(paused))
        assert value(paused)["isError"] is True and waiting["status"] == "paused"
        assert upstream.hits == {"/first": 1}

        approve(home, policy, waiting)
        again = [{"op": "call", "name": "resume", "arguments": {"run_id": waiting["run_id"]}}]
        connect, resumed = run_client({"transport": transport, "steps": again})  # a new session resumes it
        assert envelope(value(resumed))["output"] == {"first": 1, "second": 1}
        assert upstream.hits == {"/first": 1, "/approved": 1}

        other = {**transport, "headers": {"Authorization": "Bearer outsider-key"}}
        connect, refused = run_client({"transport": other, "steps": again})
        assert value(refused)["isError"] is True and "no run" in envelope(value(refused))["error"]["message"]
    with glovebox.Runtime(home=home, policy=policy) as rt:
        assert rt.runs.show(waiting["run_id"]).status == "done"
        assert rt.audit.verify().ok


@pytest.mark.slow
@pytest.mark.skipif(NODE is None, reason="node is needed for the TypeScript MCP client")
def test_typescript_client_executes_a_python_program_and_resumes_it_over_processes(
    run_home: tuple[Path, Path], upstream: HitCounter
) -> None:
    home, policy = keyed(run_home)
    with _server(home, policy, "mcp", "--code-mode", "--transport", "http", "--processes", "2") as base:
        transport = {"type": "http", "url": base + "/mcp", "headers": {"Authorization": "Bearer agent-key"}}
        arguments = {"code": APPROVED_PY, "input": {"base": upstream.url("")}, "lang": "py"}
        steps = [{"op": "list"}, {"op": "call", "name": "execute", "arguments": arguments}]
        connect, listed, paused = run_client({"transport": transport, "steps": steps})
        tools = {tool["name"]: tool for tool in value(listed)}
        assert "async def text_stats(self, input: TextStatsInput, /)" in tools["execute"]["description"]
        assert "py" in tools["execute"]["inputSchema"]["properties"]["lang"]["enum"]
        waiting = envelope(value(paused))
        assert value(paused)["isError"] is True and waiting["status"] == "paused", waiting
        assert upstream.hits == {"/first": 1}
        approve(home, policy, waiting)
        again = [{"op": "call", "name": "resume", "arguments": {"run_id": waiting["run_id"]}}]
        connect, resumed = run_client({"transport": transport, "steps": again})
        done = envelope(value(resumed))
        assert done["status"] == "done" and done["output"] == {"first": 1, "second": 1}, done
        assert [call["replayed"] for call in done["calls"]] == [True, False]
        assert upstream.hits == {"/first": 1, "/approved": 1}
    with glovebox.Runtime(home=home, policy=policy) as rt:
        assert rt.runs.record(waiting["run_id"]).lang == "py"  # type: ignore[union-attr]
        assert rt.audit.verify().ok


@asynccontextmanager
async def http_client(url: str, key: str) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
        transport = streamable_http_client(url + "/mcp", http_client=http)
        async with Client(transport, cache=None) as client:  # type: ignore[arg-type]
            yield client


def text_envelope(result: Any) -> dict[str, Any]:
    [block] = result.content
    parsed: dict[str, Any] = json.loads(block.text)
    return parsed


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_python_client_against_a_pool_backed_server(
    run_home: tuple[Path, Path], upstream: HitCounter, serve_app: Callable[[object], str], anyio_backend: str
) -> None:
    home, policy = keyed(run_home)
    with glovebox.ProcessPool(2, home=home, policy=policy) as pool:
        url = serve_app(streamable_http_app(McpService(pool, mode="code")))
        async with http_client(url, "agent-key") as session:
            assert sorted(tool.name for tool in (await session.list_tools()).tools) == ["execute", "resume", "search"]
            done = await session.call_tool("execute", {"code": THREE_STEPS, "input": {"text": "x y z"}})
            assert not done.is_error and text_envelope(done)["output"]["doubled"] == 6
            hidden = await session.call_tool("execute", {"code": HIDDEN, "lang": "js"})
            assert text_envelope(hidden)["output"] == "tool_not_found"
            paused = await session.call_tool("execute", {"code": APPROVED, "input": {"base": upstream.url("")}})
            run = text_envelope(paused)
            assert paused.is_error and run["status"] == "paused"
            approve(home, policy, run)
            resumed = await session.call_tool("resume", {"run_id": run["run_id"]})
            assert not resumed.is_error and text_envelope(resumed)["output"] == {"first": 1, "second": 1}
        assert upstream.hits == {"/first": 1, "/approved": 1}
        for call in text_envelope(resumed)["calls"]:
            row = pool.audit.find(call["call_id"])
            assert row is not None and row["principal"] == "agent"
