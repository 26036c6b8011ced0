"""A saved program through ``glovebox mcp``, driven by the official SDK's client over stdio: it is listed
as a tool, callable, and its nested calls run as the principal the gateway serves (runtime/_runsave.py,
runtime/executors/_program.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

import glovebox

from ..conftest import register_text_tools
from ..runs.test_saved import PROGRAM
from .test_mcp import envelope, stdio_client

pytestmark = [pytest.mark.anyio, pytest.mark.system]


POLICY = """
version: 1
principals:
  author: {scopes: [text:read, glovebox:save]}
  reader: {scopes: [text:read]}
  outsider: {scopes: []}
defaults:
  action: block
rules:
  - {tool: text-stats, action: allow}
  - {tool: calc, action: allow}
  - {tool: word-total, action: allow}
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def saved(tmp_path: Path, build_example: Callable[[str], Path]) -> tuple[Path, Path]:
    """A home where author's run (text-stats then calc) is saved as ``word-total``; text-stats needs text:read."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    home = tmp_path / "home"
    with glovebox.Runtime(home=home, policy=policy) as rt:
        register_text_tools(rt, build_example)
        done = rt.run(PROGRAM, input={"text": "one two three"}, principal="author", lang="js")
        assert done.status == "done", done.to_dict()
        glovebox.save_run(rt, done.run_id, "word-total")
    return home, policy


def _nested(home: Path, run_id: str) -> list[tuple[str, str, str]]:
    audit = glovebox.AuditLog(home)
    try:
        rows = [(row, json.loads(row["egress"] or "{}").get("run", {})) for row in audit.records()]
    finally:
        audit.close()
    return [(row["tool"], row["principal"], row["outcome"]) for row, run in rows if run.get("run_id") == run_id]


async def test_a_saved_program_is_listed_and_called_through_the_gateway_as_its_caller(
    saved: tuple[Path, Path],
) -> None:
    home, policy = saved
    async with stdio_client(home, policy, "--principal", "reader") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert "word-total" in tools and tools["word-total"].input_schema["required"] == ["text"]
        called = await client.call_tool("word-total", {"text": "a b c d"})
        answer = envelope(called)
        assert called.is_error is False and answer["output"] == {"words": 4, "doubled": 8}, answer
        assert answer["meta"]["principal"] == "reader"
        refused = await client.call_tool("word-total", {"text": 5})
        assert refused.is_error is True and envelope(refused)["error"]["code"] == "invalid_input"
    assert _nested(home, answer["meta"]["run_id"]) == [
        ("text-stats@1.0.0", "reader", "ok"),
        ("calc@1.0.0", "reader", "ok"),
        ("glovebox:run", "reader", "ok"),
    ]  # every nested call the caller's, never the saver's (author)
    async with stdio_client(home, policy, "--principal", "outsider") as client:
        assert "word-total" in {tool.name for tool in (await client.list_tools()).tools}
        denied = envelope(await client.call_tool("word-total", {"text": "a b"}))
    # outsider lacks text:read: under its own policy the program's first nested call finds no such tool
    assert denied["error"]["code"] == "tool_not_found", denied
    assert _nested(home, denied["error"]["details"]["run_id"]) == [
        ("text-stats", "outsider", "tool_not_found"),
        ("glovebox:run", "outsider", "tool_not_found"),
    ]
