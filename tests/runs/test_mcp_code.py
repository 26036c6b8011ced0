"""``glovebox mcp --code-mode``: execute, search and resume, driven by the official Python MCP client over stdio."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

import glovebox

from .conftest import HitCounter

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def envelope(result: types.CallToolResult) -> dict[str, Any]:
    [block] = result.content
    assert isinstance(block, types.TextContent)
    value: dict[str, Any] = json.loads(block.text)
    return value


def client(home: Path, policy: Path, principal: str) -> Client:
    args = ["-m", "glovebox", "--home", str(home), "--policy", str(policy), "mcp", "--code-mode"]
    env = {key: os.environ[key] for key in ("PYTHONPATH", "GLOVEBOX_TOOLCHAINS") if key in os.environ}
    params = StdioServerParameters(command=sys.executable, args=[*args, "--principal", principal], env=env)
    return Client(params, cache=None, read_timeout_seconds=120)  # type: ignore[arg-type]


async def test_execute_search_and_resume_over_stdio(run_home: tuple[Path, Path], upstream: HitCounter) -> None:
    home, policy = run_home
    async with client(home, policy, "agent") as session:
        listed = await session.list_tools()
        tools = {tool.name: tool for tool in listed.tools}
        assert sorted(tools) == ["execute", "resume", "search"]
        description = tools["execute"].description or ""
        assert "text_stats(input: { text: string" in description and "primes" not in description
        done = await session.call_tool(
            "execute",
            {
                "code": "export default async function (i: {t: string}, tools: any) {"
                " return (await tools.text_stats({ text: i.t })).words; }",
                "input": {"t": "a b c d"},
            },
        )
        assert not done.is_error and envelope(done)["output"] == 4
        found = await session.call_tool("search", {"query": "arithmetic"})
        assert [tool["name"] for tool in json.loads(found.content[0].text)["tools"]] == ["calc"]  # type: ignore[union-attr]
        program = 'export default async function (i, tools) { return (await tools.call("hc-approve", i)).status; }'
        paused = await session.call_tool("execute", {"code": program, "input": {"url": upstream.url("/p")}})
        run = envelope(paused)
        assert paused.is_error and run["status"] == "paused"
        with glovebox.Runtime(home=home, policy=policy) as rt:
            rt.approve(run["error"]["details"]["approval_id"], principal="admin")
        resumed = await session.call_tool("resume", {"run_id": run["run_id"]})
        assert not resumed.is_error and envelope(resumed)["output"] == "ok"
        assert upstream.hits == {"/p": 1}
        broken = await session.call_tool("execute", {"code": "export default async function ( {"})
        assert broken.is_error and envelope(broken)["error"]["code"] == "build_failed"
    async with client(home, policy, "outsider") as other:
        refused = await other.call_tool("resume", {"run_id": run["run_id"]})
        assert refused.is_error and "no run" in envelope(refused)["error"]["message"]


#: 300 nested calls (more than one replay chunk of 256 steps), then one that waits for approval.
LONG_THEN_PAUSE = """export default async function (i, tools) {
  let total = 0;
  for (let k = 0; k < 300; k++) total += (await tools.calc({ expression: `${k} + 1` })).value;
  const fetched = await tools.call("hc-approve", { url: i.url });
  return [total, fetched.status];
}"""


async def test_resume_over_mcp_replays_past_a_chunk_and_runs_no_step_twice(
    run_home: tuple[Path, Path], upstream: HitCounter
) -> None:
    """The MCP ``resume`` tool takes the runner's chunked replay: 300 recorded calls come back from the
    journal (more than one chunk), none runs again, and the approved call runs once."""
    home, policy = run_home
    async with client(home, policy, "agent") as session:
        paused = await session.call_tool("execute", {"code": LONG_THEN_PAUSE, "input": {"url": upstream.url("/q")}})
        run = envelope(paused)
        assert paused.is_error and run["status"] == "paused", run
        with glovebox.Runtime(home=home, policy=policy) as rt:
            rt.approve(run["error"]["details"]["approval_id"], principal="admin")
        resumed = await session.call_tool("resume", {"run_id": run["run_id"]})
        done = envelope(resumed)
        assert not resumed.is_error and done["output"] == [sum(range(1, 301)), "ok"], done
        meta = done["meta"]
        assert (meta["replayed"], meta["steps"], meta["attempts"]) == (300, 301, 2), meta  # the approved call live
    assert upstream.hits == {"/q": 1}
    with glovebox.Runtime(home=home, policy=policy) as rt:
        tools = [row["tool"].partition("@")[0] for row in rt.audit.records()]  # (rows name tool@version)
    assert tools.count("calc") == 300, "a replayed step ran its tool again"


#: 300 nested calls (more than one replay chunk), then one that waits for approval: in Python.
LONG_THEN_PAUSE_PY = """
async def main(i, tools):
    total = 0
    for k in range(300):
        total += (await tools.calc(expression=f"{k} + 1"))["value"]
    fetched = await tools.call("hc-approve", {"url": i["url"]})
    return [total, fetched["status"]]
"""


async def test_a_python_program_over_mcp_pauses_and_resumes_replaying_past_a_chunk(
    run_home: tuple[Path, Path], upstream: HitCounter
) -> None:
    home, policy = run_home
    async with client(home, policy, "agent") as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        description = listed["execute"].description or ""
        assert "async def text_stats(self, input: TextStatsInput, /)" in description and "primes" not in description
        arguments = {"code": LONG_THEN_PAUSE_PY, "input": {"url": upstream.url("/q")}, "lang": "py"}
        run = envelope(paused := await session.call_tool("execute", arguments))
        assert paused.is_error and run["status"] == "paused", run
        with glovebox.Runtime(home=home, policy=policy) as rt:
            rt.approve(run["error"]["details"]["approval_id"], principal="admin")
        resumed = await session.call_tool("resume", {"run_id": run["run_id"]})
        done = envelope(resumed)
        assert not resumed.is_error and done["output"] == [sum(range(1, 301)), "ok"], done
        assert (done["meta"]["replayed"], done["meta"]["steps"]) == (300, 301), done["meta"]
        broken = await session.call_tool("execute", {"code": "async def main(:", "lang": "py"})
        assert broken.is_error and envelope(broken)["error"]["code"] == "build_failed"
    assert upstream.hits == {"/q": 1}
    with glovebox.Runtime(home=home, policy=policy) as rt:
        tools = [row["tool"].partition("@")[0] for row in rt.audit.records()]
    assert tools.count("calc") == 300, "a replayed step ran its tool again"
