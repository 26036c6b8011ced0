"""Overhead of a capability-checked fetch from a guest, next to a plain httpx request.

Run ``python bench/bench_http.py [--quick]``. Both contenders GET the same small
JSON document from the same loopback server (a threaded ``http.server`` on
127.0.0.1):

* glovebox: ``Runtime.call`` of the ``weather`` example, granted
  ``127.0.0.1`` with ``allow_private`` — a fresh instance, the grant check,
  DNS pinning, a new connection, secret scrubbing and JSON parsing in the guest;
* httpx: ``httpx.Client().get`` of the same URL with a fresh client per request
  (a new connection, as glovebox does not reuse connections across calls; one
  shared TLS context, as glovebox) and, for reference, one keep-alive client.

Prints p50/p99 latency of each and the ratio glovebox / plain httpx. Nothing here
is a test; nothing is hard-coded.
"""

from __future__ import annotations

import argparse
import json
import ssl
import statistics
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

import glovebox

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "guest" / "examples" / "weather"
BODY = json.dumps({"current_weather": {"temperature": 21.5, "windspeed": 7.25, "weathercode": 3}}).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as two writes

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: Any) -> None:
        pass


def serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    """A server on 127.0.0.1 answering with ``handler`` on a daemon thread, and its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _measure(fn: Callable[[], object], samples: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1e6)
    return times


def _pct(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args()
    samples, warmup = (200, 20) if args.quick else (2000, 100)

    server, base = serve(_Handler)
    port = server.server_address[1]
    url = f"{base}/v1/forecast?latitude=52.5200&longitude=13.4050&current_weather=true"
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [port], "paths": ["/v1/forecast"], "allow_private": True}
    manifest = tomllib.loads((EXAMPLE / "glovebox.toml").read_text())
    manifest["capabilities"] = {"http": [rule]}

    with tempfile.TemporaryDirectory() as tmp:
        wasm = glovebox.build(EXAMPLE / "tool.c", Path(tmp) / "weather.wasm")
        with glovebox.Runtime(home=Path(tmp) / "home", grants={"http": [rule]}) as rt:
            rt.register(wasm, manifest=manifest)
            value = {"latitude": 52.52, "longitude": 13.405, "api": base}
            check = rt.call("weather", value)
            assert check.ok and check.output == {"temperature_c": 21.5, "windspeed_kmh": 7.25}, check.to_dict()
            guest = _measure(lambda: rt.call("weather", value), samples, warmup)

    plain, pooled = httpx_baselines(url, lambda body: body["current_weather"]["temperature"] == 21.5, samples, warmup)
    server.shutdown()
    print_rows([("glovebox guest GET", guest), ("httpx fresh client", plain), ("httpx keep-alive", pooled)], "glovebox")
    return 0


def httpx_baselines(
    url: str, check: Callable[[Any], bool], samples: int, warmup: int
) -> tuple[list[float], list[float]]:
    """The same GET by httpx directly: a fresh client per request, then one keep-alive client."""
    tls = ssl.create_default_context()  # shared, as glovebox shares one (building one costs ms)

    def fresh() -> None:
        with httpx.Client(verify=tls) as client:
            assert check(client.get(url).json())

    plain = _measure(fresh, samples, warmup)
    with httpx.Client() as client:
        pooled = _measure(lambda: client.get(url).json(), samples, warmup)
    return plain, pooled


def print_rows(rows: list[tuple[str, list[float]]], subject: str) -> None:
    """p50, p99 and mean of each row, then the first row's ratios to every other."""
    print(f"{'contender':<22}{'p50 µs':>10}{'p99 µs':>10}{'mean µs':>10}")
    for name, times in rows:
        print(f"{name:<22}{_pct(times, 0.5):>10.0f}{_pct(times, 0.99):>10.0f}{statistics.fmean(times):>10.0f}")
    first = rows[0][1]
    for name, times in rows[1:]:
        ratio50 = _pct(first, 0.5) / _pct(times, 0.5)
        ratio99 = _pct(first, 0.99) / _pct(times, 0.99)
        print(f"ratio {subject} / {name}: p50 {ratio50:.2f}x, p99 {ratio99:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
