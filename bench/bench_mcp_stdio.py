"""What calling a local (stdio) MCP tool through glovebox costs, next to calling it with the SDK directly.

Run ``python bench/bench_mcp_stdio.py [--quick]``. One stdio MCP server (the
test suite's ``tests/remote/servers/stdio_lab.py``, on the official SDK; its
``remember`` tool appends a note and answers a count) is called, each answer checked:

* **sdk**: the official SDK's ``Client`` over ``StdioServerParameters``, one
  long-lived session, ``call_tool`` per call (no policy, validation or audit);
* **glovebox**: ``Runtime.call`` on the imported tool (``import mcp --command``,
  ``--sandbox none``): gate, input validation, the pooled session of
  (server, principal), output check, one audit row;
* **glovebox bwrap**: the same under bubblewrap, where this machine runs it;
* **sdk → glovebox mcp**: the gateway an agent stack uses: the same SDK ``Client``
  over stdio, talking to ``glovebox mcp`` (stdio), which calls the imported tool
  (``--sandbox none``) on its own pooled session to the server: two stdio hops and
  glovebox's call pipeline, next to the one hop of **sdk**.

Each contender starts its own server process and calls it once before timing, so
the figures are per call on a warm session; a full run makes three rounds of
every contender in turn and keeps each one's best round. Figures (p50/p95 ms per call) go to
stdout with the ratio to the SDK, and to ``bench/results/mcp_stdio.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

import glovebox
from glovebox.importers import import_mcp
from glovebox.remote import _bwrap

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "tests" / "remote" / "servers" / "stdio_lab.py"
PYTHON = str(Path(sys.executable).parent / "python")
RESULTS = Path(__file__).resolve().parent / "results" / "mcp_stdio.json"


async def atimed(calls: int, one: Callable[[], Awaitable[None]]) -> list[float]:
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await one()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def sdk(calls: int) -> list[float]:
    async def run() -> list[float]:
        server = StdioServerParameters(command=PYTHON, args=[str(LAB)])
        async with Client(server, cache=None, mode="legacy") as client:

            async def one() -> None:
                result = await client.call_tool("remember", {"note": "n"})
                assert result.structured_content is not None and result.structured_content["result"] > 0

            await one()  # warm: the process is up
            return await atimed(calls, one)

    return anyio.run(run)


def through_glovebox(calls: int, home: Path, sandbox: str) -> list[float]:
    with glovebox.Runtime(home=home) as rt:
        import_mcp(rt, command=[PYTHON, str(LAB)], name="lab", scopes=[], sandbox=sandbox, timeout_ms=20_000)
        samples = []
        for index in range(calls + 1):
            started = time.perf_counter()
            result = rt.call("lab-remember", {"note": "n"})
            assert result.ok and result.output == {"result": index + 1}, result.to_dict()
            samples.append((time.perf_counter() - started) * 1000)
        return samples[1:]  # the first started the process


def through_gateway(calls: int, home: Path) -> list[float]:
    """The SDK client → ``glovebox mcp`` over stdio → the imported stdio tool."""
    policy = home / "policy.yaml"
    policy.write_text("version: 1\nprincipals:\n  agent: {scopes: []}\ndefaults: {action: allow}\n")
    with glovebox.Runtime(home=home, policy=policy) as rt:
        import_mcp(rt, command=[PYTHON, str(LAB)], name="lab", scopes=[], sandbox="none", timeout_ms=20_000)

    async def run() -> list[float]:
        argv = ["-m", "glovebox", "--home", str(home), "--policy", str(policy), "mcp", "--principal", "agent"]
        server = StdioServerParameters(command=PYTHON, args=argv, env={"PYTHONPATH": str(ROOT / "runtime")})
        async with Client(server, cache=None, mode="legacy", read_timeout_seconds=60) as client:
            count = 0

            async def one() -> None:
                nonlocal count
                result = await client.call_tool("lab-remember", {"note": "n"})
                count += 1
                assert not result.is_error and result.structured_content == {"result": count}, result

            await one()  # warm: both processes are up, the session to the server open
            return await atimed(calls, one)

    return anyio.run(run)


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": statistics.median(ordered), "p95_ms": ordered[int(0.95 * (len(ordered) - 1))]}


def one_round(calls: int) -> dict[str, dict[str, float]]:
    figures = {"sdk": summary(sdk(calls))}
    with tempfile.TemporaryDirectory() as home:
        figures["glovebox"] = summary(through_glovebox(calls, Path(home), "none"))
    if _bwrap.available():
        with tempfile.TemporaryDirectory() as home:
            figures["glovebox bwrap"] = summary(through_glovebox(calls, Path(home), "bwrap"))
    with tempfile.TemporaryDirectory() as home:
        figures["sdk > glovebox mcp"] = summary(through_gateway(calls, Path(home)))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer calls, one round")
    quick = parser.parse_args().quick
    calls, rounds = (50, 1) if quick else (200, 3)
    # Each round runs every contender in turn; the best round of each is kept (a loaded host's noise
    # only ever adds time).
    runs = [one_round(calls) for _ in range(rounds)]
    figures: dict[str, Any] = {
        name: min((run[name] for run in runs), key=lambda row: row["p50_ms"]) for name in runs[0]
    }
    base = figures["sdk"]["p50_ms"]
    print(f"{'contender':<20} {'p50 ms':>8} {'p95 ms':>8} {'p50 vs sdk':>11}")
    for name, row in figures.items():
        print(f"{name:<20} {row['p50_ms']:>8.2f} {row['p95_ms']:>8.2f} {row['p50_ms'] / base:>10.2f}x")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"calls": calls, "rounds": rounds, "figures": figures}, indent=2))


if __name__ == "__main__":
    main()
