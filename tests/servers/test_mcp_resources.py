"""Resources, prompts and completions of an imported MCP server, through glovebox, with real servers and client.

A real MCP server (``tests/servers/mcp_fixture_server.py``, the SDK's ``MCPServer`` in a
subprocess) is imported; ``glovebox mcp`` (streamable HTTP, a real uvicorn) serves its
resources and prompts to the SDK's own client under the policy: a principal with the
scope ``fixture:read`` lists and reads them (each read audited), one without sees none
and is refused. A ``list_changed`` from the server refreshes the import (audited), and a
refresh that would widen is held.
"""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import glovebox
from glovebox.importers import _mcpwatch, import_mcp
from glovebox.importers._mcpwatch import REFRESH_TOOL, refresh_mcp, watch_mcp
from glovebox.servers._mcp import McpService, streamable_http_app

from .mcp_fixture_server import serving

pytestmark = [pytest.mark.anyio, pytest.mark.system]


def _sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


POLICY = f"""
version: 1
principals:
  reader:
    scopes: ["fixture:read"]
    api_key_sha256: [{_sha("reader-key")}]
  outsider:
    scopes: []
    api_key_sha256: [{_sha("outsider-key")}]
defaults:
  action: allow
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fixture_url() -> Iterator[str]:
    with serving() as url:
        yield url


@pytest.fixture
def home(tmp_path: Path, fixture_url: str) -> tuple[Path, Path]:
    home, policy = tmp_path / "home", tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    with glovebox.Runtime(home=home, policy=policy) as rt:
        done = import_mcp(rt, fixture_url, name="fixture", timeout_ms=10_000)
    assert {"fixture-read-resource", "fixture-get-prompt", "fixture-complete"} <= set(done.added)
    return home, policy


@asynccontextmanager
async def client(url: str, key: str) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        async with Client(streamable_http_client(url + "/mcp", http_client=http), cache=None) as connected:
            yield connected


@pytest.fixture
def served(home: tuple[Path, Path], serve_app: Callable[[object], str]) -> Iterator[tuple[glovebox.Runtime, str]]:
    with glovebox.Runtime(home=home[0], policy=home[1]) as rt:
        yield rt, serve_app(streamable_http_app(McpService(rt)))


def rows(rt: glovebox.Runtime, tool: str) -> list[dict[str, Any]]:
    """The audit rows of ``tool`` (a name prefix), their ``egress`` parsed."""
    found = [dict(row) for row in rt.audit.records() if str(row["tool"]).startswith(tool)]
    for row in found:
        row["egress"] = json.loads(row["egress"]) if isinstance(row["egress"], str) else row["egress"]
    return found


async def test_a_reader_lists_and_reads_resources_and_prompts_each_read_audited(
    served: tuple[glovebox.Runtime, str],
) -> None:
    rt, url = served
    async with client(url, "reader-key") as mcp:
        capabilities = mcp.server_capabilities
        assert capabilities.resources is not None and capabilities.prompts is not None
        listed = await mcp.list_resources()
        assert {str(r.uri) for r in listed.resources} >= {"test://static-text", "test://static-binary"}
        templates = await mcp.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == ["test://template/{id}/data"]
        text = await mcp.read_resource("test://static-text")
        [content] = text.contents
        assert isinstance(content, types.TextResourceContents)
        assert content.text == "This is the content of the static text resource."
        binary = await mcp.read_resource("test://static-binary")
        assert (
            isinstance(binary.contents[0], types.BlobResourceContents) and binary.contents[0].mime_type == "image/png"
        )
        templated = await mcp.read_resource("test://template/42/data")
        assert '"id": "42"' in templated.contents[0].text  # type: ignore[union-attr]
        prompts = await mcp.list_prompts()
        assert "test_prompt_with_arguments" in {p.name for p in prompts.prompts}
        prompt = await mcp.get_prompt("test_prompt_with_arguments", {"arg1": "one", "arg2": "two"})
        assert prompt.messages[0].content.text == "Prompt with arguments: arg1='one', arg2='two'"  # type: ignore[union-attr]
        completed = await mcp.complete(
            types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"), {"name": "arg1", "value": "pa"}
        )
        assert completed.completion.values == ["paris", "park", "party"]
    reads = rows(rt, "fixture-read-resource")
    assert (
        len(reads) == 3 and {r["principal"] for r in reads} == {"reader"} and all(r["outcome"] == "ok" for r in reads)
    )
    assert len(rows(rt, "fixture-get-prompt")) == 1 and len(rows(rt, "fixture-complete")) == 1


async def test_a_principal_without_the_read_scope_sees_none_and_is_refused(
    served: tuple[glovebox.Runtime, str],
) -> None:
    rt, url = served
    async with client(url, "outsider-key") as mcp:
        assert (await mcp.list_resources()).resources == []
        assert (await mcp.list_prompts()).prompts == []
        with pytest.raises(MCPError, match="no imported server lists the resource"):
            await mcp.read_resource("test://static-text")
        with pytest.raises(MCPError, match="no imported server lists the prompt"):
            await mcp.get_prompt("test_simple_prompt")
        completed = await mcp.complete(
            types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"), {"name": "arg1", "value": "pa"}
        )
        assert completed.completion.values == []
    assert rows(rt, "fixture-") == []  # nothing was read


async def test_a_read_needing_approval_answers_its_envelope_and_a_blocked_one_is_not_listed(
    home: tuple[Path, Path], serve_app: Any
) -> None:
    policy = home[1]
    rules = (
        "  - {tool: fixture-read-resource, action: require_approval}\n  - {tool: fixture-get-prompt, action: block}\n"
    )
    policy.write_text(POLICY + "rules:\n" + rules)
    with glovebox.Runtime(home=home[0], policy=policy) as rt:
        url = serve_app(streamable_http_app(McpService(rt)))
        async with client(url, "reader-key") as mcp:
            with pytest.raises(MCPError, match="approval_required") as caught:
                await mcp.read_resource("test://static-text")
            assert (await mcp.list_prompts()).prompts == []
            with pytest.raises(MCPError, match="no imported server lists the prompt"):
                await mcp.get_prompt("test_simple_prompt")
        assert caught.value.error.data["error"]["code"] == "approval_required"
        [row] = rows(rt, "fixture-read-resource")
        assert row["outcome"] == "approval_required" and row["principal"] == "reader"


async def test_list_changed_refreshes_the_import_audited(home: tuple[Path, Path], fixture_url: str) -> None:
    refreshed: list[Any] = []
    with glovebox.Runtime(home=home[0], policy=home[1]) as rt:
        before = rt.tool("fixture-read-resource")
        async with anyio.create_task_group() as tasks:
            settings = {"name": "fixture", "timeout_ms": 10_000}
            tasks.start_soon(lambda: watch_mcp(rt, fixture_url, on_refresh=refreshed.append, **settings))
            await anyio.sleep(1)  # the watcher's session is open
            async with Client(streamable_http_client(fixture_url), cache=None) as other:
                await other.call_tool("add_late", {})
            with anyio.fail_after(30):
                while not refreshed:
                    await anyio.sleep(0.1)
            tasks.cancel_scope.cancel()
        after = rt.tool("fixture-read-resource")
        assert after.version != before.version
        listed = after.input_schema["x-glovebox-resources"]["resources"]  # type: ignore[index]
        assert "test://late-resource" in {r["uri"] for r in listed}
        [row] = rows(rt, REFRESH_TOOL)
        assert row["outcome"] == "ok" and row["egress"]["remote"]["status"] == "applied"
        assert row["egress"]["remote"]["reason"] == "list_changed"
        assert "fixture-read-resource" in row["egress"]["remote"]["changed"]


async def test_the_watcher_connects_again_and_refreshes_when_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_mcpwatch, "RETRY_FIRST_S", 0.2)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    refreshed: list[Any] = []
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    with glovebox.Runtime(home=tmp_path / "home", policy=policy) as rt:
        with serving(port) as url:
            import_mcp(rt, url, name="fixture", timeout_ms=10_000)
        async with anyio.create_task_group() as tasks:
            settings = {"name": "fixture", "timeout_ms": 10_000}
            tasks.start_soon(lambda: watch_mcp(rt, url, on_refresh=refreshed.append, **settings))
            await anyio.sleep(1)  # nothing listens: the watcher tries again
            with serving(port):
                with anyio.fail_after(30):
                    while not refreshed:
                        await anyio.sleep(0.1)
                async with Client(streamable_http_client(url), cache=None) as other:
                    await other.call_tool("add_late", {})
                with anyio.fail_after(30):
                    while len(refreshed) < 2:
                        await anyio.sleep(0.1)
            tasks.cancel_scope.cancel()
        reasons = [row["egress"]["remote"]["reason"] for row in rows(rt, REFRESH_TOOL)]
        assert reasons == ["reconnected", "list_changed"]
        assert [r.meta["remote"]["status"] for r in refreshed] == ["applied", "applied"]


def test_a_refresh_that_would_widen_is_held(
    home: tuple[Path, Path], fixture_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIXTURE_TOKEN", "s3cret-token-value")
    with glovebox.Runtime(home=home[0], policy=home[1]) as rt:
        before = rt.tool("fixture-read-resource")
        result = refresh_mcp(
            rt, fixture_url, name="fixture", timeout_ms=10_000, header_secrets=["X-Token=FIXTURE_TOKEN"]
        )
        assert result.ok and result.meta["remote"]["status"] == "held"
        assert result.meta["remote"]["code"] == "widening_refused"
        assert rt.tool("fixture-read-resource").digest == before.digest
        [row] = rows(rt, REFRESH_TOOL)
        assert row["egress"]["remote"]["status"] == "held"
