"""Density on one host: many calls waiting on an upstream at once.

Run ``python bench/bench_density.py [--quick] [--calls N] [--in-flight N] [--max-running N] [--skip node]``.
The upstream is a separate asyncio process on 127.0.0.1 (so its sockets and
memory are not counted as ours): ``/d200/...`` answers after 200 ms,
``/hold/...`` answers when released, ``/count`` says how many requests wait.

1. **Burst** — ``--calls`` (default 1,000) requests that each wait 200 ms upstream,
   all started at once; wall time against the ideal (0.2 s):

   * glovebox: ``asyncio.gather`` of ``Runtime.acall`` of the ``weather`` example
     (a fresh sandbox per call, the grant check, a new connection);
   * python-threads: one plain thread per request doing the same GET with
     ``urllib.request`` (no sandbox, no checks);
   * node-worker: a fresh ``worker_threads`` Worker per request doing ``fetch``
     (``bench/node_density.js``).

2. **In flight** — ``--in-flight`` (default 10,000) ``acall``s held in ``/hold``
   at once: no errors, and this process's resident memory while they are all
   waiting upstream, minus before, per call (its thread, sandbox, connection
   and call state included).
   They are released all at once (the upstream answers every one of them
   together), and every call must end ``ok``.

Nothing here is a test; the figures go to stdout and ``bench/results/density.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "guest" / "examples" / "weather"
NODE_JS = Path(__file__).with_name("node_density.js")
RESULTS = Path(__file__).with_name("results") / "density.json"
BODY = json.dumps({"current_weather": {"temperature": 21.5, "windspeed": 7.25, "weathercode": 3}}).encode()
EXPECTED = {"temperature_c": 21.5, "windspeed_kmh": 7.25}
VALUE = {"latitude": 52.52, "longitude": 13.405}


# -- the upstream (its own process) ---------------------------------------------------------------


async def _upstream() -> None:
    releases = [asyncio.Event()]  # the last one holds new requests; /release sets it and starts another
    state = {"waiting": 0, "seen": 0}

    async def answer(writer: asyncio.StreamWriter, body: bytes) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        writer.write(head.encode() + b"Connection: close\r\n\r\n" + body)
        await writer.drain()
        writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        path = request.split(b" ", 2)[1].decode()
        if path == "/count":
            await answer(writer, json.dumps(state).encode())
            return
        if path == "/release":
            releases[-1].set()
            releases.append(asyncio.Event())
            await answer(writer, b"{}")
            return
        state["seen"] += 1
        state["waiting"] += 1
        if path.startswith("/hold/"):
            await releases[-1].wait()
        else:
            await asyncio.sleep(int(path.split("/")[1][1:]) / 1000)
        state["waiting"] -= 1
        try:
            await answer(writer, BODY)
        except ConnectionError:
            pass

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=16384)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


class Upstream:
    """The upstream process: its port, and its /count and /release controls."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--upstream"], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        self.base = f"http://127.0.0.1:{self.port}"

    def control(self, path: str) -> dict[str, int]:
        import urllib.request

        with urllib.request.urlopen(self.base + path, timeout=30) as answer:
            result: dict[str, int] = json.loads(answer.read())
            return result

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


# -- the contenders -------------------------------------------------------------------------------


def glovebox_burst(rt: Any, api: str, calls: int) -> tuple[float, int]:
    async def burst() -> list[Any]:
        return list(await asyncio.gather(*(rt.acall("weather", {**VALUE, "api": api}) for _ in range(calls))))

    started = time.perf_counter()
    results = asyncio.run(burst())
    wall = time.perf_counter() - started
    return wall, sum(1 for r in results if not (r.ok and r.output == EXPECTED))


def thread_burst(url: str, calls: int) -> tuple[float, int]:
    import urllib.request

    errors: list[BaseException] = []

    def fetch() -> None:
        try:
            with urllib.request.urlopen(url, timeout=30) as answer:
                assert json.loads(answer.read())["current_weather"]["temperature"] == 21.5
        except BaseException as exc:  # counted, not raised: a thread cannot raise to us
            errors.append(exc)

    started = time.perf_counter()
    threads = [threading.Thread(target=fetch) for _ in range(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started, len(errors)


def node_burst(url: str, calls: int) -> tuple[float, int] | None:
    node = shutil.which("node")
    if node is None:
        return None
    out = subprocess.run([node, str(NODE_JS), url, str(calls)], capture_output=True, text=True, check=True)
    figures = json.loads(out.stdout)
    return figures["wall_s"], figures["errors"]


def rss_bytes(pids: tuple[str, ...] = ("self",)) -> int:
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/statm") as statm:
            total += int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return total


def memory_maps(pids: tuple[str, ...] = ("self",)) -> int:
    """Memory mappings, summed over ``pids`` (Linux refuses a process more than ``vm.max_map_count``)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/maps") as maps:
            total += sum(1 for _ in maps)
    return total


def open_fds(pids: tuple[str, ...] = ("self",)) -> int:
    return sum(len(os.listdir(f"/proc/{pid}/fd")) for pid in pids)


def thread_count(pids: tuple[str, ...]) -> int:
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/status") as status:
            total += next(int(line.split()[1]) for line in status if line.startswith("Threads:"))
    return total


def in_flight(rt: Any, upstream: Upstream, n: int) -> dict[str, Any]:
    """Hold ``n`` acalls in /hold; RSS per call once all wait; then release and count errors.

    ``rt`` is a Runtime or a ProcessPool: memory, maps, descriptors and
    threads are summed over this process and the pool's workers.
    """
    api = f"{upstream.base}/hold"
    pids = ("self", *(str(pid) for pid in getattr(rt, "pids", [])))
    before, maps_before, fds_before = rss_bytes(pids), memory_maps(pids), open_fds(pids)
    threads_before = thread_count(pids)
    figures: dict[str, Any] = {"processes": len(pids)}

    async def run() -> list[Any]:
        calls = [asyncio.ensure_future(rt.acall("weather", {**VALUE, "api": api})) for _ in range(n)]
        started = time.perf_counter()
        while (await asyncio.to_thread(upstream.control, "/count"))["waiting"] < n:
            if any(c.done() for c in calls):
                break  # a call ended early: reported below as an error
            await asyncio.sleep(0.05)
        figures["all_waiting_s"] = time.perf_counter() - started
        figures["rss_delta_bytes"] = rss_bytes(pids) - before
        figures["threads"] = thread_count(pids) - threads_before
        figures["maps_per_call"] = (memory_maps(pids) - maps_before) / n
        figures["fds_per_call"] = (open_fds(pids) - fds_before) / n
        figures["in_flight"] = getattr(rt, "in_flight", None)
        await asyncio.to_thread(upstream.control, "/release")
        return list(await asyncio.gather(*calls))

    results = asyncio.run(run())
    errors = [r.to_dict()["error"] for r in results if not (r.ok and r.output == EXPECTED)]
    figures["errors"] = len(errors)
    figures["error_codes"] = sorted({e["code"] if e else "wrong output" for e in errors})
    figures["first_error"] = errors[0] if errors else None
    figures["rss_per_call_bytes"] = figures["rss_delta_bytes"] / n
    return figures


# -- main -----------------------------------------------------------------------------------------


def _setup(port: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The weather manifest and the grants, both allowing the loopback upstream."""
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [port], "paths": ["/**"], "allow_private": True}
    manifest = tomllib.loads((EXAMPLE / "glovebox.toml").read_text())
    manifest["capabilities"] = {"http": [rule]}
    manifest["limits"]["timeout_ms"] = 60_000
    return manifest, {"http": [rule], "http_limits": {"request_timeout_ms": 60_000}}


def _runtime(home: Path, wasm: Path, port: int, max_in_flight: int, max_running: int | None) -> Any:
    import glovebox

    manifest, grants = _setup(port)
    options = {} if max_running is None else {"max_running": max_running}
    rt = glovebox.Runtime(home=home, grants=grants, max_in_flight=max_in_flight, **options)
    rt.register(wasm, manifest=manifest)
    return rt


def pool_burst(
    home: Path, upstream: Upstream, api: str, calls: int, processes: int, held: int | None
) -> tuple[tuple[float, int], dict[str, Any] | None]:
    """The burst through ``ProcessPool(processes)`` on the home the Runtime registered the tool in,
    then, when ``held`` is given, that many calls held in flight across its workers."""
    import glovebox

    _, grants = _setup(upstream.port)
    most = max(calls, held or 0)
    with glovebox.ProcessPool(processes, home=home, grants=grants, threads=most, max_in_flight=most) as pool:
        glovebox_burst(pool, api, 50 * processes)  # warm: every worker, its engine and threads
        burst = glovebox_burst(pool, api, calls)
        return burst, (in_flight(pool, upstream, held) if held else None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller in-flight run (2,000)")
    parser.add_argument("--calls", type=int, default=1000, help="calls in the 200 ms burst")
    parser.add_argument("--in-flight", type=int, default=None, help="calls held at once (default 10,000)")
    parser.add_argument("--max-running", type=int, default=None, help="Runtime(max_running=...) (default: its own)")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1, help="ProcessPool size (burst)")
    parser.add_argument(
        "--skip", action="append", default=[], choices=["node", "threads", "inflight", "pool", "pool-inflight"]
    )
    args = parser.parse_args()
    held = args.in_flight or (2000 if args.quick else 10_000)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # a socket per call in flight

    import glovebox

    upstream = Upstream()
    report: dict[str, Any] = {"calls": args.calls, "held": held, "cpus": os.cpu_count()}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            wasm = glovebox.build(EXAMPLE / "tool.c", Path(tmp) / "weather.wasm")
            with _runtime(Path(tmp) / "home", wasm, upstream.port, max(held, args.calls), args.max_running) as rt:
                api = f"{upstream.base}/d200"
                glovebox_burst(rt, api, 50)  # warm: engine, compiled component, threads
                report["glovebox"] = glovebox_burst(rt, api, args.calls)
                if "inflight" not in args.skip:
                    report["in_flight"] = in_flight(rt, upstream, held)
            if "pool" not in args.skip:
                pool_held = held if "pool-inflight" not in args.skip else None
                burst, flight = pool_burst(Path(tmp) / "home", upstream, api, args.calls, args.processes, pool_held)
                report[f"glovebox_pool_{args.processes}"] = burst
                if flight is not None:
                    report["in_flight_pool"] = flight
        url = f"{upstream.base}/d200/v1/forecast?latitude=52.52&longitude=13.405&current_weather=true"
        if "threads" not in args.skip:
            report["python_threads"] = thread_burst(url, args.calls)
        if "node" not in args.skip:
            report["node_worker"] = node_burst(url, args.calls)
    finally:
        upstream.close()
    _print(report)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2))
    return 0


def _print(report: dict[str, Any]) -> None:
    calls = report["calls"]
    print(f"{calls} calls, each waiting 200 ms upstream, all at once (ideal 0.200 s; target ≤ 1 s):")
    print(f"  {'contender':<18}{'wall s':>9}{'× ideal':>9}{'errors':>8}")
    pools = [name for name in report if name.startswith("glovebox_pool_")]
    for name in ("glovebox", *pools, "python_threads", "node_worker"):
        figures = report.get(name)
        if figures:
            wall, errors = figures
            print(f"  {name:<18}{wall:>9.3f}{wall / 0.2:>9.2f}{errors:>8}")
    for key in ("in_flight", "in_flight_pool"):
        if report.get(key):
            _print_flight(report, report[key])


def _print_flight(report: dict[str, Any], flight: dict[str, Any]) -> None:
    if flight:
        where = f"{flight['processes']} processes" if flight["processes"] > 1 else "one process"
        print(f"{report['held']} calls in flight at once (held upstream, {where}), target ≤ 256 KB each:")
        waited, threads = flight["all_waiting_s"], flight["threads"]
        print(f"  errors {flight['errors']}  all waiting after {waited:.2f} s  threads {threads}")
        rss_mib, per_kb = flight["rss_delta_bytes"] / 2**20, flight["rss_per_call_bytes"] / 1024
        print(f"  RSS +{rss_mib:.1f} MiB = {per_kb:.1f} KB per call")
        maps, fds = flight["maps_per_call"], flight["fds_per_call"]
        print(f"  per call: {maps:.2f} memory maps (vm.max_map_count {_max_maps()}), {fds:.2f} file descriptors")
        if flight["first_error"]:
            print(f"  first error: {flight['first_error']}")


def _max_maps() -> str:
    try:
        return Path("/proc/sys/vm/max_map_count").read_text().strip()
    except OSError:
        return "unknown"


if __name__ == "__main__":
    if sys.argv[1:] == ["--upstream"]:
        asyncio.run(_upstream())
    else:
        sys.exit(main())
