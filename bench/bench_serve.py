"""Requests per second of ``glovebox serve`` with 1 and 2 server workers, alternated, as a ratio.

Run ``python bench/bench_serve.py [--seconds S] [--rounds N] [--connections C]``.
The tool is the C text-stats example on a fresh home; each round starts
``glovebox serve --workers N --processes 1`` (calls in each server process) for
N = 1 then 2 (the order alternates between rounds), waits until every worker
answers, warms it, then drives ``POST /v1/tools/text-stats/call`` with ``wrk``
(``make wrk`` installs it) over C keep-alive connections for S seconds, or,
without wrk, with this file's own generator (one process per core of raw
HTTP/1.1 on asyncio streams; it costs more CPU than wrk, so its ratios
understate). Every answer must be a 200 for its round to count. The load
generator shares the cores with the servers, so on 2 cores it takes part of
what a second worker could use; the load average is printed beside each round.
Afterwards the audit chain the workers wrote is verified. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

import glovebox

BENCH = Path(__file__).resolve().parent
SOURCE = BENCH.parent / "guest" / "examples" / "text-stats" / "tool.c"
RESULTS = BENCH / "results" / "serve.json"
BODY = json.dumps({"input": {"text": "The quick brown fox jumps over the lazy dog.\nend"}})
PATH = "/v1/tools/text-stats/call"
POLICY = f"""
version: 1
principals:
  agent:
    api_key_sha256: [{hashlib.sha256(b"agent-key").hexdigest()}]
defaults:
  action: allow
"""
WRK_SCRIPT = f"""
wrk.method = "POST"
wrk.body = {json.dumps(BODY)}
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer agent-key"
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _load() -> float:
    return os.getloadavg()[0]


class Server:
    """``glovebox serve --workers N`` in its own process, until closed."""

    def __init__(self, home: Path, policy: Path, workers: int) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [sys.executable, "-m", "glovebox", "--home", str(home), "--policy", str(policy), "serve"]
        argv += ["--workers", str(workers), "--processes", "1", "--port", str(self.port)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._ready(workers)

    def _ready(self, workers: int) -> None:
        """Wait until ``workers`` distinct processes answered, and warm each (engine, component, validator)."""
        seen: set[int] = set()
        deadline = time.monotonic() + 120
        while len(seen) < workers:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the server did not start")
            try:
                with httpx.Client(base_url=self.url, headers={"Authorization": "Bearer agent-key"}) as client:
                    pid = client.get("/healthz").json()["pid"]
                    for _ in range(50):
                        answer = client.post(PATH, content=BODY, headers={"Content-Type": "application/json"})
                        assert answer.json()["ok"], answer.text
                    seen.add(pid)
            except httpx.TransportError:
                time.sleep(0.1)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


def with_wrk(url: str, seconds: float, connections: int, tmp: Path) -> tuple[float, int]:
    """Requests/s and non-2xx answers, measured by wrk (one thread)."""
    script = tmp / "post.lua"
    script.write_text(WRK_SCRIPT)
    argv = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "-s", str(script), url + PATH]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1])  # type: ignore[index]
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors:.*", out)
    if errors:
        print("    wrk:", errors[0])
    return rate, int(bad[1]) if bad else 0


async def _connection(port: int, until: float, counts: list[int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = (
        f"POST {PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer agent-key\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n{BODY}"
    ).encode()
    while time.monotonic() < until:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        size = int(re.search(rb"(?i)content-length:\s*(\d+)", head)[1])  # type: ignore[index]
        await reader.readexactly(size)
        counts[0 if head.startswith(b"HTTP/1.1 200") else 1] += 1
    writer.close()


def _generator(port: int, until: float, connections: int, out: Any) -> None:
    counts = [0, 0]

    async def main() -> None:
        await asyncio.gather(*(_connection(port, until, counts) for _ in range(connections)))

    asyncio.run(main())
    out.put(counts)


def with_python(port: int, seconds: float, connections: int) -> tuple[float, int]:
    """Requests/s and non-200 answers from this file's generator (a process per core)."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = os.cpu_count() or 1
    until = time.monotonic() + seconds
    workers = [
        ctx.Process(target=_generator, args=(port, until, max(1, connections // procs), out)) for _ in range(procs)
    ]
    for proc in workers:
        proc.start()
    counts = [out.get() for _ in workers]
    for proc in workers:
        proc.join()
    return sum(c[0] for c in counts) / seconds, sum(c[1] for c in counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--python", action="store_true", help="use the Python generator even when wrk is present")
    args = parser.parse_args()
    use_wrk = shutil.which("wrk") is not None and not args.python
    rates: dict[int, list[float]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        policy, home = tmp / "policy.yaml", tmp / "home"
        policy.write_text(POLICY)
        wasm = glovebox.build(SOURCE, tmp / "text-stats.wasm")
        with glovebox.Runtime(home=home, policy=policy) as rt:
            rt.register(wasm)
        print(f"generator: {'wrk -t1' if use_wrk else 'python'}, {args.connections} connections, {args.seconds} s")
        print("round  workers   requests/s   non-2xx   load average")
        for round_no in range(args.rounds):
            for workers in (1, 2) if round_no % 2 == 0 else (2, 1):
                server = Server(home, policy, workers)
                try:
                    if use_wrk:
                        rate, bad = with_wrk(server.url, args.seconds, args.connections, tmp)
                    else:
                        rate, bad = with_python(server.port, args.seconds, args.connections)
                finally:
                    server.close()
                rates[workers].append(rate)
                print(f"{round_no + 1:<6} {workers:<9} {rate:10,.0f}   {bad:7}   {_load():.1f}")
                if bad:
                    raise SystemExit("answers that were not 200: the figures do not count")
        with glovebox.Runtime(home=home) as rt:
            verified = rt.audit.verify()
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    print(f"median requests/s: 1 worker {one:,.0f}, 2 workers {two:,.0f}")
    per_round = ", ".join(f"{b / a:.2f}" for a, b in zip(rates[1], rates[2], strict=True))
    print(f"2 workers ÷ 1: {two / one:.2f}x (per round {per_round};")
    print(f"  target >= 1.8x on 2 cores); cores: {os.cpu_count()}; load average now {_load():.1f}")
    print(f"audit chain after both: ok={verified.ok} rows={verified.rows}")
    RESULTS.parent.mkdir(exist_ok=True)
    report = {"rates": rates, "ratio": two / one, "generator": "wrk" if use_wrk else "python"}
    RESULTS.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
