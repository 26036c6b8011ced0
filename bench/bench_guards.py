"""What the guards cost a successful call, and what a breaker saves against a dead upstream.

Run ``python bench/bench_guards.py [--quick]``. Two parts, nothing here is a test:

1. **The success path.** ``Runtime.call`` of ``echo`` (``tests/guests/echo.c``)
   under four policies that allow it: no guards, ``retries`` (the tool declared
   idempotent, 3 attempts), a ``breaker`` (tool and host scopes), and ``checks``
   (a size bound and one forbidden pattern). The setups
   take turns, ``--rounds`` times, each leading a round in turn, so a load change on a shared machine hits them
   alike; p50 over every round's samples, with the ratio to no guards. Beside
   that, each guard's own work on a call that succeeds, timed alone (best of
   the rounds, in ns): ``Attempts.begin`` + ``next_wait`` for retries, and
   ``BreakerBoard.check`` + ``record`` of a closed breaker (the shared counter
   read, a dict lookup; nothing written) for the breaker.
2. **A dead upstream.** ``http_client`` (``tests/guests/http_client.c``) calls an
   upstream on 127.0.0.1 that answers every request with 503 after
   ``--dead-ms``; ``--calls`` calls (1,000 by default) with no breaker, then with
   a host breaker (5 failures open it for longer than the run): wall time of
   each, requests the upstream saw, and the time the breaker saved.

Figures go to stdout and ``bench/results/guards.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import timeit
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import glovebox
from glovebox.guards import BreakerBoard
from glovebox.model._result import CallResult
from glovebox.policy import decide, parse_policy
from glovebox.policy._guards import Breaker
from glovebox.runtime._retry import Attempts

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
ECHO = ROOT / "tests" / "guests" / "echo.c"
HTTP_CLIENT = ROOT / "tests" / "guests" / "http_client.c"
RESULTS = BENCH / "results" / "guards.json"
INPUT = {"query": "a tiny input", "n": 7}
POLICIES = {
    "none": {"version": 1, "defaults": {"action": "allow"}},
    "retries": {
        "version": 1,
        "defaults": {"action": "allow"},
        "guards": [{"tool": "echo", "idempotent": True, "retries": {"attempts": 3}}],
    },
    "breaker": {
        "version": 1,
        "defaults": {"action": "allow"},
        "guards": [{"tool": "echo", "breaker": {"failures": 5}}],
    },
    "checks": {
        "version": 1,
        "defaults": {"action": "allow"},
        "guards": [{"tool": "echo", "checks": {"max_output_bytes": 4096, "forbidden_patterns": ["\\d{16}"]}}],
    },
}


def success_path(home: Path, rounds: int, calls: int) -> dict[str, Any]:
    """p50 of ``Runtime.call`` per setup, the setups taking turns."""
    runtimes = {
        name: glovebox.Runtime(home=home, policy=parse_policy(json.dumps(doc))) for name, doc in POLICIES.items()
    }
    samples: dict[str, list[float]] = {name: [] for name in runtimes}
    try:
        for rt in runtimes.values():
            for _ in range(200):
                assert rt.call("echo", INPUT).ok
        names = list(runtimes)
        for turn in range(rounds):
            for name in names[turn % len(names) :] + names[: turn % len(names)]:  # each setup leads a round in turn
                rt = runtimes[name]
                for _ in range(calls):
                    started = time.perf_counter()
                    result = rt.call("echo", INPUT)
                    samples[name].append(time.perf_counter() - started)
                    assert result.ok
    finally:
        for rt in runtimes.values():
            rt.close()
    return {name: statistics.median(values) * 1e6 for name, values in samples.items()}


def guard_ns(home: Path, rounds: int) -> dict[str, float]:
    """Each guard's own work on a successful call, timed alone (ns, best of ``rounds``)."""
    with glovebox.Runtime(home=home, policy=parse_policy(json.dumps(POLICIES["retries"]))) as rt:
        decision = decide(rt.policy, "anonymous", rt.tool("echo"))
    ok = CallResult(ok=True, output=1, meta={})
    meta = {"call_id": "x"}

    def retries() -> None:
        attempts = Attempts(time.perf_counter())
        attempts.begin(decision, meta)
        attempts.next_wait(ok)

    board = BreakerBoard(home)
    settings = Breaker()

    def breaker() -> None:
        board.check("tool", "echo", settings)
        board.record("tool", "echo", settings, failed=False)

    try:
        number = 20_000
        return {
            name: min(timeit.repeat(job, number=number, repeat=rounds)) / number * 1e9
            for name, job in (("retries", retries), ("breaker", breaker))
        }
    finally:
        board.close()


class _Dead(BaseHTTPRequestHandler):
    delay_s = 0.005
    seen = 0
    lock = threading.Lock()

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        with _Dead.lock:
            _Dead.seen += 1
        time.sleep(self.delay_s)
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()


def dead_upstream(tmp: Path, calls: int, dead_ms: float) -> dict[str, Any]:
    """``calls`` calls of ``http_client`` to a dead upstream, without and with a host breaker."""
    _Dead.delay_s = dead_ms / 1000
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Dead)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    port = httpd.server_address[1]
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [port], "methods": ["GET"], "allow_private": True}
    wasm = glovebox.build(HTTP_CLIENT, tmp / "http_client.wasm")
    figures: dict[str, Any] = {}
    try:
        for name, guards in (
            ("no breaker", []),
            ("host breaker", [{"tool": "hc", "breaker": {"failures": 5, "open_ms": 3_600_000, "scopes": ["host"]}}]),
        ):
            document = {"version": 1, "defaults": {"action": "allow"}, "grants": [{"tool": "hc", "http": [rule]}]}
            home = tmp / name.replace(" ", "-")
            with glovebox.Runtime(home=home, policy=parse_policy(json.dumps({**document, "guards": guards}))) as rt:
                rt.register(wasm, manifest={"name": "hc", "capabilities": {"http": [rule]}})
                _Dead.seen = 0
                started = time.perf_counter()
                for _ in range(calls):
                    assert rt.call("hc", {"url": f"http://127.0.0.1:{port}/"}).ok
                figures[name] = {"seconds": time.perf_counter() - started, "upstream_requests": _Dead.seen}
    finally:
        httpd.shutdown()
        httpd.server_close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples (well under a minute)")
    parser.add_argument("--rounds", type=int, default=None, help="turns each setup takes")
    parser.add_argument("--calls", type=int, default=1000, help="calls against the dead upstream")
    parser.add_argument("--dead-ms", type=float, default=None, help="how long the dead upstream takes to answer 503")
    args = parser.parse_args()
    rounds = args.rounds or (5 if args.quick else 20)
    per_round = 200 if args.quick else 1000
    dead_ms = args.dead_ms if args.dead_ms is not None else (5.0 if args.quick else 20.0)
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        home = tmp / "home"
        wasm = glovebox.build(ECHO, tmp / "echo.wasm")
        with glovebox.Runtime(home=home) as rt:
            rt.register(wasm, manifest={"name": "echo"})
        p50 = success_path(home, rounds, per_round)
        alone = guard_ns(home, rounds)
        dead = dead_upstream(tmp, args.calls, dead_ms)
    print(f"success path: Runtime.call of echo, p50 over {rounds} rounds x {per_round} calls per setup")
    print(f"  {'setup':<10} {'p50 us':>9} {'ratio':>7} {'guard alone':>12}")
    for name, value in p50.items():
        own = f"{alone[name]:.0f} ns" if name in alone else "-"
        print(f"  {name:<10} {value:9.1f} {value / p50['none']:7.3f} {own:>12}")
    print(f"dead upstream: {args.calls} calls of http_client, each request answered 503 after {dead_ms:g} ms")
    for name, figure in dead.items():
        print(f"  {name:<13} {figure['seconds']:7.2f} s  {figure['upstream_requests']:5d} upstream requests")
    saved = dead["no breaker"]["seconds"] - dead["host breaker"]["seconds"]
    ratio = dead["no breaker"]["seconds"] / dead["host breaker"]["seconds"]
    print(f"  the breaker saved {saved:.2f} s ({ratio:.1f}x faster)")
    RESULTS.parent.mkdir(exist_ok=True)
    document = {"p50_us": p50, "guard_ns": alone, "dead_upstream": dead, "dead_ms": dead_ms, "python": sys.version}
    RESULTS.write_text(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
