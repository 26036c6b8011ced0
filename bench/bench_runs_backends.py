"""Code mode on a ProcessPool: where the program runs, measured.

Run ``python bench/bench_runs_backends.py [--quick]``. A program making 3 nested
calls of the TypeScript text-stats example, timed in alternating rounds in one
process (so load moves every figure alike):

- ``Runtime.run``: the run and its calls in this process;
- ``ProcessPool.run``: what glovebox does: the program runs in the pool's
  process, each nested call goes to a worker (3 pipe round trips);
- ``one call, pool - runtime``: what one round trip to a worker adds to a call.

Shipping the whole run to one worker instead would cost about ``Runtime.run``
plus one round trip (the run in the worker, its calls local to it): the
"whole run on a worker" estimate. The figures say what spreading the nested
calls over the workers costs against that. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from bench_runs import PROGRAM, TOOL  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    args = parser.parse_args()
    rounds = 40 if args.quick else 300
    import glovebox

    with tempfile.TemporaryDirectory(prefix="bench-runs-pool-") as tmp:
        home = Path(tmp) / "home"
        with glovebox.Runtime(home=home) as rt, glovebox.ProcessPool(2, home=home) as pool:
            rt.register(glovebox.build(TOOL, Path(tmp) / "ts.wasm"))
            text = "the quick brown fox jumps over the lazy dog"
            timed: dict[str, list[float]] = {"runtime run": [], "pool run": [], "runtime call": [], "pool call": []}
            jobs = {
                "runtime run": lambda: rt.run(PROGRAM, input={"text": text}),
                "pool run": lambda: pool.run(PROGRAM, input={"text": text}),
                "runtime call": lambda: rt.call("ts-text-stats", {"text": text}),
                "pool call": lambda: pool.call("ts-text-stats", {"text": text}),
            }
            for round_no in range(rounds + 5):
                for name, job in jobs.items():
                    started = time.perf_counter()
                    answer = job()
                    elapsed = time.perf_counter() - started
                    assert answer.ok, answer.to_dict()
                    if round_no >= 5:  # warm-up rounds
                        timed[name].append(elapsed * 1e6)
    p50 = {name: statistics.median(samples) for name, samples in timed.items()}
    trip = p50["pool call"] - p50["runtime call"]
    whole = p50["runtime run"] + trip
    print(f"load average {os.getloadavg()[0]:.1f}; {rounds} alternating rounds; p50 in us")
    for name in ("runtime run", "pool run", "runtime call", "pool call"):
        print(f"  {name:28}{p50[name]:10.0f}")
    print(f"  {'one round trip to a worker':28}{trip:10.0f}")
    print(f"  {'whole run on a worker (est.)':28}{whole:10.0f}")
    print(f"pool run / Runtime.run: {p50['pool run'] / p50['runtime run']:.2f}x")
    print(f"pool run / whole run on a worker (est.): {p50['pool run'] / whole:.2f}x")


if __name__ == "__main__":
    main()
