"""Dense sandboxes: one ProcessPool serving many concurrent calls, each in a fresh sandbox.

Builds guest/examples/text-stats (C), starts a pool of worker processes on one
home, fires CALLS calls at once from asyncio, and prints a summary: outcomes,
throughput, latency percentiles, which workers ran them, and the audit chain,
which holds one row per call whichever process wrote it.

Run it from a checkout: .venv/bin/python examples/dense_sandboxes.py [--calls N] [--processes P]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import statistics
import tempfile
import time
from pathlib import Path

import glovebox

SOURCE = Path(__file__).resolve().parent.parent / "guest" / "examples" / "text-stats" / "tool.c"


async def fire(pool: glovebox.ProcessPool, calls: int) -> list[tuple[glovebox.CallResult, float]]:
    async def one(i: int) -> tuple[glovebox.CallResult, float]:
        start = time.perf_counter()
        result = await pool.acall("text-stats", {"text": f"call number {i}\n"}, principal=f"agent-{i % 8}")
        return result, (time.perf_counter() - start) * 1000

    return await asyncio.gather(*(one(i) for i in range(calls)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="glovebox-dense-"))
    with glovebox.Runtime(home=home) as rt:
        rt.register(glovebox.build(SOURCE, home / "text-stats.wasm"))

    with glovebox.ProcessPool(processes=args.processes, home=home) as pool:
        pool.call("text-stats", {"text": "warm up"})  # every worker loads the compiled component on first use
        start = time.perf_counter()
        results = asyncio.run(fire(pool, args.calls))
        elapsed = time.perf_counter() - start

    outcomes = collections.Counter(result.code or "ok" for result, _ in results)
    workers = collections.Counter(result.meta.get("worker_pid") for result, _ in results)
    latencies = sorted(ms for _, ms in results)
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    fuel = sum(result.meta["fuel_used"] for result, _ in results)
    with glovebox.Runtime(home=home) as rt:
        verification = rt.audit.verify()

    print(f"calls:     {args.calls} at once over {args.processes} processes, in {elapsed:.2f} s")
    print(f"outcomes:  {dict(outcomes)}")
    print(f"rate:      {args.calls / elapsed:,.0f} calls/s")
    print(f"latency:   p50 {p50:.1f} ms, p99 {p99:.1f} ms (as the caller saw it, all {args.calls} waiting at once)")
    print(f"workers:   {len(workers)} ran calls ({', '.join(str(n) for n in sorted(workers.values()))} each)")
    print(f"fuel:      {fuel:,} units in all")
    print(f"audit:     {verification.rows} rows, chain ok={verification.ok}")


if __name__ == "__main__":
    main()
