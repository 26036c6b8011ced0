"""Every scaling figure of issue 46 in one run, with the load average beside each.

Run ``python bench/bench_scale.py [--quick] [--skip NAME]``. In order, each part
alternating its own contenders:

* ``threads``: ``Runtime.call`` of the C text-stats tool on 1 then 2 threads of one
  Runtime, alternated for ``--rounds`` rounds (calls/s, 2T ÷ 1T; target ≥ 1.8×);
* ``procs``: ``bench_procs.py`` (``Runtime.call`` and ``ProcessPool(1)`` one call at a
  time, alternately; pool-1p and pool-2p throughput; targets pool-1p ≥ 0.8× runtime,
  pool-2p ≥ 1.8× pool-1p);
* ``pool``: ``bench_pool.py`` (``Runtime.call``, ``ProcessPool(1)`` and ``ProcessPool(2)``
  throughput, each in a fresh process, rotated, with the CPU per call of each process);
* ``serve``: ``bench_serve.py`` (``glovebox serve --workers 1`` and ``--workers 2``
  under wrk, alternated; target ≥ 1.8×);
* ``burst``: ``bench_burst.py`` (1,000 calls on a 200 ms upstream: httpx threads,
  ``Runtime.acall`` gathered, ``ProcessPool(2)``, rotated; target ≤ 1.5× threads);
* ``ray``: ``bench_ray.py --compare`` (tiny tool p50 through ``RayRuntime``; target
  ≤ 1.5 ms).

The sub-benches print their own tables; this prints each one's output as it
comes and the load average before and after it. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import glovebox

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from bench_procs import timed_calls  # noqa: E402  (the benches' one timed caller loop)

SOURCE = BENCH.parent / "guest" / "examples" / "text-stats" / "tool.c"
INPUT = {"text": "The quick brown fox jumps over the lazy dog.\nend"}
PARTS = ("threads", "procs", "pool", "serve", "burst", "ray")


def _load() -> str:
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def threads(seconds: float, rounds: int) -> None:
    """calls/s of one Runtime on 1 and 2 threads, alternated."""
    with tempfile.TemporaryDirectory() as tmp:
        wasm = glovebox.build(SOURCE, Path(tmp) / "text-stats.wasm")
        with glovebox.Runtime(home=Path(tmp) / "home") as rt:
            rt.register(wasm)
            for _ in range(500):
                rt.call("text-stats", INPUT)
            rates: dict[int, list[float]] = {1: [], 2: []}
            for r in range(rounds):
                for n in (1, 2) if r % 2 == 0 else (2, 1):
                    rates[n].append(timed_calls(lambda: rt.call("text-stats", INPUT), n, seconds) / seconds)
                    print(f"  round {r + 1} {n} thread(s): {rates[n][-1]:8,.0f} calls/s  ({_load()})", flush=True)
    one, two = sorted(rates[1])[len(rates[1]) // 2], sorted(rates[2])[len(rates[2]) // 2]
    print(f"  median: 1T {one:,.0f}/s, 2T {two:,.0f}/s, 2T / 1T {two / one:.2f}x (target >= 1.8x)")


def run(script: str, *args: str) -> None:
    subprocess.run([sys.executable, str(BENCH / script), *args], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter parts")
    parser.add_argument("--skip", choices=PARTS, action="append", default=[])
    args = parser.parse_args()
    seconds = "2" if args.quick else "4"
    parts = {
        "threads": lambda: threads(float(seconds), 2 if args.quick else 4),
        "procs": lambda: run("bench_procs.py", "--seconds", seconds, "--paired", "500" if args.quick else "2000"),
        "pool": lambda: run("bench_pool.py", "--seconds", seconds, "--rounds", "2" if args.quick else "4"),
        "serve": lambda: run("bench_serve.py", "--seconds", seconds, "--rounds", "2" if args.quick else "4"),
        "burst": lambda: run("bench_burst.py", *(["--quick"] if args.quick else ["--rounds", "4"])),
        "ray": lambda: run("bench_ray.py", "--compare", "--rounds", "6" if args.quick else "20"),
    }
    for name, part in parts.items():
        if name in args.skip:
            continue
        print(f"== {name} ({_load()})", flush=True)
        part()
        print(f"== {name} done ({_load()})", flush=True)


if __name__ == "__main__":
    main()
