"""What proxying a remote MCP tool through glovebox costs, next to calling it with the SDK directly.

Run ``python bench/bench_mcp_remote.py [--quick]``. A remote MCP server (the
official SDK's ``MCPServer``, streamable HTTP, uvicorn on 127.0.0.1, one tool
``add``) is called three ways, each answer checked:

* **sdk session**: one long-lived SDK ``Client`` session, ``call_tool`` per call
  (the cheapest a user gets, with no policy, validation or audit);
* **sdk per call**: a fresh SDK ``Client`` (connect, negotiate, call, close) per
  call, which is what glovebox did before sessions lasted;
* **glovebox**: ``Runtime.call`` on the imported ``mcp-remote`` tool (gate,
  validation, the pooled session of (server, principal), output check, one audit row).

Figures (p50/p95 ms per call) go to stdout with ratios, and to ``bench/results/mcp_remote.json``.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp import Client
from mcp.server.mcpserver import MCPServer

import glovebox
from glovebox.importers import import_mcp

RESULTS = Path(__file__).resolve().parent / "results" / "mcp_remote.json"


def serve() -> tuple[str, uvicorn.Server]:
    server = MCPServer("Bench")

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = uvicorn.Config(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning")
    running = uvicorn.Server(config)
    threading.Thread(target=running.run, daemon=True).start()
    while not running.started:
        time.sleep(0.01)
    return f"http://127.0.0.1:{port}/mcp", running


def timed(calls: int, one: Callable[[], None]) -> list[float]:
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        one()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def atimed(calls: int, one: Callable[[], Awaitable[None]]) -> list[float]:
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await one()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def sdk_session(url: str, calls: int) -> list[float]:
    async def run() -> list[float]:
        async with Client(url, cache=None) as client:

            async def one() -> None:
                result = await client.call_tool("add", {"a": 2, "b": 3})
                assert result.structured_content == {"result": 5}

            return await atimed(calls, one)

    return anyio.run(run)


def sdk_per_call(url: str, calls: int) -> list[float]:
    async def one() -> None:
        async with Client(url, cache=None) as client:
            result = await client.call_tool("add", {"a": 2, "b": 3})
            assert result.structured_content == {"result": 5}

    return timed(calls, lambda: anyio.run(one))


def through_glovebox(url: str, calls: int, home: Path) -> list[float]:
    with glovebox.Runtime(home=home) as rt:
        import_mcp(rt, url, scopes=[])

        def one() -> None:
            result = rt.call("bench-add", {"a": 2, "b": 3})
            assert result.ok and result.output == {"result": 5}, result.to_dict()

        return timed(calls, one)


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": statistics.median(ordered), "p95_ms": ordered[int(0.95 * (len(ordered) - 1))]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer calls")
    calls = 30 if parser.parse_args().quick else 200
    url, server = serve()
    with tempfile.TemporaryDirectory() as home:
        figures: dict[str, Any] = {
            "sdk session": summary(sdk_session(url, calls)),
            "sdk per call": summary(sdk_per_call(url, calls)),
            "glovebox": summary(through_glovebox(url, calls, Path(home))),
        }
    server.should_exit = True
    base = figures["sdk per call"]["p50_ms"]
    print(f"{'contender':<14} {'p50 ms':>8} {'p95 ms':>8} {'p50 vs sdk per call':>20}")
    for name, row in figures.items():
        print(f"{name:<14} {row['p50_ms']:>8.2f} {row['p95_ms']:>8.2f} {row['p50_ms'] / base:>19.2f}x")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"calls": calls, "figures": figures}, indent=2))


if __name__ == "__main__":
    main()
