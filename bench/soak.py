"""Soak: 100,000 mixed calls, good and hostile, from threads and through the HTTP API; nothing grows.

Run ``python bench/soak.py [--quick]`` (``--quick``: 10,000 calls). Half the calls
go straight to ``Runtime.call`` from ``--threads`` threads; the other half go
through ``glovebox.servers.create_app`` under uvicorn (a thread of this
process), posted by ``--threads`` threads sharing one ``httpx.Client``. The mix
cycles through good tools (echo, text-stats) and hostile ones (an endless loop
with a 5 ms deadline, a malloc bomb, a 2 MiB output flood, invalid JSON output,
a denied HTTP fetch). Every 1,000 calls the process's resident memory, open
file descriptors and threads are sampled. At the end the audit log must hold
exactly one row per call and ``audit verify`` must pass.

Prints a table; figures go to ``bench/results/soak.json``. Not a test.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import socket
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
GUESTS = ROOT / "tests" / "guests"
RESULTS = BENCH / "results" / "soak.json"
PAGE = os.sysconf("SC_PAGE_SIZE")
SAMPLE_EVERY = 1_000

#: (tool name, source, manifest limits, input); the mix cycles through this list.
TOOLS: list[tuple[str, Path, dict[str, int], Any]] = [
    ("echo", GUESTS / "echo.c", {}, {"x": [1, 2, 3]}),
    ("text-stats", ROOT / "guest" / "examples" / "text-stats" / "tool.c", {}, {"text": "héllo wörld\n"}),
    ("loop", GUESTS / "loop_forever.c", {"timeout_ms": 5, "fuel": 10_000_000_000}, None),
    ("echo", GUESTS / "echo.c", {}, "again"),
    ("malloc-bomb", GUESTS / "malloc_bomb.c", {"memory_bytes": 4 << 20}, None),
    ("bad-json", GUESTS / "bad_json.c", {}, None),
    ("text-stats", ROOT / "guest" / "examples" / "text-stats" / "tool.c", {}, {"text": "a b c"}),
    ("http-denied", GUESTS / "http_denied.c", {}, None),
    ("output-flood", GUESTS / "output_flood.c", {}, None),
    ("echo", GUESTS / "echo.c", {}, 42),
]


class Sampler:
    """Counts calls and samples RSS, file descriptors and threads every ``SAMPLE_EVERY`` calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.phase = ""
        self.codes: Counter[str] = Counter()
        self.samples: list[dict[str, float]] = []
        self._lock = threading.Lock()
        self._start = time.monotonic()

    def record(self, tool: str, code: str | None) -> None:
        with self._lock:
            self.calls += 1
            self.codes[f"{tool}:{code or 'ok'}"] += 1
            if self.calls % SAMPLE_EVERY == 0:
                self.samples.append({"phase": self.phase, **sample(self.calls, time.monotonic() - self._start)})


def sample(calls: int, elapsed: float) -> dict[str, Any]:
    rss = int(Path("/proc/self/statm").read_text().split()[1]) * PAGE
    status = Path("/proc/self/status").read_text()
    threads = int(status.split("Threads:")[1].split()[0])
    return {
        "calls": calls,
        "seconds": round(elapsed, 1),
        "rss_mib": round(rss / 2**20, 1),
        "fds": len(os.listdir("/proc/self/fd")),
        "threads": threads,
        "py_threads": threading.active_count(),
    }


def register_all(rt: Any, work: Path) -> None:
    import glovebox

    done: set[str] = set()
    for name, source, limits, _input in TOOLS:
        if name not in done:
            wasm = glovebox.build(source, work / f"{name}.wasm")
            rt.register(wasm, manifest={"name": name, "limits": limits})
            done.add(name)


def run_threads(count: int, threads: int, one: Callable[[int], None]) -> None:
    """Run ``one(i)`` for i in range(count), spread over ``threads`` threads."""
    counter = itertools.count()

    def worker() -> None:
        while (i := next(counter)) < count:
            one(i)

    with ThreadPoolExecutor(threads) as pool:
        for future in [pool.submit(worker) for _ in range(threads)]:
            future.result()


def direct_phase(rt: Any, count: int, threads: int, sampler: Sampler) -> None:
    def one(i: int) -> None:
        name, _src, _limits, value = TOOLS[i % len(TOOLS)]
        sampler.record(name, rt.call(name, value).code)

    run_threads(count, threads, one)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_phase(rt: Any, count: int, threads: int, sampler: Sampler) -> None:
    import httpx
    import uvicorn

    from glovebox.servers import create_app

    port = free_port()
    config = uvicorn.Config(create_app(rt, insecure_anonymous=True), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    limits = httpx.Limits(max_connections=threads, max_keepalive_connections=threads)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", limits=limits, timeout=30) as client:

        def one(i: int) -> None:
            name, _src, _limits, value = TOOLS[i % len(TOOLS)]
            body = client.post(f"/v1/tools/{name}/call", json={"input": value}).json()
            sampler.record(name, None if body["ok"] else body["error"]["code"])

        run_threads(count, threads, one)
    server.should_exit = True
    thread.join(10)


def table(samples: list[dict[str, Any]]) -> str:
    keys = ["phase", "calls", "seconds", "rss_mib", "fds", "threads", "py_threads"]
    lines = ["".join(f"{k:>12}" for k in keys)]
    step = max(1, len(samples) // 20)
    shown = samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else [])
    lines += ["".join(f"{s[k]:>12}" for k in keys) for s in shown]
    return "\n".join(lines)


def flatness(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """RSS from the third sample (caches and pools warm) to the last; fds and threads, min and max."""
    settled = samples[min(2, len(samples) - 1)]
    return {
        "rss_mib_settled_last_max": [settled["rss_mib"], samples[-1]["rss_mib"], max(s["rss_mib"] for s in samples)],
        "fds_min_max": [min(s["fds"] for s in samples), max(s["fds"] for s in samples)],
        "threads_min_max": [min(s["threads"] for s in samples), max(s["threads"] for s in samples)],
    }


def summary(sampler: Sampler, audit: Any, seconds: float) -> dict[str, Any]:
    phases = {p: flatness([s for s in sampler.samples if s["phase"] == p]) for p in ("direct", "http")}
    return {
        "calls": sampler.calls,
        "seconds": round(seconds, 1),
        "calls_per_s": round(sampler.calls / seconds),
        **{f"{p}_{k}": v for p, figures in phases.items() for k, v in figures.items()},
        "audit_rows": audit.rows,
        "audit_rows_equal_calls": audit.rows == sampler.calls,
        "audit_verify_ok": audit.ok,
        "codes": dict(sorted(sampler.codes.items())),
    }


def main(argv: list[str] | None = None) -> None:
    import glovebox

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 calls instead of 100,000")
    parser.add_argument("--threads", type=int, default=4, help="caller threads per phase")
    args = parser.parse_args(argv)
    total = 10_000 if args.quick else 100_000
    work = Path(tempfile.mkdtemp(prefix="gb-soak-"))
    sampler = Sampler()
    start = time.monotonic()
    with glovebox.Runtime(home=work / "home") as rt:
        register_all(rt, work)
        sampler.phase = "direct"
        direct_phase(rt, total // 2, args.threads, sampler)
        sampler.phase = "http"
        http_phase(rt, total - total // 2, args.threads, sampler)
        seconds = time.monotonic() - start
        audit = rt.audit.verify()
    result = summary(sampler, audit, seconds)
    print(table(sampler.samples))
    for key, value in result.items():
        print(f"{key}: {value}")
    RESULTS.parent.mkdir(exist_ok=True)
    host = {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version()}
    RESULTS.write_text(json.dumps({"host": host, **result, "samples": sampler.samples}, indent=2))
    if not (audit.ok and audit.rows == sampler.calls):
        raise SystemExit("the audit log does not hold exactly one verified row per call")


if __name__ == "__main__":
    main()
