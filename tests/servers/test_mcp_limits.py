"""Back-pressure through MCP: ``rate_limited`` and ``overloaded`` as the official SDK client sees them.

An agent's MCP client must get a refused call as a tool error carrying the
envelope (code, ``retryable``, ``details.retry_after_ms``), so that the agent
can wait and retry; the session must stay usable after it.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import glovebox
from glovebox.servers._mcp import McpService, streamable_http_app

from ..runtime.test_admission import HoldServer, held_runtime, hold, until  # noqa: F401  (hold is a fixture)
from .test_mcp import envelope, http_client

pytestmark = pytest.mark.anyio

BuildGuest = Callable[[str], Path]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def assert_refused(result: object, code: str) -> dict[str, object]:
    assert getattr(result, "is_error", None) is True
    body = envelope(result)  # type: ignore[arg-type]
    assert body["ok"] is False and body["error"]["code"] == code, body
    assert body["error"]["retryable"] is True
    retry = body["error"]["details"]["retry_after_ms"]
    assert isinstance(retry, int) and retry >= 1
    assert body["meta"]["fuel_used"] == 0
    return body  # type: ignore[no-any-return]


async def test_a_quota_reaches_the_mcp_client_as_rate_limited(
    server_home: tuple[Path, Path], serve_app: Callable[[object], str]
) -> None:
    home, policy = server_home
    policy.write_text(policy.read_text() + "quotas:\n  - {tool: calc, principals: [agent], calls_per_minute: 1}\n")
    with glovebox.Runtime(home=home, policy=policy) as rt:
        url = serve_app(streamable_http_app(McpService(rt, poll_s=0.1)))
        async with http_client(url, "agent-key") as client:
            first = await client.call_tool("calc", {"expression": "1 + 1"})
            assert first.is_error is False and first.structured_content == {"value": 2}
            body = assert_refused(await client.call_tool("calc", {"expression": "2 + 2"}), "rate_limited")
            assert body["error"]["details"]["quota"] == "quotas[0].calls_per_minute"
            other = await client.call_tool("text-stats", {"text": "a b"})  # another tool is not counted
            assert other.is_error is False
    audit = glovebox.AuditLog(home)
    try:
        assert [row["outcome"] for row in audit.records()][-3:] == ["ok", "rate_limited", "ok"]
    finally:
        audit.close()


async def test_a_full_runtime_reaches_the_mcp_client_as_overloaded(
    tmp_path: Path,
    build_guest: BuildGuest,
    hold: HoldServer,  # noqa: F811  (the fixture imported above)
    serve_app: Callable[[object], str],
) -> None:
    import anyio

    policy = tmp_path / "policy.yaml"
    rule = f"{{host: 127.0.0.1, schemes: [http], ports: [{hold.port}], methods: [GET], paths: ['/**'], "
    rule += "allow_private: true}"
    policy.write_text(
        "version: 1\ndefaults: {action: allow}\n"
        f"grants:\n  - tool: hc\n    http: [{rule}]\n    http_limits: {{request_timeout_ms: 60000}}\n"
    )
    home = tmp_path / "home"
    held_runtime(home, build_guest, hold).close()  # registers `hc`, granted the hold server
    with glovebox.Runtime(home=home, policy=policy, max_in_flight=1, max_queued=0) as rt:
        url = serve_app(streamable_http_app(McpService(rt, poll_s=0.1, insecure_anonymous=True)))
        with ThreadPoolExecutor(1) as pool:
            holding = pool.submit(rt.call, "hc", {"url": hold.url()})
            until(lambda: hold.waiting == 1)
            async with http_client(url, None) as client:
                assert_refused(await client.call_tool("hc", {"url": hold.url()}), "overloaded")
                hold.release.set()
                assert holding.result(30).ok
                with anyio.fail_after(30):
                    again = await client.call_tool("hc", {"url": hold.url()})
                assert again.is_error is False, envelope(again)
