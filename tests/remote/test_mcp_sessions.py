"""Sessions and progress of remote (streamable HTTP) MCP servers.

One server is built here on the official SDK (``MCPServer``; its tools read the
``Mcp-Session-Id`` each request carries); the other is the published
``@modelcontextprotocol/server-everything`` (npm, pinned in tests/mcp_servers),
started with node for the test.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import Context, MCPServer

import glovebox
from glovebox.importers import import_mcp
from glovebox.policy import parse_policy
from glovebox.remote import relay_progress

pytestmark = [pytest.mark.system, pytest.mark.slow]

EVERYTHING = Path(__file__).parents[1] / "mcp_servers" / "node_modules" / "@modelcontextprotocol" / "server-everything"

POLICY = """
version: 1
principals:
  agent: {scopes: ["s:call", "everything:call"]}
  other: {scopes: ["s:call", "everything:call"]}
rules:
  - {tool: "*", action: allow}
"""
CEILING = POLICY + "limits:\n  - {tool: 'everything-*', limits: {max_timeout_ms: 10000}}\n"


class Stateful:
    """A server that counts the calls of each session and tells a call its session id."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.server = MCPServer("s")
        self.server.add_tool(self.session)
        self.server.add_tool(self.count)

    def session(self, ctx: Context) -> str:
        """The Mcp-Session-Id of this call."""
        return (ctx.headers or {}).get("mcp-session-id", "")

    def count(self, ctx: Context) -> int:
        """How many times this session called count."""
        key = (ctx.headers or {}).get("mcp-session-id", "")
        self.counts[key] += 1
        return self.counts[key]


def handshake_only(app: Any, forgotten: set[str]) -> Any:
    """``app`` answering ``server/discover`` with "Method not found", as a server of the handshake era
    (2025-11-25 and before, the one with sessions) does, so the client initializes a session; and
    answering 404 to a request of a session in ``forgotten``, as a restarted server does."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        session = dict(scope.get("headers") or []).get(b"mcp-session-id", b"").decode()
        if scope["type"] == "http" and session in forgotten:
            return await _respond(
                send, 404, {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}
            )
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        request = json.loads(body or b"{}")
        if isinstance(request, dict) and request.get("method") == "server/discover":
            error = {
                "jsonrpc": "2.0",
                "id": request.get("id"),
                "error": {"code": -32601, "message": "Method not found"},
            }
            return await _respond(send, 200, error)
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await app(scope, replay, send)

    return wrapped


FORGOTTEN: set[str] = set()


@pytest.fixture
def stateful(runtime: glovebox.Runtime, serve_app: Callable[[object], str]) -> Iterator[glovebox.Runtime]:
    remote = Stateful()
    app = remote.server.streamable_http_app()
    FORGOTTEN.clear()
    url = serve_app(_with_lifespan(app, handshake_only(app, FORGOTTEN))) + "/mcp"
    import_mcp(runtime, url, name="s", timeout_ms=5000)
    with glovebox.Runtime(home=runtime.home, policy=parse_policy(POLICY)) as rt:
        yield rt


def test_one_session_per_principal_reused_across_calls(stateful: glovebox.Runtime) -> None:
    first = stateful.call("s-session", {}, principal="agent")
    assert first.ok and first.output["result"], first.error
    assert [stateful.call("s-count", {}, principal="agent").output for _ in range(3)] == [
        {"result": 1},
        {"result": 2},
        {"result": 3},
    ]
    assert stateful.call("s-session", {}, principal="agent").output == first.output
    other = stateful.call("s-session", {}, principal="other")
    assert other.ok and other.output != first.output  # never the agent's session
    assert stateful.call("s-count", {}, principal="other").output == {"result": 1}


def test_a_session_the_server_expired_is_opened_again_and_the_call_goes_through(stateful: glovebox.Runtime) -> None:
    first = stateful.call("s-session", {}, principal="agent").output
    assert first is not None and first["result"]
    FORGOTTEN.add(first["result"])  # the server restarts: it knows the session no more (404)
    again = stateful.call("s-count", {}, principal="agent")
    assert again.ok and again.output == {"result": 1}, again.error  # sent once more, on a new session
    assert stateful.call("s-session", {}, principal="agent").output != first


async def _respond(send: Any, status: int, document: Any) -> None:
    payload = json.dumps(document).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def _with_lifespan(app: Any, wrapped: Any) -> Any:
    """``wrapped`` for HTTP, ``app`` itself for the lifespan events (where the SDK starts its sessions)."""

    async def both(scope: Any, receive: Any, send: Any) -> None:
        await (app if scope["type"] == "lifespan" else wrapped)(scope, receive, send)

    return both


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def everything() -> Iterator[str]:
    node = shutil.which("node")
    if node is None or not (EVERYTHING / "dist" / "index.js").exists():
        pytest.skip("node or the pinned @modelcontextprotocol/server-everything (make test installs it) is missing")
    port = _free_port()
    env = {"PATH": os.environ.get("PATH", ""), "PORT": str(port)}
    process = subprocess.Popen(
        [node, str(EVERYTHING / "dist" / "index.js"), "streamableHttp"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, "server-everything did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_server_everythings_long_operation_completes_with_progress_under_a_2_s_timeout(
    runtime: glovebox.Runtime, everything: str
) -> None:
    import_mcp(runtime, everything, name="everything", timeout_ms=2000)
    operation = {"duration": 3, "steps": 6}
    with glovebox.Runtime(home=runtime.home, policy=parse_policy(POLICY)) as rt:
        held = rt.call("everything-trigger-long-running-operation", operation, principal="agent")
        assert held.code == "timeout"  # without a ceiling, progress extends nothing
    with glovebox.Runtime(home=runtime.home, policy=parse_policy(CEILING)) as rt:
        heard: list[tuple[float, float | None]] = []
        with relay_progress(lambda progress, total, message: heard.append((progress, total))):
            done = rt.call("everything-trigger-long-running-operation", operation, principal="agent")
        assert done.ok, done.error
        assert "Long running operation completed" in str(done.output)
        assert done.meta["duration_ms"] > 2900
        assert heard == [(step, 6) for step in range(1, 7)]


def test_progress_reaches_the_calls_span(runtime: glovebox.Runtime, everything: str) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    import_mcp(runtime, everything, name="everything", timeout_ms=2000)
    with glovebox.Runtime(home=runtime.home, policy=parse_policy(CEILING), tracer_provider=provider) as rt:
        done = rt.call("everything-trigger-long-running-operation", {"duration": 0.6, "steps": 3}, principal="agent")
        assert done.ok, done.error
    (call,) = [span for span in exporter.get_finished_spans() if span.name == "glovebox.call"]
    events = [
        event for span in exporter.get_finished_spans() for event in span.events if event.name == "glovebox.progress"
    ]
    assert [(e.attributes["glovebox.progress"], e.attributes["glovebox.progress.total"]) for e in events] == [
        (1.0, 3.0),
        (2.0, 3.0),
        (3.0, 3.0),
    ]
    assert call.attributes is not None and call.attributes["glovebox.outcome"] == "ok"
