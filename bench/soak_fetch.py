"""Soak of the ``http-fetch`` host function: 20,000 fetches; resident memory must not grow.

Run ``python bench/soak_fetch.py [--calls N] [--body BYTES] [--headers N]``. One
thread calls the ``http_shapes`` test guest through ``Runtime.call``; each call
sends ``--headers`` headers and a ``--body``-byte request body to an upstream
on 127.0.0.1 (its own process) that answers with the same body and headers.
Every 1,000 calls the process's resident memory is sampled; after a warm-up
of 2,000 calls, growth past the first sample would be a value the host
functions leak (each fetch builds and hands over a dozen C-level values).
Also prints the CPU time per call. Not a test; figures go to stdout.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GUEST = ROOT / "tests" / "guests" / "http_shapes.c"
PAGE = os.sysconf("SC_PAGE_SIZE")
SAMPLE_EVERY = 1_000
WARM = 2_000


class _Mirror(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        for name, value in self.headers.items():
            if name.lower().startswith("x-"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)


def _upstream() -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Mirror)
    print(httpd.server_address[1], flush=True)
    httpd.serve_forever()


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--body", type=int, default=4096, help="request (and response) body bytes")
    parser.add_argument("--headers", type=int, default=8, help="request (and mirrored response) headers")
    args = parser.parse_args()

    import glovebox

    upstream = subprocess.Popen([sys.executable, __file__, "--upstream"], stdout=subprocess.PIPE, text=True)
    assert upstream.stdout is not None
    port = int(upstream.stdout.readline())
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [port], "paths": ["/**"]}
    rule |= {"methods": ["PUT"], "allow_private": True}
    value = {"url": f"http://127.0.0.1:{port}/m", "method": "PUT", "headers": args.headers, "body": args.body}
    samples: list[int] = []
    try:
        with tempfile.TemporaryDirectory() as tmp, glovebox.Runtime(home=tmp, grants={"http": [rule]}) as rt:
            wasm = glovebox.build(GUEST, Path(tmp) / "shapes.wasm")
            rt.register(wasm, manifest={"name": "shapes", "capabilities": {"http": [rule]}})
            failed = 0
            started, cpu = time.perf_counter(), time.process_time()
            for i in range(1, WARM + args.calls + 1):
                result = rt.call("shapes", value)
                failed += not (result.ok and result.output["body_len"] == args.body)
                if i == WARM:
                    started, cpu = time.perf_counter(), time.process_time()
                if i >= WARM and (i - WARM) % SAMPLE_EVERY == 0:
                    samples.append(rss_bytes())
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        upstream.kill()
        upstream.wait()
    mib = 1024 * 1024
    print(f"glovebox from {Path(glovebox.__file__).parent}")
    print(f"{args.calls} fetches ({args.headers} headers, {args.body}-byte body each way), {failed} failed")
    print(f"  per call: {wall / args.calls * 1e3:.3f} ms wall, {cpu / args.calls * 1e3:.3f} ms CPU")
    print(f"  RSS after warm-up {samples[0] / mib:.1f} MiB, at the end {samples[-1] / mib:.1f} MiB, "
          f"growth {(samples[-1] - samples[0]) / mib:+.1f} MiB; max {max(samples) / mib:.1f} MiB")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--upstream"]:
        _upstream()
    else:
        raise SystemExit(main())
