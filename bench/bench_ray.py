"""Runtime, ProcessPool(2) and RayRuntime(2 replicas) side by side, on a tiny tool and a 200 ms upstream.

Run ``python bench/bench_ray.py [--seconds S]``. One home, two tools, three contenders:

* runtime: ``Runtime.call`` in this process (the reference);
* pool-2p: ``ProcessPool(processes=2)``;
* ray-2r: ``RayRuntime(replicas=2)`` on a local Ray instance (2 CPUs, no dashboard),
  the replicas sharing the home (one node).

Tools: ``text-stats`` (the C example) and ``slow`` (the http_client test guest fetching
from a loopback server that answers after 200 ms). For each: p50/p99 of sequential
calls, and calls/s with enough caller threads to fill every slot (8 for text-stats,
64 for slow). The Ray overhead per call is ray-2r's p50 minus runtime's. Figures go to
stdout and ``bench/results/ray.json``. Nothing here is a test.

``--compare [--rounds N]`` times the tiny tool only, with every contender alive at
once and timed alternately in rounds (sequential calls for p50/p99, then 1 s of 8
callers each for calls/s): runtime, pool-2p, ray-before (the call path as it was:
the ``Artifact`` pickled into every call through ``Replica.call``, Ray's task events
kept), ray-held (``Replica.call_held`` through Ray: ``name@version`` and the digest,
no task events) and ray-after (the same over the replica's lane, as ``call`` goes on
one node). Figures go to ``bench/results/ray-compare.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import glovebox

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from bench_procs import timed_calls  # noqa: E402  (the benches' one timed caller loop)

ROOT = BENCH.parent
RESULTS = BENCH / "results" / "ray.json"
TINY = {"text": "The quick brown fox jumps over the lazy dog.\nend"}
UPSTREAM_S = 0.2


class _Slow(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        time.sleep(UPSTREAM_S)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a caller that gave up at its deadline


Call = Callable[[str, Any], glovebox.CallResult]


def _ok(result: glovebox.CallResult) -> glovebox.CallResult:
    if not result.ok or (result.output or {}).get("status") == "denied":
        raise SystemExit(f"failed call: {result.to_dict()}")
    return result


def latency(call: Call, tool: str, value: Any, samples: int) -> tuple[float, float]:
    """p50 and p99 in ms of ``samples`` sequential calls (after 5 to warm)."""
    for _ in range(5):
        _ok(call(tool, value))
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        _ok(call(tool, value))
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))]


def throughput(call: Call, tool: str, value: Any, threads: int, seconds: float) -> float:
    """Calls per second with ``threads`` callers for ``seconds``."""
    return timed_calls(lambda: _ok(call(tool, value)), threads, seconds) / seconds


def measure(call: Call, slow_input: Any, seconds: float) -> dict[str, float]:
    tiny_p50, tiny_p99 = latency(call, "text-stats", TINY, 300)
    slow_p50, slow_p99 = latency(call, "slow", slow_input, 10)
    return {
        "tiny_p50_ms": tiny_p50,
        "tiny_p99_ms": tiny_p99,
        "tiny_calls_per_s": throughput(call, "text-stats", TINY, 8, seconds),
        "slow_p50_ms": slow_p50,
        "slow_p99_ms": slow_p99,
        "slow_calls_per_s": throughput(call, "slow", slow_input, 64, seconds),
    }


def _call_of(runner: Any) -> Call:
    return lambda tool, value: runner.call(tool, value)


def _before(base: type) -> type:
    """``RayWorkers`` with the call path it had before ``Replica.call_held`` (for ``--compare``)."""
    import functools
    import uuid

    from glovebox.core._errors import ToolNotFound
    from glovebox.runtime._call import Call as Request
    from glovebox.scale import _procwire
    from glovebox.scale._raycluster import _Booked

    class Before(base):  # type: ignore[misc]
        def _submit(
            self,
            name: str,
            value: Any,
            principal: str | None,
            call_id: str | None = None,
            run: Any = None,
            *,
            lane: bool = False,
        ) -> Any:
            call_id = call_id or uuid.uuid4().hex
            here = Request(name, value, principal, call_id)
            try:
                info = self._driver.tool(name)
            except (ToolNotFound, ValueError):
                return functools.partial(self._local, here)
            slot = self._choose(info.digest)
            if slot is None:
                return functools.partial(self._recorder.refuse, here, self._overloaded())
            artifact = self._artifact(info)
            data = _procwire.encode(call_id, name, value, principal, None)
            ref = slot.actor.call.remote(data, artifact)  # the Artifact every call, task events on
            return _Booked(slot, ref, call_id, name, value, principal, info, data)

    return Before


def _through_ray(base: type) -> type:
    """``RayWorkers`` whose calls never take a lane: ``Replica.call_held`` through Ray (for ``--compare``)."""

    class ThroughRay(base):  # type: ignore[misc]
        def _lane(self, slot: Any) -> None:
            return None

    return ThroughRay


def _with_workers(runner: Any, variant: Callable[[type], type]) -> Any:
    """``runner`` (a RayRuntime) with its workers' call path replaced by ``variant`` of it."""
    runner._ray.__class__ = variant(type(runner._ray))
    return runner


def compare(rounds: int) -> None:
    """Every contender alive at once, timed alternately on the tiny tool (see the module)."""
    import ray

    from glovebox.ray import RayRuntime

    load_before = os.getloadavg()
    times: dict[str, list[float]] = {}
    rates: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        home = str(Path(tmp) / "home")
        with glovebox.Runtime(home=home) as rt:
            rt.register(glovebox.build(ROOT / "guest/examples/text-stats/tool.c", Path(tmp) / "ts.wasm"))
        ray.init(num_cpus=6, include_dashboard=False, log_to_driver=False)
        stack.callback(ray.shutdown)
        ray_options: dict[str, Any] = {"home": home, "threads": 32, "replica_options": {"num_cpus": 1}}
        contenders = {
            "runtime": stack.enter_context(glovebox.Runtime(home=home)),
            "pool-2p": stack.enter_context(glovebox.ProcessPool(processes=2, home=home, threads=32)),
            "ray-before": stack.enter_context(_with_workers(RayRuntime(2, **ray_options), _before)),
            "ray-held": stack.enter_context(_with_workers(RayRuntime(2, **ray_options), _through_ray)),
            "ray-after": stack.enter_context(RayRuntime(2, **ray_options)),
        }
        for name, runner in contenders.items():
            for _ in range(20):
                _ok(runner.call("text-stats", TINY))
            times[name], rates[name] = [], []
        for _ in range(rounds):
            for name, runner in contenders.items():
                for _ in range(50):
                    start = time.perf_counter()
                    _ok(runner.call("text-stats", TINY))
                    times[name].append((time.perf_counter() - start) * 1000)
        for _ in range(max(3, rounds // 5)):
            for name, runner in contenders.items():
                rates[name].append(throughput(_call_of(runner), "text-stats", TINY, 8, 1.0))
        chains = contenders["ray-after"].verify_audit()
    load_after = os.getloadavg()
    rows: dict[str, dict[str, float]] = {}
    for name in contenders:
        ordered = sorted(times[name])
        rows[name] = {
            "tiny_p50_ms": statistics.median(ordered),
            "tiny_p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
            "tiny_calls_per_s": statistics.median(rates[name]),
        }
    print(f"cores: {os.cpu_count()}  load average before {load_before[0]:.1f}, after {load_after[0]:.1f}")
    print(f"  {'':<11} {'tiny p50':>9} {'tiny p99':>9} {'tiny/s':>8}   ({rounds} rounds of 50 calls each)")
    for name, row in rows.items():
        print(f"  {name:<11} {row['tiny_p50_ms']:8.3f}m {row['tiny_p99_ms']:8.3f}m {row['tiny_calls_per_s']:8.0f}")
    before, after, pool = rows["ray-before"], rows["ray-after"], rows["pool-2p"]
    ratios = {
        "p50 ray-held / ray-before": rows["ray-held"]["tiny_p50_ms"] / before["tiny_p50_ms"],
        "p50 ray-after / ray-before": after["tiny_p50_ms"] / before["tiny_p50_ms"],
        "p50 ray-after / pool-2p": after["tiny_p50_ms"] / pool["tiny_p50_ms"],
        "calls/s ray-after / ray-before": after["tiny_calls_per_s"] / before["tiny_calls_per_s"],
        "calls/s ray-after / pool-2p": after["tiny_calls_per_s"] / pool["tiny_calls_per_s"],
        "p50 ray-after - runtime (ms)": after["tiny_p50_ms"] - rows["runtime"]["tiny_p50_ms"],
    }
    for name, value in ratios.items():
        print(f"  {name:<34} {value:8.3f}")
    print(f"  audit chains after the run: {[(c['home'][-20:], c['ok'], c['rows']) for c in chains]}")
    RESULTS.parent.mkdir(exist_ok=True)
    saved = {"figures": rows, "ratios": ratios, "load": {"before": load_before[0], "after": load_after[0]}}
    (RESULTS.parent / "ray-compare.json").write_text(json.dumps(saved, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="how long each throughput run lasts")
    parser.add_argument("--compare", action="store_true", help="the call path before and after, timed alternately")
    parser.add_argument("--rounds", type=int, default=20, help="rounds of --compare")
    args = parser.parse_args()
    if args.compare:
        compare(args.rounds)
        return
    import ray

    from glovebox.ray import RayRuntime

    server = _Server(("127.0.0.1", 0), _Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [port], "methods": ["GET"], "allow_private": True}
    grants = {"http": [rule]}
    slow_input = {"url": f"http://127.0.0.1:{port}/slow"}
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        home = str(Path(tmp) / "home")
        with glovebox.Runtime(home=home) as rt:
            rt.register(glovebox.build(ROOT / "guest/examples/text-stats/tool.c", Path(tmp) / "ts.wasm"))
            client = glovebox.build(ROOT / "tests/guests/http_client.c", Path(tmp) / "hc.wasm")
            rt.register(client, {"name": "slow", "capabilities": {"http": [rule]}})
        with glovebox.Runtime(home=home, grants=grants) as rt:
            figures["runtime"] = measure(_call_of(rt), slow_input, args.seconds)
        with glovebox.ProcessPool(processes=2, home=home, grants=grants, threads=32) as pool:
            figures["pool-2p"] = measure(_call_of(pool), slow_input, args.seconds)
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            options = {"num_cpus": 1}
            with RayRuntime(2, home=home, grants=grants, threads=32, replica_options=options) as cluster:
                figures["ray-2r"] = measure(_call_of(cluster), slow_input, args.seconds)
                chains = cluster.verify_audit()
        finally:
            ray.shutdown()
    server.shutdown()
    report(figures, chains)


def report(figures: dict[str, dict[str, float]], chains: list[dict[str, Any]]) -> None:
    print(f"cores: {os.cpu_count()}  load average: {os.getloadavg()[0]:.1f} (other work shares the cores)")
    print(f"  {'':<10} {'tiny p50':>9} {'tiny p99':>9} {'tiny/s':>8} {'slow p50':>9} {'slow p99':>9} {'slow/s':>8}")
    for name, row in figures.items():
        print(
            f"  {name:<10} {row['tiny_p50_ms']:8.3f}m {row['tiny_p99_ms']:8.3f}m {row['tiny_calls_per_s']:8.0f}"
            f" {row['slow_p50_ms']:8.1f}m {row['slow_p99_ms']:8.1f}m {row['slow_calls_per_s']:8.0f}"
        )
    base, pool, ray_ = figures["runtime"], figures["pool-2p"], figures["ray-2r"]
    ratios = {
        "ray overhead per tiny call (ms, p50 ray - runtime)": ray_["tiny_p50_ms"] - base["tiny_p50_ms"],
        "ray overhead per slow call (ms, p50 ray - runtime)": ray_["slow_p50_ms"] - base["slow_p50_ms"],
        "tiny calls/s ray-2r / runtime": ray_["tiny_calls_per_s"] / base["tiny_calls_per_s"],
        "tiny calls/s ray-2r / pool-2p": ray_["tiny_calls_per_s"] / pool["tiny_calls_per_s"],
        "slow calls/s ray-2r / runtime": ray_["slow_calls_per_s"] / base["slow_calls_per_s"],
        "slow calls/s ray-2r / pool-2p": ray_["slow_calls_per_s"] / pool["slow_calls_per_s"],
    }
    for name, value in ratios.items():
        print(f"  {name:<52} {value:8.3f}")
    print(f"  audit chains after the run: {[(c['home'][-20:], c['ok'], c['rows']) for c in chains]}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"figures": figures, "ratios": ratios, "load": os.getloadavg()[0]}, indent=2))


if __name__ == "__main__":
    main()
