"""A tool asks the MCP client of its call (the ``client`` capability) through ``glovebox mcp``.

The tools are C guests (``tests/guests/mcp_sampling.c``, ``mcp_elicitation.c``,
``mcp_log_then_ask.c``); the client is the SDK's ``Client`` over stdio, speaking the
handshake-era protocol (a 2026-07-28 client is answered ``unsupported``: it takes
requests only between retries of a call).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning

import glovebox

from .test_mcp import envelope, server_env, stdio_args

pytestmark = [pytest.mark.anyio, pytest.mark.system]

POLICY = """
version: 1
principals:
  agent: {scopes: []}
defaults: {action: allow}
grants:
  - tool: ask
    principals: [agent]
    client: [{request: sampling, max_tokens: 100}]
  - tool: live
    principals: [agent]
    client: [{request: sampling, max_requests: 1}]
  - tool: form
    principals: [agent]
    client: [{request: elicitation}]
"""
TEXT_BLOCKS = {"type": "object", "x-glovebox-content": True}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def home(tmp_path: Path, build_guest: Callable[[str], Path]) -> tuple[Path, Path]:
    home, policy = tmp_path / "home", tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    prompt = {"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}
    message = {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}
    with glovebox.Runtime(home=home, policy=policy) as rt:
        for name, guest, schema, request in [
            ("ask", "mcp_sampling", prompt, "sampling"),
            ("ungranted", "mcp_sampling", prompt, "sampling"),
            ("live", "mcp_log_then_ask", {"type": "object"}, "sampling"),
            ("form", "mcp_elicitation", message, "elicitation"),
        ]:
            manifest = {
                "name": name,
                "description": f"{name}: asks the client.",
                "input_schema": schema,
                "output_schema": TEXT_BLOCKS if name != "live" else True,
                "capabilities": {"client": [{"request": request}]},
                "limits": {"timeout_ms": 10_000},
            }
            rt.register(build_guest(guest), manifest)
    return home, policy


class Model:
    """The client's model: answers every sampling request, and keeps what it was asked and what the
    client had heard of the call by then (its log lines and progress)."""

    def __init__(self, heard: list[str] | None = None) -> None:
        self.asked: list[types.CreateMessageRequestParams] = []
        self.heard = heard if heard is not None else []
        self.heard_when_asked: list[str] = []

    async def __call__(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.asked.append(params)
        self.heard_when_asked = list(self.heard)
        text = types.TextContent(text="a test answer")
        return types.CreateMessageResult(role="assistant", content=text, model="test-model", stop_reason="endTurn")


@asynccontextmanager
async def client(home: tuple[Path, Path], **callbacks: Any) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable, args=stdio_args(*home, "--principal", "agent"), env=server_env()
    )
    async with Client(params, mode="legacy", cache=None, read_timeout_seconds=60, **callbacks) as session:
        yield session


def last_egress(home: Path) -> dict[str, Any]:
    with glovebox.Runtime(home=home) as rt:
        *_, record = rt.audit.records()
    egress: dict[str, Any] = json.loads(record["egress"])
    return egress


async def test_a_tool_asks_the_clients_model_through_the_host(home: tuple[Path, Path]) -> None:
    model = Model()
    async with client(home, sampling_callback=model) as session:
        done = await session.call_tool("ask", {"prompt": "Say hi"})
    assert done.is_error is False
    assert isinstance(done.content[0], types.TextContent) and done.content[0].text == "LLM response: a test answer"
    [asked] = model.asked
    assert asked.max_tokens == 100
    assert asked.messages[0].content == types.TextContent(text="Say hi")
    [entry] = last_egress(home[0])["client"]  # audited: sizes, the result and the model, never the messages
    assert entry["request"] == "sampling" and entry["result"] == "ok" and entry["model"] == "test-model"
    assert "Say hi" not in json.dumps(entry)


async def test_a_tool_asks_the_clients_user_through_the_host(home: tuple[Path, Path]) -> None:
    forms: list[types.ElicitRequestFormParams] = []

    async def user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        forms.append(params)
        return types.ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})

    async with client(home, elicitation_callback=user) as session:
        done = await session.call_tool("form", {"message": "Who are you?"})
    assert done.is_error is False
    [form] = forms
    assert form.message == "Who are you?" and form.requested_schema["required"] == ["username", "email"]
    text = done.content[0]
    assert isinstance(text, types.TextContent) and text.text.startswith("User response: ")
    assert json.loads(text.text.removeprefix("User response: "))["content"]["username"] == "ada"
    assert last_egress(home[0])["client"][0]["action"] == "accept"


async def test_a_client_without_the_capability_is_a_structured_error(home: tuple[Path, Path]) -> None:
    async with client(home) as session:  # no sampling callback: the client declares no sampling
        refused = envelope(await session.call_tool("ask", {"prompt": "Say hi"}))
    assert refused["error"]["code"] == "guest_error"
    assert (
        "sampling: unsupported: the MCP client did not declare the sampling capability" in refused["error"]["message"]
    )


async def test_off_by_default_a_tool_not_granted_is_denied(home: tuple[Path, Path]) -> None:
    model = Model()
    async with client(home, sampling_callback=model) as session:
        refused = envelope(await session.call_tool("ungranted", {"prompt": "Say hi"}))
    assert refused["error"]["code"] == "capability_denied" and model.asked == []
    assert "the client capability is not granted to this call" in refused["error"]["message"]
    assert refused["meta"]["denials"][0]["capability"] == "client"


async def test_log_lines_and_progress_reach_the_client_while_the_call_runs(home: tuple[Path, Path]) -> None:
    heard: list[str] = []

    async def logged(params: types.LoggingMessageNotificationParams) -> None:
        heard.append(f"log {params.data}")

    async def progressed(progress: float, total: float | None, message: str | None) -> None:
        heard.append(f"progress {progress:g}/{total:g}")

    model = Model(heard)
    async with client(home, sampling_callback=model, logging_callback=logged) as session:
        with pytest.warns(MCPDeprecationWarning):  # by the 2026-07-28 protocol; this client speaks 2025-11-25
            await session.set_logging_level("info")
        done = await session.call_tool("live", {}, progress_callback=progressed)
    assert done.is_error is False, envelope(done)
    # heard before the tool asked the model, so while the call ran; then the rest, each line once
    assert model.heard_when_asked == ["log about to ask the client", "progress 1/2"]
    assert heard == ["log about to ask the client", "progress 1/2", "progress 2/2"]


async def test_an_imported_servers_progress_reaches_the_client_as_it_arrives(tmp_path: Path) -> None:
    """An imported stdio server's progress is relayed while the call runs (glovebox.remote.relay_progress)."""
    from glovebox.importers import import_mcp

    lab = Path(__file__).parents[1] / "remote" / "servers" / "stdio_lab.py"
    home, policy = tmp_path / "home", tmp_path / "policy.yaml"
    policy.write_text("version: 1\nprincipals:\n  agent: {scopes: []}\ndefaults: {action: allow}\n")
    with glovebox.Runtime(home=home, policy=policy) as rt:
        import_mcp(rt, command=[sys.executable, str(lab)], name="lab", scopes=[], sandbox="none", timeout_ms=20_000)
    heard: list[tuple[float, float]] = []
    result: list[types.CallToolResult] = []

    async def progressed(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, time.monotonic()))

    async with client((home, policy)) as session:
        started = time.monotonic()
        result.append(await session.call_tool("lab-work", {"seconds": 1.0}, progress_callback=progressed))
        ended = time.monotonic()
    assert result[0].is_error is False, envelope(result[0])
    assert [progress for progress, _ in heard] == [1, 2, 3, 4]
    assert heard[0][1] < ended - 0.4 and heard[0][1] > started  # the first came long before the result
