"""Code mode: how fast a run starts and how much memory a live run holds, JavaScript and Python side by side.

Run ``python bench/bench_run_start.py [--quick]``. For each code runner (QuickJS-NG
for ``ts``/``js``, CPython for ``py``), a program that makes one host call (the
clock) and returns:

- ``runner start``: one fresh sandbox of the code runner, the program compiled
  and run to its end (``Sandbox.run`` with the runner's host calls answered by a
  stub): what a run costs before any journal or audit;
- ``Runtime.run``: the whole run: the run recorded in ``runs.sqlite``, its lease,
  the journaled host call, the run's end and its audit row;
- ``Python tool call`` (reference, under the same load): ``Runtime.call`` of the
  Python tool ``bench/py_text_stats.py``, one fresh componentize-py instance: a
  Python run starts one such instance too;
- ``memory per live run``: N runs held live at once (each blocked in its host
  call, on its own thread): what the process holds more while they are held,
  divided by N, as RSS (every mapped page; the runner's memory image, shared
  copy-on-write, counts once per run that read it), PSS (shared pages split
  between their mappers) and private memory (pages only one run owns: what it
  wrote). Private is what a run costs the host; the shared image exists once.

Targets (issue 45): a Python run starts in <= 5 ms at p50 and holds <= 8 MB live.
Nothing here is a test. ``--json PATH`` writes the figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from bench_runs import percentile  # noqa: E402

PROGRAMS = {
    "js": "export default async function (input, tools) { return Date.now() > 0 ? input : null; }",
    "py": "import time\n\nasync def main(input, tools):\n    return input if time.time() > 0 else None\n",
}


class Stub:
    """Answers the runner's host calls: the clock, after ``gate`` opens (a live run waits there)."""

    def __init__(self, gate: threading.Event | None = None, arrived: threading.Semaphore | None = None) -> None:
        self.gate, self.arrived = gate, arrived

    def host_call(self, kind: str, request: str) -> str:
        if self.arrived is not None:
            self.arrived.release()
        if self.gate is not None:
            self.gate.wait(120)
        return '{"now": 1.0}'


def measure(rt: Any, lang: str, rounds: int, live: int, reference: Any = None) -> dict[str, Any]:
    runs = rt.runs
    component = runs.runner._component(lang)
    sandbox = runs.env.sandbox
    limits = runs.runner.limits
    request = json.dumps({"script": runs._script(PROGRAMS[lang], lang), "input": 7, "tools": [], "replay": False})

    def start() -> None:
        outcome = sandbox.run(component, request, limits, host_calls=Stub())
        assert outcome.error is None and json.loads(outcome.output_text or "") == {"output": 7}, outcome

    def whole() -> None:
        result = rt.run(PROGRAMS[lang], input=7, lang=lang)
        assert result.ok and result.output == 7, result.to_dict()

    steps: list[tuple[str, Any]] = [("runner start", start), ("Runtime.run", whole)]
    if reference is not None:
        steps.append(("Python tool call", reference))
    timings: dict[str, list[float]] = {name: [] for name, _ in steps}
    for _ in range(5):
        for _, step in steps:
            step()
    for i in range(rounds):
        for name, step in steps[i % len(steps) :] + steps[: i % len(steps)]:
            began = time.perf_counter()
            step()
            timings[name].append(time.perf_counter() - began)

    gate, arrived = threading.Event(), threading.Semaphore(0)
    before = memory()
    threads = [
        threading.Thread(target=lambda: sandbox.run(component, request, limits, host_calls=Stub(gate, arrived)))
        for _ in range(live)
    ]
    for thread in threads:
        thread.start()
    for _ in range(live):
        arrived.acquire(timeout=120)
    held = memory()
    gate.set()
    for thread in threads:
        thread.join(120)
    figures = {name: (statistics.median(s) * 1e3, percentile(s, 0.99) * 1e3) for name, s in timings.items()}
    per_run = {kind: (held[kind] - before[kind]) / live for kind in held}
    return {"ms_p50_p99": figures, "live_runs": live, "bytes_per_live_run": per_run}


def memory() -> dict[str, int]:
    """The process's RSS, PSS and private bytes (Linux ``/proc/self/smaps_rollup``), after a collection."""
    gc.collect()
    fields = {"Rss:": "rss", "Pss:": "pss", "Private_Clean:": "private", "Private_Dirty:": "private"}
    found = {"rss": 0, "pss": 0, "private": 0}
    with open("/proc/self/smaps_rollup") as rollup:
        for line in rollup:
            key = line.split(":", 1)[0] + ":"
            if key in fields:
                found[fields[key]] += int(line.split()[1]) * 1024
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    rounds, live = (40, 8) if args.quick else (300, 24)
    import glovebox

    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-run-start-") as tmp, glovebox.Runtime(home=Path(tmp) / "h") as rt:
        rt.register(glovebox.build(BENCH / "py_text_stats.py", Path(tmp) / "py_text_stats.wasm"))
        name = rt.tools()[0].name

        def python_tool() -> None:
            assert rt.call(name, {"text": "a b c"}).ok

        results["js"] = measure(rt, "js", rounds, live)
        results["py"] = measure(rt, "py", rounds, live, python_tool)
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; {rounds} rounds, {live} live runs")
    print(f"{'':28}{'p50 ms':>10}{'p99 ms':>10}")
    for lang, figures in results.items():
        for name, (p50, p99) in figures["ms_p50_p99"].items():
            print(f"{lang + ' ' + name:28}{p50:10.2f}{p99:10.2f}")
        per_run = figures["bytes_per_live_run"]
        print(
            f"{lang + ' memory per live run':28}RSS {per_run['rss'] / 2**20:.2f} MiB, PSS {per_run['pss'] / 2**20:.2f}"
            f" MiB, private {per_run['private'] / 2**20:.2f} MiB"
        )
    print("targets: a Python run starts in <= 5 ms p50 and holds <= 8 MB live (private)")
    if args.json:
        args.json.write_text(json.dumps({"load": load, "rounds": rounds, **results}, indent=2))


if __name__ == "__main__":
    main()
