"""What ``glovebox mcp`` says over MCP besides outputs: content blocks, log lines, progress, resumable SSE.

Over a real uvicorn with raw HTTP (the SSE frames themselves), and through the SDK's client.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning

import glovebox
from glovebox.model._result import CallResult
from glovebox.servers._mcp import McpService, streamable_http_app, tool_result
from glovebox.servers._mcpevents import BoundedEventStore

PROTOCOL = "2025-11-25"
POLICY = "version: 1\ndefaults:\n  action: allow\n"
CONTENT = {"type": "object", "x-glovebox-content": True}


@pytest.fixture
def served(
    tmp_path: Path, build_guest: Callable[[str], Path], serve_app: Callable[[object], str]
) -> Iterator[tuple[glovebox.Runtime, str]]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    with glovebox.Runtime(home=tmp_path / "home", policy=policy) as rt:
        for name, guest in (("logging", "mcp_logging"), ("progress", "mcp_progress"), ("image", "mcp_image")):
            rt.register(
                build_guest(guest), {"name": name, "input_schema": {"type": "object"}, "output_schema": CONTENT}
            )
        rt.register(build_guest("mcp_image"), {"name": "plain", "input_schema": {"type": "object"}})
        yield rt, serve_app(streamable_http_app(McpService(rt, insecure_anonymous=True)))


def events(response: httpx.Response) -> list[dict[str, str]]:
    """The SSE events of a response: each its fields (id, data, retry, event)."""
    found: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in response.iter_lines():
        if line == "":
            if current:
                found.append(current)
            current = {}
            continue
        field, _, value = line.partition(":")
        current[field] = current.get(field, "") + value.removeprefix(" ")
    if current:
        found.append(current)
    return found


def post(http: httpx.Client, url: str, session: str | None, message: dict[str, Any]) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": PROTOCOL}
    if session is not None:
        headers["Mcp-Session-Id"] = session
    return http.post(url, json={"jsonrpc": "2.0", **message}, headers=headers)


def test_every_sse_stream_is_primed_and_resumable(served: tuple[glovebox.Runtime, str]) -> None:
    _, base = served
    url = base + "/mcp"
    with httpx.Client(timeout=30) as http:
        hello = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        opened = post(http, url, None, {"id": 1, "method": "initialize", "params": hello})
        session = opened.headers["mcp-session-id"]
        post(http, url, session, {"method": "notifications/initialized"})
        post(http, url, session, {"id": 2, "method": "logging/setLevel", "params": {"level": "info"}})
        call = {"name": "logging", "arguments": {}, "_meta": {"progressToken": "p1"}}
        stream = events(post(http, url, session, {"id": 3, "method": "tools/call", "params": call}))
        priming, *rest = stream
        assert priming["id"] and priming.get("data", "") == "" and priming["retry"] == "1000"
        messages = [json.loads(event["data"]) for event in rest]
        logged = [m["params"]["data"] for m in messages if m.get("method") == "notifications/message"]
        assert logged == ["Tool execution started", "Tool processing data", "Tool execution completed"]
        assert messages[-1]["id"] == 3 and messages[-1]["result"]["content"][0]["type"] == "text"
        # A client whose stream broke resumes after the priming event: it is sent what followed.
        headers = {"Mcp-Session-Id": session, "Last-Event-ID": priming["id"], "MCP-Protocol-Version": PROTOCOL}
        with http.stream("GET", url, headers={**headers, "Accept": "text/event-stream"}) as replay:
            replayed: list[dict[str, Any]] = []
            for event in _until_response(replay, 3):
                replayed.append(event)
        assert [m.get("id") for m in replayed][-1] == 3
        assert [m["params"]["data"] for m in replayed if m.get("method") == "notifications/message"] == logged


def _until_response(response: httpx.Response, request_id: int) -> Iterator[dict[str, Any]]:
    data = ""
    for line in response.iter_lines():
        if line.startswith("data:"):
            data += line.removeprefix("data:").strip()
        elif line == "" and data:
            message = json.loads(data)
            data = ""
            yield message
            if message.get("id") == request_id:
                return


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_log_lines_at_the_level_asked_progress_and_content_through_the_sdk_client(
    served: tuple[glovebox.Runtime, str], anyio_backend: str
) -> None:
    _, base = served
    logs: list[types.LoggingMessageNotificationParams] = []
    progress: list[float] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with httpx2.AsyncClient(timeout=60) as http:
        transport = streamable_http_client(base + "/mcp", http_client=http)
        async with Client(transport, mode="legacy", cache=None, logging_callback=on_log) as client:
            await client.call_tool("logging", {})
            assert logs == []  # no level asked: no log lines
            with pytest.warns(MCPDeprecationWarning):  # by the 2026-07-28 protocol; this client speaks 2025-11-25
                await client.set_logging_level("warning")
            await client.call_tool("logging", {})
            assert logs == []  # the guest logs at info only
            with pytest.warns(MCPDeprecationWarning):
                await client.set_logging_level("debug")
            await client.call_tool("logging", {})
            await anyio.sleep(0.2)
            assert [entry.data for entry in logs] == [
                "Tool execution started",
                "Tool processing data",
                "Tool execution completed",
            ]
            assert {entry.level for entry in logs} == {"info"} and {entry.logger for entry in logs} == {"glovebox"}
            await client.call_tool("progress", {}, progress_callback=on_progress)
            assert progress == [0.0, 50.0, 100.0]
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert listed["image"].output_schema is None and listed["plain"].output_schema is not None
            image = await client.call_tool("image", {})
            assert [block.type for block in image.content] == ["image", "text"]
            assert image.structured_content is None
            assert "output" not in json.loads(image.content[1].text)  # type: ignore[union-attr]
            plain = await client.call_tool("plain", {})
            assert plain.structured_content is not None  # a tool without the mark: its output as it is
            assert plain.structured_content["output"]["content"][0]["type"] == "image"


def test_blocks_that_are_not_mcp_content_are_answered_as_any_output() -> None:
    result = CallResult(ok=True, output={"content": [{"type": "video", "data": "x"}]}, meta={"call_id": "c"})
    answered = tool_result(result, CONTENT)
    assert answered.structured_content == {"content": [{"type": "video", "data": "x"}]}
    assert [block.type for block in answered.content] == ["text"]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_event_store_keeps_the_newest_events_within_its_bounds(anyio_backend: str) -> None:
    store = BoundedEventStore(max_events=3, max_bytes=10_000)
    ping = types.JSONRPCRequest(jsonrpc="2.0", id=1, method="ping")
    first = await store.store_event("a", None)
    ids = [await store.store_event("a", ping) for _ in range(3)]
    sent: list[str | None] = []

    async def send(event: Any) -> None:
        sent.append(event.event_id)

    assert await store.replay_events_after(first, send) is None  # the priming event was forgotten
    assert await store.replay_events_after(ids[0], send) == "a" and sent == ids[1:]
    other = await store.store_event("b", ping)
    sent.clear()
    assert await store.replay_events_after(ids[1], send) == "a" and sent == ids[2:]  # b's events are not a's
    assert await store.replay_events_after(other, send) == "b"
    big = BoundedEventStore(max_events=100, max_bytes=len(ping.model_dump_json(by_alias=True, exclude_none=True)))
    kept = await big.store_event("a", ping)
    await big.store_event("a", ping)
    assert await big.replay_events_after(kept, send) is None  # over the byte bound: the oldest went
