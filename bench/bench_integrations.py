"""The cost of each framework provider over a direct ``Runtime.call``, side by side as ratios.

Run ``python bench/bench_integrations.py [--quick]``. The same tiny tool (the C
``calc`` example on ``"1+1"``) is called directly with ``Runtime.call`` and
through each framework's tool object, the way its agent loop invokes it:

* langchain: ``tool.invoke(tool_call)`` (answers a ``ToolMessage``);
* llama-index: ``FunctionTool.call(**arguments)`` (answers a ``ToolOutput``);
* openai-agents: ``await FunctionTool.on_invoke_tool(context, arguments_json)``;
* pydantic-ai: ``await Tool.function(**arguments)``.

Each line prints p50 and p99 of one call and the ratio of its p50 to the direct
call's. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import glovebox

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "guest" / "examples" / "calc" / "tool.c"
ARGS = {"expression": "1+1"}


def measure(fn: Callable[[], Any], n: int) -> tuple[float, float]:
    for _ in range(max(n // 10, 5)):
        fn()
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1e6)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


def contenders(rt: glovebox.Runtime) -> dict[str, Callable[[], Any]]:
    from agents.tool_context import ToolContext

    from glovebox.integrations import langchain, llama_index, openai_agents, pydantic_ai

    loop = asyncio.new_event_loop()
    lc = langchain.tools(rt, pattern="calc")[0]
    li = llama_index.tools(rt, pattern="calc")[0]
    oa = openai_agents.tools(rt, pattern="calc")[0]
    pa = pydantic_ai.tools(rt, pattern="calc")[0]
    arguments = '{"expression": "1+1"}'
    context = ToolContext(context=None, tool_name="calc", tool_call_id="c1", tool_arguments=arguments)
    call = {"name": "calc", "args": ARGS, "id": "c1", "type": "tool_call"}
    return {
        "Runtime.call (direct)": lambda: rt.call("calc", ARGS),
        "Runtime.acall (direct)": lambda: loop.run_until_complete(rt.acall("calc", ARGS)),
        "langchain tool.invoke": lambda: lc.invoke(call),
        "langchain tool.ainvoke": lambda: loop.run_until_complete(lc.ainvoke(call)),
        "llama-index FunctionTool.call": lambda: li.call(**ARGS),
        "openai-agents on_invoke_tool": lambda: loop.run_until_complete(oa.on_invoke_tool(context, arguments)),
        "pydantic-ai Tool.function": lambda: loop.run_until_complete(pa.function(**ARGS)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls (a smoke run)")
    n = 200 if parser.parse_args().quick else 2000
    with tempfile.TemporaryDirectory() as tmp, glovebox.Runtime(home=Path(tmp) / "home") as rt:
        rt.register(glovebox.build(SOURCE, Path(tmp) / "calc.wasm"))
        rows = [(name, *measure(fn, n)) for name, fn in contenders(rt).items()]
    base = rows[0][1]
    print(f"{'contender':<32}{'p50 µs':>10}{'p99 µs':>10}{'p50 / direct call':>20}")
    for name, p50, p99 in rows:
        print(f"{name:<32}{p50:>10.0f}{p99:>10.0f}{p50 / base:>19.2f}x")


if __name__ == "__main__":
    main()
