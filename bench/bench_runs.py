"""Code mode: a program making 3 nested calls, against 3 direct calls and an agent framework's loop; replay per step.

Run ``python bench/bench_runs.py [--quick] [--skip framework]``. The tool is
the TypeScript text-stats example (``guest/examples/ts-text-stats``), small and
built in a fraction of a second once the JavaScript toolchain is cached. Each
round times every contender once, in turn (the order rotates from round to
round), so load on the machine falls on all of them alike:

- ``3 direct calls``: three ``Runtime.call`` in a row, each input made from the
  previous output (as the program does);
- ``1 JavaScript call``: one ``Runtime.call`` of the same tool (the code
  runner is a JavaScript instance too);
- ``run of 3 calls``: ``Runtime.run`` of a program making the same three
  dependent calls, each a full call, journaled in SQLite before the program
  sees it; ``Python run of 3 calls``: the same program in Python (``lang="py"``);
- ``framework loop``: the same orchestration done by pydantic-ai's agent loop
  with a scripted model (``FunctionModel``: it reads each tool result and asks
  for the next call, then answers), the tools from
  ``glovebox.integrations.pydantic_ai``, on one event loop kept for the whole
  bench; the model costs nothing, so this is the loop's own cost.

Replay (JavaScript and Python): a finished run of N recorded calls and the same program with N = 0,
each marked ``running`` again and resumed, alternately: nothing runs but the
program, every step answered from the journal; (resume N - resume 0) / N is
the whole cost of a replayed step (the program's loop, the host import, the
journal's text), and a timer around the host side of each replayed step gives
its share.

The targets (issue 27): a 3-call run <= 2x (the three direct calls plus one
JavaScript call) at p50; replay <= 50 us per recorded step. Nothing here is a
test. ``--json PATH`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
from bench_call import INPUT  # noqa: E402

TOOL = ROOT / "guest" / "examples" / "ts-text-stats" / "tool.ts"
NAME = "ts-text-stats"
PROGRAM = """
export default async function (input: { text: string }, tools: any) {
  const a = await tools.call("ts-text-stats", { text: input.text });
  const b = await tools.call("ts-text-stats", { text: input.text + " " + a.words });
  const c = await tools.call("ts-text-stats", { text: input.text + " " + b.words });
  return c.words;
}
"""
PROGRAM_PY = """
async def main(input, tools):
    a = await tools.call("ts-text-stats", {"text": input["text"]})
    b = await tools.call("ts-text-stats", {"text": input["text"] + " " + str(a["words"])})
    c = await tools.call("ts-text-stats", {"text": input["text"] + " " + str(b["words"])})
    return c["words"]
"""
MANY_PY = """
async def main(input, tools):
    total = 0
    for i in range(input["n"]):
        total += (await tools.call("ts-text-stats", {"text": "a b"}))["words"]
    return total
"""
MANY = """
export default async function (input: { n: number }, tools: any) {
  let total = 0;
  for (let i = 0; i < input.n; i++) total += (await tools.call("ts-text-stats", { text: "a b" })).words;
  return total;
}
"""


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def alternate(
    contenders: dict[str, Callable[[], object]], rounds: int, warmup: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Time each contender once per round, in turn (the order rotates): wall and CPU seconds per sample.

    CPU is the process's (every thread; the audit fold runs in a process of its
    own and is in neither): on a loaded machine it moves far less than the wall.
    """
    names = list(contenders)
    for _ in range(warmup):
        for name in names:
            contenders[name]()
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for i in range(rounds):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            started, used = time.perf_counter(), time.process_time()
            contenders[name]()
            cpu[name].append(time.process_time() - used)
            wall[name].append(time.perf_counter() - started)
    return wall, cpu


def framework_loop(rt: Any, text: str) -> Callable[[], object] | None:
    """The 3 dependent calls through pydantic-ai's agent loop with a scripted model, or None without pydantic-ai."""
    try:
        import asyncio

        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel

        from glovebox.integrations import pydantic_ai
    except ImportError:
        return None

    def model(messages: Any, info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        if len(returns) == 3:
            return ModelResponse(parts=[TextPart(str(json.loads(returns[-1].content)["words"]))])
        prompt = text if not returns else f"{text} {json.loads(returns[-1].content)['words']}"
        return ModelResponse(parts=[ToolCallPart(NAME, {"text": prompt}, tool_call_id=f"c{len(returns)}")])

    agent = Agent(FunctionModel(model), tools=pydantic_ai.tools(rt, pattern=NAME))
    loop = asyncio.new_event_loop()
    expected = str(rt.run(PROGRAM, input={"text": text}).output)

    def run() -> None:
        result = loop.run_until_complete(agent.run("go"))
        assert result.output == expected, (result.output, expected)

    run.loop = loop  # type: ignore[attr-defined]
    return run


def step_cost(samples: dict[str, list[float]], steps: int) -> dict[str, float]:
    """Microseconds per replayed step, by language: (median resume of N steps - median of 0) / N."""
    return {
        lang: (statistics.median(samples[f"{lang} N"]) - statistics.median(samples[f"{lang} 0"])) / steps * 1e6
        for lang in ("ts", "py")
    }


def framework(figures: dict[str, tuple[float, float]]) -> None:
    """The framework loop's ratios, when it ran."""
    if "framework loop" in figures:
        (d50, d99), (r50, r99) = figures["3 direct calls"], figures["run of 3 calls"]
        f50, f99 = figures["framework loop"]
        print(f"framework loop / 3 direct: p50 {f50 / d50:.2f}x, p99 {f99 / d99:.2f}x")
        print(f"run / framework loop: p50 {r50 / f50:.2f}x, p99 {r99 / f99:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--skip", action="append", default=[], choices=["framework"], help="leave a contender out")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    rounds = 60 if args.quick else 400
    steps = 200 if args.quick else 1000
    resumes = 10 if args.quick else 40
    import glovebox
    from glovebox.runs import _host

    with tempfile.TemporaryDirectory(prefix="bench-runs-") as tmp, glovebox.Runtime(home=Path(tmp) / "home") as rt:
        rt.register(glovebox.build(TOOL, Path(tmp) / "ts.wasm"))
        text = INPUT["text"][:200]

        def one() -> None:
            answer = rt.call(NAME, {"text": text})
            assert answer.ok, answer.to_dict()

        def direct() -> None:
            words = rt.call(NAME, {"text": text}).output["words"]
            words = rt.call(NAME, {"text": f"{text} {words}"}).output["words"]
            assert rt.call(NAME, {"text": f"{text} {words}"}).ok

        def run() -> None:
            answer = rt.run(PROGRAM, input={"text": text})
            assert answer.ok, answer.to_dict()

        def run_py() -> None:
            answer = rt.run(PROGRAM_PY, input={"text": text}, lang="py")
            assert answer.ok, answer.to_dict()

        contenders: dict[str, Callable[[], object]] = {
            "3 direct calls": direct,
            "1 JavaScript call": one,
            "run of 3 calls": run,
            "Python run of 3 calls": run_py,
        }
        loop = None if "framework" in args.skip else framework_loop(rt, text)
        if loop is not None:
            contenders["framework loop"] = loop
        samples, cpu = alternate(contenders, rounds, 5)
        if loop is not None:
            loop.loop.close()  # type: ignore[attr-defined]

        def resume(run_id: str) -> Callable[[], None]:
            def again() -> None:
                rt.runs.store.set_status(run_id, "running")
                assert rt.runs.resume(run_id).meta["replayed"] in (0, steps)

            return again

        made: dict[str, Callable[[], None]] = {}
        for lang, program in (("ts", MANY), ("py", MANY_PY)):
            recorded = rt.run(program, input={"n": steps}, lang=lang)
            empty = rt.run(program, input={"n": 0}, lang=lang)
            assert recorded.ok and empty.ok, (recorded.to_dict(), empty.to_dict())
            made[f"{lang} N"], made[f"{lang} 0"] = resume(recorded.run_id), resume(empty.run_id)
        replays, replays_cpu = alternate(made, resumes, 2)
        host_side: list[float] = []
        entry = "host_call" if hasattr(_host.RunHost, "host_call") else "fetch"  # fetch: before the run's own import
        answer = getattr(_host.RunHost, entry)

        def timed(*call: Any) -> Any:
            started = time.perf_counter()
            try:
                return answer(*call)
            finally:
                host_side.append(time.perf_counter() - started)

        setattr(_host.RunHost, entry, timed)
        try:
            made["ts N"]()
        finally:
            setattr(_host.RunHost, entry, answer)

    figures = {name: (statistics.median(s) * 1e6, percentile(s, 0.99) * 1e6) for name, s in samples.items()}
    cpu50 = {name: statistics.median(s) * 1e6 for name, s in cpu.items()}
    per_step, per_step_cpu = step_cost(replays, steps), step_cost(replays_cpu, steps)
    host_per_step = statistics.median(host_side) * 1e6
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; {rounds} rounds, taken in turn")
    print(f"{'':24}{'p50 us':>10}{'p99 us':>10}{'CPU p50 us':>12}")
    for name, (p50, p99) in figures.items():
        print(f"{name:24}{p50:10.0f}{p99:10.0f}{cpu50[name]:12.0f}")
    d50, d99 = figures["3 direct calls"]
    j50, j99 = figures["1 JavaScript call"]
    r50, r99 = figures["run of 3 calls"]
    budget_cpu = cpu50["3 direct calls"] + cpu50["1 JavaScript call"]
    print(
        f"run / (3 direct + 1 JS): p50 {r50 / (d50 + j50):.2f}x, p99 {r99 / (d99 + j99):.2f}x,"
        f" CPU p50 {cpu50['run of 3 calls'] / budget_cpu:.2f}x (target p50 <= 2x)"
    )
    print(f"run / 3 direct: p50 {r50 / d50:.2f}x, p99 {r99 / d99:.2f}x")
    y50, y99 = figures["Python run of 3 calls"]
    print(f"Python run / 3 direct: p50 {y50 / d50:.2f}x, p99 {y99 / d99:.2f}x")
    framework(figures)
    print(
        f"replay (JS): {per_step['ts']:.1f} us per recorded step over {steps} steps, {per_step_cpu['ts']:.1f} us of"
        f" CPU (target <= 50 us); host side {host_per_step:.1f} us of it (median)"
    )
    print(f"replay (Python): {per_step['py']:.1f} us per recorded step, {per_step_cpu['py']:.1f} us of CPU")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "load": load,
                    "rounds": rounds,
                    "p50_p99_us": figures,
                    "cpu_p50_us": cpu50,
                    "replay_us_per_step": per_step,
                    "replay_cpu_us_per_step": per_step_cpu,
                    "replay_host_us_per_step": host_per_step,
                    "steps": steps,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
