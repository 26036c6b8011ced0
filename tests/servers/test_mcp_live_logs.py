"""A tool's log lines reach the MCP client while the call runs, on the native core as on the Python path.

The tool (``tests/guests/log_then_fetch.c``) logs a line, then fetches from a real server on
127.0.0.1 that answers only once the client heard that line (``heard``), or after 20 s
(``not heard``). The native core buffers a call's log lines unless someone listens to them:
``glovebox mcp`` listens, so each line is handed over as the guest logs it.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning

import glovebox

from .test_mcp import envelope, server_env, stdio_args

pytestmark = [pytest.mark.anyio, pytest.mark.system]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Upstream(ThreadingHTTPServer):
    heard: threading.Event


class _Handler(BaseHTTPRequestHandler):
    server: Upstream

    def do_GET(self) -> None:
        body = b"heard" if self.server.heard.wait(20) else b"not heard"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream(("127.0.0.1", 0), _Handler)
    server.heard = threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.heard.set()
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("native", ["1", "0"], ids=["native", "python"])
async def test_a_log_line_reaches_the_client_before_the_call_ends(
    tmp_path: Path, build_guest: Callable[[str], Path], upstream: Upstream, native: str
) -> None:
    from glovebox.sandbox._native import native_extension

    if native == "1" and native_extension() is None:
        pytest.skip("the native core (glovebox_native) is not built: `make native`")
    home, policy = tmp_path / "home", tmp_path / "policy.yaml"
    port = upstream.server_address[1]
    rule = {
        "host": "127.0.0.1",
        "schemes": ["http"],
        "ports": [port],
        "methods": ["GET"],
        "paths": ["/**"],
        "allow_private": True,
    }
    policy.write_text(
        "version: 1\nprincipals:\n  agent: {scopes: []}\ndefaults: {action: allow}\n"
        f"grants:\n  - tool: live\n    http: [{json.dumps(rule)}]\n"
    )
    with glovebox.Runtime(home=home, policy=policy) as rt:
        manifest = {
            "name": "live",
            "description": "Logs a line, then fetches a URL.",
            "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
            "capabilities": {"http": [rule]},
            "limits": {"timeout_ms": 30_000},
        }
        rt.register(build_guest("log_then_fetch"), manifest)
    heard: list[str] = []

    async def logged(params: types.LoggingMessageNotificationParams) -> None:
        heard.append(str(params.data))
        upstream.heard.set()

    env = {**server_env(), "GLOVEBOX_NATIVE": native}
    params = StdioServerParameters(
        command=sys.executable, args=stdio_args(home, policy, "--principal", "agent"), env=env
    )
    async with Client(params, mode="legacy", cache=None, read_timeout_seconds=60, logging_callback=logged) as session:
        with pytest.warns(MCPDeprecationWarning):  # by the 2026-07-28 protocol; this client speaks 2025-11-25
            await session.set_logging_level("info")
        done = await session.call_tool("live", {"url": f"http://127.0.0.1:{port}/answer"})
    assert done.is_error is False, done.content
    assert envelope(done)["output"] == {"body": "heard"}, envelope(done)
    assert heard == ["fetching the answer"]
