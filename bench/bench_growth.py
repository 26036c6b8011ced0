"""How cost grows: input size, calls in flight, registry size, audit rows.

Run ``python bench/bench_growth.py [--quick] [--skip input|flight|registry|audit]``.
Four sweeps, each printing a table whose last column is the cost per unit, so what
grows linearly shows a flat last column and what does not shows it moving:

1. **input** 1 KB → 1 MB: ``Runtime.call`` of the C text-stats example (its input and
   output schemas, a fresh sandbox) on ``{"text": ...}``; µs per call and per KB.
2. **flight** 10 → 10,000 calls at once, each waiting 200 ms on a loopback upstream
   (``bench_density``'s upstream and weather tool through ``Runtime.acall``): wall
   time, wall time past the 200 ms, and resident memory per call while all wait.
3. **registry** 10 → 10,000 tools (one component under many names): registering one
   more, ``Runtime.call`` of the first, ``tool()``, ``tools()`` and ``visible_tools()``.
4. **audit** 10⁴ → 10⁶ rows (real call rows, appended through ``AuditLog.append``):
   ``verify()``, ``tail(20)`` and ``find()``, with the rows folded first.

``--quick`` stops each sweep one step short (100 KB, 1,000 in flight, 1,000 tools,
10⁵ rows). Nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from bench_call import INPUT, build_tool  # noqa: E402

TOOL = "text-stats"


def median_us(call: Callable[[], object], times: int) -> float:
    samples = []
    for _ in range(times):
        t0 = time.perf_counter_ns()
        call()
        samples.append((time.perf_counter_ns() - t0) / 1000)
    return statistics.median(samples)


def table(title: str, head: list[str], rows: list[list[str]]) -> None:
    print(f"\n{title}\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")


def input_sweep(work: Path, quick: bool) -> None:
    import glovebox

    wasm = build_tool(work)
    manifest = {
        "name": TOOL,
        "input_schema": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
        "output_schema": {"type": "object", "required": ["characters", "words", "lines", "bytes"]},
        "limits": {"fuel": 4_000_000_000, "memory_bytes": 64 * 1024 * 1024, "timeout_ms": 30_000},
    }
    sizes = [1, 10, 100] if quick else [1, 10, 100, 1000]
    rows = []
    with glovebox.Runtime(home=work / "input-home") as rt:
        rt.register(wasm, manifest=manifest)
        for kb in sizes:
            value = {"text": ("lorem ipsum dolor sit amet, " * (kb * 1024 // 28 + 1))[: kb * 1024]}
            first = rt.call(TOOL, value)
            if not first.ok:
                raise SystemExit(f"{kb} KB: {first.error!r}")
            us = median_us(lambda value=value: rt.call(TOOL, value), max(5, 200 // kb))
            fuel = first.meta["fuel_used"]
            rows.append([f"{kb:,} KB", f"{us:,.0f}", f"{fuel:,}", f"{us / kb:,.1f}"])
    table("input size: Runtime.call text-stats (median)", ["input", "µs per call", "fuel", "µs per KB"], rows)


def flight_sweep(work: Path, quick: bool) -> None:
    import asyncio

    import glovebox
    from bench_density import EXAMPLE, Upstream, _runtime, glovebox_burst, in_flight

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    counts = [10, 100, 1000] if quick else [10, 100, 1000, 10_000]
    upstream = Upstream()
    rows = []
    try:
        wasm = glovebox.build(EXAMPLE / "tool.c", work / "weather.wasm")
        with _runtime(work / "flight-home", wasm, upstream.port, max(counts), None) as rt:
            api = f"{upstream.base}/d200"
            glovebox_burst(rt, api, 50)
            for n in counts:
                wall, errors = glovebox_burst(rt, api, n)
                held = in_flight(rt, upstream, n)
                past = (wall - 0.2) * 1e6 / n
                rss = held["rss_per_call_bytes"] / 1024
                errs = errors + held["errors"]
                rows.append([f"{n:,}", f"{wall:.2f} s", f"{past:,.0f}", f"{rss:,.1f}", str(errs)])
    finally:
        upstream.close()
    asyncio.set_event_loop(None)
    table(
        "calls in flight: acall burst on a 200 ms upstream, then as many held at once",
        ["calls", "burst wall", "µs per call past 200 ms", "RSS per held call (KiB)", "errors"],
        rows,
    )


def registry_sweep(work: Path, quick: bool) -> None:
    import glovebox

    wasm = build_tool(work)
    steps = [10, 100, 1000] if quick else [10, 100, 1000, 10_000]
    rows = []
    with glovebox.Runtime(home=work / "registry-home") as rt:
        count = 0

        def register_one() -> None:
            nonlocal count
            rt.register(wasm, manifest={"name": f"tool-{count:05d}", "input_schema": {"type": "object"}})
            count += 1

        for target in steps:
            started = time.perf_counter()
            while count < target - 1:
                register_one()
            one = median_us(register_one, 1)
            call = median_us(lambda: rt.call("tool-00000", INPUT), 50)
            lookup = median_us(lambda: rt.tool("tool-00000"), 50)
            listing = median_us(rt.tools, 3)
            visible = median_us(rt.visible_tools, 3)
            rows.append(
                [
                    f"{target:,}",
                    f"{(time.perf_counter() - started):.1f} s",
                    f"{one / 1000:,.1f}",
                    f"{call:,.0f}",
                    f"{lookup:,.1f}",
                    f"{listing / 1000:,.1f}",
                    f"{visible / 1000:,.1f}",
                    f"{listing / target:,.1f}",
                ]
            )
    table(
        "registry size: one component under N names",
        ["tools", "to fill", "register one (ms)", "call (µs)", "tool() (µs)", "tools() (ms)",
         "visible_tools() (ms)", "tools() µs per tool"],
        rows,
    )  # fmt: skip


def audit_sweep(work: Path, quick: bool) -> None:
    import glovebox
    from glovebox.audit._log import AuditLog

    steps = [10_000, 100_000] if quick else [10_000, 100_000, 1_000_000]
    wasm = build_tool(work)
    with glovebox.Runtime(home=work / "audit-source") as rt:
        rt.register(wasm)
        rt.call(TOOL, INPUT)
        row = rt.audit.tail(1)[0]
    template = {k: v for k, v in row.items() if k not in ("seq", "prev_hash", "hash")}
    log = AuditLog(work / "audit-home")
    rows = []
    written = 0
    try:
        for target in steps:
            started = time.perf_counter()
            while written < target:
                log.append({**template, "call_id": f"call-{written:08d}"})
                written += 1
            log.fold()
            fill = time.perf_counter() - started
            t0 = time.perf_counter()
            verdict = log.verify()
            verify_s = time.perf_counter() - t0
            assert verdict.ok and verdict.rows == target, verdict
            tail = median_us(lambda: log.tail(20), 20)
            find = median_us(lambda: log.find("call-00000007"), 20)
            size = (work / "audit-home" / "audit.sqlite").stat().st_size / 1e6
            rows.append(
                [
                    f"{target:,}",
                    f"{fill:.1f} s",
                    f"{verify_s:.2f} s",
                    f"{verify_s * 1e6 / target:.1f}",
                    f"{tail:,.0f}",
                    f"{find:,.0f}",
                    f"{size:,.0f} MB",
                ]
            )
    finally:
        log.close()
    table(
        "audit rows: verify() walks the chain, tail(20) and find() use the indexes",
        ["rows", "append + fold", "verify()", "verify µs per row", "tail(20) µs", "find() µs", "database"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="each sweep one step shorter")
    parser.add_argument("--skip", action="append", default=[], choices=["input", "flight", "registry", "audit"])
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message=".*(has no description|accepts any input)")
    with tempfile.TemporaryDirectory() as tmp:
        for name, sweep in (
            ("input", input_sweep),
            ("flight", flight_sweep),
            ("registry", registry_sweep),
            ("audit", audit_sweep),
        ):
            if name not in args.skip:
                folder = Path(tmp) / name
                folder.mkdir()
                sweep(folder, args.quick)
    print(json.dumps({"quick": args.quick}))


if __name__ == "__main__":
    main()
