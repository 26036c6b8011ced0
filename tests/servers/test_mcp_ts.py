"""The MCP server with the official TypeScript SDK's client, over stdio and streamable HTTP.

``tests/mcp_ts/client.mjs`` runs a plan of steps with ``@modelcontextprotocol/sdk``
(the version pinned in ``tests/mcp_ts/package.json``; ``make test`` installs it
with ``npm ci``) and prints what it saw, one JSON line per step. Without node
the tests skip; with node but without the installed SDK they fail and say how
to install it.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.servers._mcp import McpService, streamable_http_app

MCP_TS = Path(__file__).parents[1] / "mcp_ts"
NODE = shutil.which("node")
SDK = MCP_TS / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
#: Longer than any step of client.mjs (60 s), so the client reports its own timeouts.
LINE_TIMEOUT_S = 120

pytestmark = pytest.mark.skipif(
    NODE is None or shutil.which("npm") is None,
    reason="node and npm are needed for the TypeScript MCP client tests (make test installs the client with npm ci)",
)

FULL_STEPS: list[dict[str, Any]] = [
    {"op": "list"},
    {"op": "call", "name": "calc", "arguments": {"expression": "2 * (3 + 4)"}},
    {"op": "call", "name": "calc", "arguments": {"expression": "2 +"}},
    {"op": "call", "name": "stress", "arguments": {"mode": "spin"}},
    {"op": "call", "name": "sensitive", "arguments": {"q": 1}},
    {"op": "call", "name": "tags", "arguments": {"input": ["a", "b"]}},
    {"op": "call", "name": "nope", "arguments": {}},
    {"op": "await_change"},
    {"op": "list"},
]
SEARCH_STEPS: list[dict[str, Any]] = [
    {"op": "list"},
    {"op": "call", "name": "search_tools", "arguments": {"query": "tags"}},
    {"op": "call", "name": "call_tool", "arguments": {"name": "tags", "input": {"input": ["x"]}}},
    {"op": "call", "name": "call_tool", "arguments": {"name": "calc", "input": {"expression": "2 +"}}},
    {"op": "call", "name": "call_tool", "arguments": {"name": "sensitive", "input": {}}},
]


def sdk_version() -> str:
    """The installed @modelcontextprotocol/sdk version (the tests fail, saying how to install it, without it)."""
    if not SDK.exists():
        pytest.fail(f"the TypeScript MCP SDK is not installed: run `npm ci --prefix {MCP_TS}` (make test does)")
    version: str = json.loads(SDK.read_text())["version"]
    return version


def server_env() -> dict[str, str]:
    """What the client adds to its default environment: only the import path of the package under test."""
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}


def stdio(home: Path, policy: Path | None, *args: str) -> dict[str, Any]:
    """A stdio transport configured as the README says: --home and --policy in args."""
    where = ["--home", str(home)] + (["--policy", str(policy)] if policy is not None else [])
    return {
        "type": "stdio",
        "command": sys.executable,
        "args": ["-m", "glovebox", *where, "mcp", "--poll-seconds", "0.1", *args],
        "env": server_env(),
    }


def run_client(plan: dict[str, Any], on_ready: Callable[[], object] | None = None) -> list[dict[str, Any]]:
    """Run client.mjs on ``plan``; its lines, in order (``on_ready`` runs when it waits for a change)."""
    sdk_version()
    assert NODE is not None
    lines: queue.Queue[str | None] = queue.Queue()
    with subprocess.Popen(
        [NODE, str(MCP_TS / "client.mjs"), json.dumps(plan)], cwd=MCP_TS, stdout=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None
        stdout = process.stdout
        threading.Thread(target=lambda: [*map(lines.put, stdout), lines.put(None)], daemon=True).start()
        seen = []
        try:
            while (line := lines.get(timeout=LINE_TIMEOUT_S)) is not None:
                answer = json.loads(line)
                if answer.get("ready"):
                    assert on_ready is not None, "the plan waits for a change nobody makes"
                    on_ready()
                    continue
                seen.append(answer)
        finally:
            process.kill()
    return seen


def value(answer: dict[str, Any]) -> Any:
    assert answer["ok"] is True, answer
    return answer["value"]


def envelope(result: dict[str, Any]) -> dict[str, Any]:
    [block] = result["content"]
    parsed: dict[str, Any] = json.loads(block["text"])
    return parsed


def register_primes(home: Path, policy: Path, build_example: Callable[[str], Path]) -> Callable[[], object]:
    def change() -> object:
        with glovebox.Runtime(home=home, policy=policy) as rt:
            return rt.register(build_example("primes"))

    return change


def check_full(answers: list[dict[str, Any]]) -> None:
    """What a TypeScript agent sees in full mode, whatever the transport."""
    connect, listed, ok, failed, denied, pending, tags, unknown, changed, relisted = answers
    assert value(connect)["server"]["name"] == "glovebox"
    tools = {tool["name"]: tool for tool in value(listed)}
    assert sorted(tools) == ["calc", "sensitive", "tags", "text-stats"]
    assert tools["tags"]["inputSchema"]["properties"]["input"] == {"type": "array", "items": {"type": "string"}}

    assert value(ok)["structuredContent"] == {"value": 14} and not value(ok).get("isError")
    # A failed call of a tool with an outputSchema: the SDK does not throw, and the envelope arrives.
    assert value(failed)["isError"] is True and "structuredContent" not in value(failed)
    assert envelope(value(failed))["error"]["code"] == "guest_error"
    assert envelope(value(denied))["error"]["code"] == "permission_denied"
    approval = envelope(value(pending))["error"]
    assert approval["code"] == "approval_required" and approval["details"]["approval_id"]
    assert value(tags)["structuredContent"] == {"output": ["a", "b"]}
    missing = envelope(value(unknown))["error"]
    assert missing["code"] == "tool_not_found" and "stress" not in missing["message"]

    assert value(changed) is True
    assert "primes" in {tool["name"] for tool in value(relisted)}


def check_search(answers: list[dict[str, Any]]) -> None:
    """What a TypeScript agent sees in search mode."""
    connect, listed, found, tags, failed, pending = answers
    assert [tool["name"] for tool in value(listed)] == ["search_tools", "call_tool"]
    [shown] = value(found)["structuredContent"]["tools"]
    assert shown["name"] == "tags" and shown["input_schema"]["required"] == ["input"]
    assert value(tags)["structuredContent"] == {"output": ["x"]}
    assert value(failed)["isError"] is True and envelope(value(failed))["error"]["code"] == "guest_error"
    assert envelope(value(pending))["error"]["details"]["approval_id"]


@contextmanager
def http_server(home: Path, policy: Path, serve_app: Callable[[object], str]) -> Iterator[str]:
    with glovebox.Runtime(home=home, policy=policy) as rt:
        yield serve_app(streamable_http_app(McpService(rt, poll_s=0.1))) + "/mcp"


def test_stdio_full(mcp_home: tuple[Path, Path], build_example: Callable[[str], Path]) -> None:
    home, policy = mcp_home
    build_example("primes")  # built before the server watches
    plan = {"transport": stdio(home, policy, "--principal", "agent"), "steps": FULL_STEPS}
    check_full(run_client(plan, register_primes(home, policy, build_example)))


def test_streamable_http_full(
    mcp_home: tuple[Path, Path], build_example: Callable[[str], Path], serve_app: Callable[[object], str]
) -> None:
    home, policy = mcp_home
    build_example("primes")
    with http_server(home, policy, serve_app) as url:
        transport = {"type": "http", "url": url, "headers": {"Authorization": "Bearer agent-key"}}
        check_full(
            run_client({"transport": transport, "steps": FULL_STEPS}, register_primes(home, policy, build_example))
        )


def test_stdio_search(mcp_home: tuple[Path, Path]) -> None:
    home, policy = mcp_home
    plan = {"transport": stdio(home, policy, "--principal", "agent", "--mode", "search"), "steps": SEARCH_STEPS}
    check_search(run_client(plan))


def test_streamable_http_search(mcp_home: tuple[Path, Path], serve_app: Callable[[object], str]) -> None:
    home, policy = mcp_home
    with glovebox.Runtime(home=home, policy=policy) as rt:
        url = serve_app(streamable_http_app(McpService(rt, mode="search"))) + "/mcp"
        transport = {"type": "http", "url": url, "headers": {"X-API-Key": "agent-key"}}
        check_search(run_client({"transport": transport, "steps": SEARCH_STEPS}))


def test_a_policy_only_in_the_environment_does_not_reach_a_spawned_server(
    mcp_home: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, policy = mcp_home
    monkeypatch.setenv("GLOVEBOX_POLICY", str(policy))  # set in the shell: the client does not pass it on
    monkeypatch.setenv("GLOVEBOX_HOME", str(home))
    plan = {"transport": stdio(home, None, "--principal", "agent"), "steps": [{"op": "list"}]}
    [connect] = run_client(plan)
    assert connect["ok"] is False, "a server without its policy must refuse to start, not serve without it"


def test_a_client_without_a_key_is_told_to_send_one(
    mcp_home: tuple[Path, Path], serve_app: Callable[[object], str]
) -> None:
    home, policy = mcp_home
    with http_server(home, policy, serve_app) as url:
        [plain] = run_client({"transport": {"type": "http", "url": url}, "steps": []})
        assert plain["ok"] is False and plain["error"]["code"] == 401
        assert "Authorization: Bearer KEY" in plain["error"]["message"]
        # An interactive client (the Inspector) carries an OAuth provider: it must not be sent to sign in.
        [oauth] = run_client({"transport": {"type": "http", "url": url, "oauth": True}, "steps": []})
        assert oauth["ok"] is False
        assert not [event for event in oauth["oauth"] if event.startswith("redirectToAuthorization")]
        discovery = [r for r in oauth["requests"] if r["path"].startswith("/.well-known/")]
        assert discovery and {r["status"] for r in discovery} == {404}, oauth["requests"]
        assert "X-API-Key: KEY" in oauth["error"]["message"]


@pytest.mark.system  # needs the TypeScript SDK make test installs
def test_the_suite_runs_the_pinned_sdk() -> None:
    pinned = json.loads((MCP_TS / "package.json").read_text())["dependencies"]["@modelcontextprotocol/sdk"]
    assert sdk_version() == pinned


# -- back-pressure: a refused call is a tool result the agent reads, never a thrown error ----------

#: agent may start one calc call a minute.
CALC_QUOTA = """
quotas:
  - tool: calc
    principals: [agent]
    calls_per_minute: 1
"""


def check_refused(result: dict[str, Any], code: str) -> None:
    """A call the host refused: an error result (not a throw) carrying the envelope's code and retry hint."""
    assert result["isError"] is True and "structuredContent" not in result, result
    error = envelope(result)["error"]
    assert error["code"] == code and error["retryable"] is True, error
    assert isinstance(error["details"]["retry_after_ms"], int) and error["details"]["retry_after_ms"] > 0


def test_stdio_a_rate_limited_call_is_an_error_result(mcp_home: tuple[Path, Path]) -> None:
    home, policy = mcp_home
    policy.write_text(policy.read_text() + CALC_QUOTA)
    steps = [
        {"op": "call", "name": "calc", "arguments": {"expression": "1 + 1"}},
        {"op": "call", "name": "calc", "arguments": {"expression": "2 + 2"}},
        {"op": "list"},
    ]
    connect, ok, limited, listed = run_client(
        {"transport": stdio(home, policy, "--principal", "agent"), "steps": steps}
    )
    assert value(ok)["structuredContent"] == {"value": 2}
    check_refused(value(limited), "rate_limited")
    assert "calc" in {tool["name"] for tool in value(listed)}  # the session goes on


def test_streamable_http_an_overloaded_call_is_an_error_result(
    mcp_home: tuple[Path, Path], serve_app: Callable[[object], str]
) -> None:
    home, policy = mcp_home
    steps = [{"op": "call", "name": "calc", "arguments": {"expression": "1 + 1"}}]
    with glovebox.Runtime(home=home, policy=policy, max_in_flight=1, max_queued=0) as rt:
        url = serve_app(streamable_http_app(McpService(rt, poll_s=0.1))) + "/mcp"
        plan = {
            "transport": {"type": "http", "url": url, "headers": {"Authorization": "Bearer agent-key"}},
            "steps": steps,
        }
        rt._admission.enter()  # a call elsewhere holds the only slot, and none may wait
        try:
            connect, overloaded = run_client(plan)
        finally:
            rt._admission.leave(0.5)
        check_refused(value(overloaded), "overloaded")
        connect, again = run_client(plan)  # the slot is free again
        assert value(again)["structuredContent"] == {"value": 2}
