"""The I/O burst: 1,000 calls of an HTTP tool waiting on a 200 ms upstream, three ways, alternated.

Run ``python bench/bench_burst.py [--quick] [--calls N] [--rounds N] [--processes N] [--cold] [--fresh]``.
The upstream is bench_density's asyncio process on 127.0.0.1 (``/d200/...``
answers after 200 ms, ``Connection: close``). Each round times, one after the
other and in a rotating order (so load drifts hit every contender alike):

* httpx-threads: one plain thread per request, each a fresh ``httpx.Client``
  (one shared TLS context) doing the GET and parsing the JSON; no sandbox, no
  checks: the floor for this machine;
* runtime: ``asyncio.gather`` of ``Runtime.acall`` of the ``weather`` example on
  one Runtime (a fresh sandbox per call, the grant check, address pinning, the
  deadline transport, secret scrubbing, the audit record);
* pool: the same through ``ProcessPool(--processes)`` (default 2) with a thread
  per call in each worker.

The rounds time the steady state: before them, one full burst on the Runtime
(timed and printed alone: its call threads are made while it runs, each
``Thread.start`` from the event loop's thread waiting for the new thread to get
the GIL from the calls already running) and one on the pool have grown their
thread pools to the burst's size, as a server's are after its first burst;
``--cold`` skips both, so round 1 makes the threads as before.

``--fresh`` times the other case, a Runtime's very first burst: each round, the
threads' burst and the first burst of a new Runtime opened on the home (no call
before it: it loads the component, imports the HTTP capability, opens the audit
log and starts its call threads on the way), alternately. The threads' baseline
starts a new thread per request every round, so both sides pay thread starts.

Prints each round's wall times with the load average beside them, and the CPU
time each burst cost per call (this process, plus the pool's workers for the
pool: a steadier figure than wall time on a loaded machine), then the median of
each contender and the ratios (runtime ÷ threads and pool ÷ threads, target
≤ 1.5× for both, DESIGN.md's figure). Nothing here is a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import ssl
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_density import EXAMPLE, EXPECTED, VALUE, Upstream, _setup  # noqa: E402


def httpx_threads(url: str, calls: int) -> tuple[float, int]:
    """``calls`` threads started at once, each a fresh httpx client doing one GET."""
    tls = ssl.create_default_context()
    errors: list[BaseException] = []

    def fetch() -> None:
        try:
            with httpx.Client(verify=tls, trust_env=False, timeout=60) as client:
                assert client.get(url).json()["current_weather"]["temperature"] == 21.5
        except BaseException as exc:  # counted, not raised: a thread cannot raise to us
            errors.append(exc)

    started = time.perf_counter()
    threads = [threading.Thread(target=fetch) for _ in range(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started, len(errors)


def cpu_s(pids: tuple[int, ...] = ()) -> float:
    """CPU seconds (user and system) of this process and of ``pids``."""
    times = os.times()
    total = times.user + times.system
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


#: The longest the event loop went without running its 1 ms heartbeat during the last ``gathered`` burst, s.
STALL = [0.0]


def gathered(rt: Any, api: str, calls: int) -> tuple[float, int]:
    """``calls`` acalls of the weather tool started at once on ``rt`` (a Runtime or a pool).

    A heartbeat task beside them measures the event loop's longest stall (``STALL``).
    """

    async def beat(done: asyncio.Event) -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            STALL[0] = max(STALL[0], now - last)
            last = now

    async def burst() -> list[Any]:
        STALL[0] = 0.0
        done = asyncio.Event()
        heart = asyncio.create_task(beat(done))
        await asyncio.sleep(0)
        try:
            return list(await asyncio.gather(*(rt.acall("weather", {**VALUE, "api": api}) for _ in range(calls))))
        finally:
            done.set()
            await heart

    started = time.perf_counter()
    results = asyncio.run(burst())
    wall = time.perf_counter() - started
    return wall, sum(1 for r in results if not (r.ok and r.output == EXPECTED))


def fresh_bursts(url: str, api: str, manifest: Any, grants: Any, calls: int, rounds: int) -> int:
    """Each round: ``calls`` plain threads, and the very first burst of a new Runtime (no call before it).

    The tool is registered once, in a Runtime that is then closed; each round's
    Runtime opens that home, so its first burst pays every first-call cost
    (engine, component load, audit and registry first reads, its call threads).
    The threads' baseline starts its ``calls`` threads each round too.
    """
    import glovebox

    walls: dict[str, list[float]] = {"threads": [], "fresh": []}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        wasm = glovebox.build(EXAMPLE / "tool.c", Path(tmp) / "weather.wasm")
        with glovebox.Runtime(home=home, grants=grants) as rt:
            rt.register(wasm, manifest=manifest)
        httpx_threads(url, 100)

        def fresh() -> tuple[float, int]:
            with glovebox.Runtime(home=home, grants=grants, max_in_flight=calls) as rt:
                return gathered(rt, api, calls)

        print(f"{calls} calls, each waiting 200 ms upstream, all at once: a new Runtime's first burst vs threads")
        heads = f"{'round':<7}{'contender':<10}{'wall s':>9}{'CPU ms/call':>13}{'errors':>8}{'stall s':>9}"
        print(f"{heads}   load average")
        for r in range(rounds):
            for name in ["threads", "fresh"] if r % 2 == 0 else ["fresh", "threads"]:
                load = " ".join(f"{x:.2f}" for x in os.getloadavg())
                before = cpu_s()
                wall, errors = httpx_threads(url, calls) if name == "threads" else fresh()
                cpu = (cpu_s() - before) * 1000 / calls
                walls[name].append(wall)
                stall = f"{STALL[0]:>9.3f}" if name == "fresh" else f"{'':>9}"
                print(f"{r + 1:<7}{name:<10}{wall:>9.3f}{cpu:>13.2f}{errors:>8}{stall}   {load}", flush=True)
    per_round = [f / t for f, t in zip(walls["fresh"], walls["threads"], strict=True)]
    ratio = statistics.median(walls["fresh"]) / statistics.median(walls["threads"])
    verdict = "met" if ratio <= 1.5 else "MISSED"
    rounds_text = ", ".join(f"{x:.2f}" for x in per_round)
    print(f"first burst ÷ threads: {ratio:.2f}× (per round {rounds_text}; target ≤ 1.5×: {verdict})")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two rounds")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 5, --quick 2)")
    parser.add_argument("--processes", type=int, default=2, help="ProcessPool size")
    parser.add_argument("--only", choices=["threads", "runtime", "pool"], action="append", default=[])
    parser.add_argument("--cold", action="store_true", help="warm with 100 calls only (threads made in round 1)")
    parser.add_argument(
        "--fresh", action="store_true", help="first bursts: each round a new Runtime's very first burst against threads"
    )
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 5)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # a socket per call in flight

    import glovebox

    upstream = Upstream()
    api = f"{upstream.base}/d200"
    url = f"{api}/v1/forecast?latitude=52.52&longitude=13.405&current_weather=true"
    manifest, grants = _setup(upstream.port)
    if args.fresh:
        try:
            return fresh_bursts(url, api, manifest, grants, args.calls, rounds)
        finally:
            upstream.close()
    names = args.only or ["threads", "runtime", "pool"]
    walls: dict[str, list[float]] = {name: [] for name in names}
    cpus: dict[str, list[float]] = {name: [] for name in names}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp) / "home"
            wasm = glovebox.build(EXAMPLE / "tool.c", Path(tmp) / "weather.wasm")
            most = args.calls
            with (
                glovebox.Runtime(home=home, grants=grants, max_in_flight=most) as rt,
                glovebox.ProcessPool(
                    args.processes, home=home, grants=grants, threads=most, max_in_flight=most
                ) as pool,
            ):
                rt.register(wasm, manifest=manifest)
                contenders = {
                    "threads": lambda: httpx_threads(url, args.calls),
                    "runtime": lambda: gathered(rt, api, args.calls),
                    "pool": lambda: gathered(pool, api, args.calls),
                }
                gathered(rt, api, 100)  # warm: engine, compiled component
                if "runtime" in names and not args.cold:  # the first full burst: the call threads are made as it runs
                    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
                    before = cpu_s()
                    wall, errors = gathered(rt, api, args.calls)
                    cpu = (cpu_s() - before) * 1000 / args.calls
                    print(f"first burst on a Runtime (threads made on the way): {wall:.3f} s, {cpu:.2f} ms CPU")
                    print(
                        f"  per call, errors {errors}, load average {load}; longest event-loop stall {STALL[0]:.3f} s"
                    )
                if args.cold:
                    print("--cold: the Runtime's and the pool's threads are made during round 1")
                else:  # steady state: a server's call threads exist after its first burst
                    gathered(rt, api, args.calls)
                    gathered(pool, api, args.calls)
                gathered(pool, api, 100 * args.processes)
                httpx_threads(url, 100)
                print(f"{args.calls} calls, each waiting 200 ms upstream, all at once (ideal 0.200 s)")
                print(f"{'round':<7}{'contender':<10}{'wall s':>9}{'CPU ms/call':>13}{'errors':>8}   load average")
                for r in range(rounds):
                    order = names[r % len(names) :] + names[: r % len(names)]
                    for name in order:
                        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
                        pids = tuple(pool.pids) if name == "pool" else ()
                        before = cpu_s(pids)
                        wall, errors = contenders[name]()
                        cpu = (cpu_s(pids) - before) * 1000 / args.calls
                        walls[name].append(wall)
                        cpus[name].append(cpu)
                        print(f"{r + 1:<7}{name:<10}{wall:>9.3f}{cpu:>13.2f}{errors:>8}   {load}", flush=True)
    finally:
        upstream.close()
    medians = {name: statistics.median(times) for name, times in walls.items()}
    print("median wall: " + ", ".join(f"{name} {wall:.3f} s" for name, wall in medians.items()))
    cpu_medians = {name: statistics.median(times) for name, times in cpus.items()}
    print("median CPU per call: " + ", ".join(f"{name} {cpu:.2f} ms" for name, cpu in cpu_medians.items()))
    if "threads" in medians:
        for name, target in (("runtime", 1.5), ("pool", 1.5)):
            if name in medians:
                per_round = [w / t for w, t in zip(walls[name], walls["threads"], strict=True)]
                ratio = medians[name] / medians["threads"]
                rounds_text = ", ".join(f"{x:.2f}" for x in per_round)
                verdict = "met" if ratio <= target else "MISSED"
                print(f"{name} ÷ threads: {ratio:.2f}× (per round {rounds_text}; target ≤ {target}×: {verdict})")
                cpu_ratio = cpu_medians[name] / cpu_medians["threads"]
                print(f"  CPU per call {name} ÷ threads: {cpu_ratio:.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
