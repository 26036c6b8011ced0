"""A GET through ``wasi:http/outgoing-handler`` next to the same GET through glovebox's ``http-fetch``.

Run ``python bench/bench_wasi_http.py [--quick]``. Both go through the HTTP capability
(grant check, DNS pinning, a new connection, secret scrubbing) to the same loopback server
as ``bench_http.py``; the difference is the guest's side:

* ``http-fetch``: the C ``weather`` example (glovebox's world, no WASI: the lean linker);
* ``wasi:http``: the Rust component of ``tests/guests/typed/rust-http`` (the ``wasi`` crate's
  bindings, ``wasm32-wasip2``), built here with cargo, on glovebox's own WASI host in Python
  (every ``wasi:io``/``wasi:http`` call a Python host function);
* plain httpx (a fresh client per request) for reference.

Prints p50/p99 of each and the ratios. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import glovebox  # noqa: E402
from bench_http import _Handler, _measure, httpx_baselines, print_rows, serve  # noqa: E402

ROOT = BENCH.parent
EXAMPLE = ROOT / "guest" / "examples" / "weather"
CRATE = ROOT / "tests" / "guests" / "typed" / "rust-http"


def build_rust(target_dir: Path) -> Path:
    """The wasi:http component, built by cargo for wasm32-wasip2 (a shared target dir keeps it warm)."""
    env = {**os.environ, "CARGO_TARGET_DIR": str(target_dir)}
    argv = ["cargo", "build", "--release", "--target", "wasm32-wasip2", "--manifest-path", str(CRATE / "Cargo.toml")]
    subprocess.run(argv, env=env, check=True, capture_output=True)
    return target_dir / "wasm32-wasip2" / "release" / "rust_http.wasm"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args()
    samples, warmup = (200, 20) if args.quick else (2000, 100)
    server, base = serve(_Handler)
    port = server.server_address[1]
    path = "/v1/forecast?latitude=52.5200&longitude=13.4050&current_weather=true"
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [port], "paths": ["/v1/forecast"], "allow_private": True}
    manifest = tomllib.loads((EXAMPLE / "glovebox.toml").read_text())
    manifest["capabilities"] = {"http": [rule]}
    rust = build_rust(Path.home() / ".cache" / "glovebox-bench" / "cargo-target")
    with tempfile.TemporaryDirectory() as tmp:
        weather = glovebox.build(EXAMPLE / "tool.c", Path(tmp) / "weather.wasm")
        with glovebox.Runtime(home=Path(tmp) / "home", grants={"http": [rule]}) as rt:
            rt.register(weather, manifest=manifest)
            rt.register_all(rust, manifest={"name": "wasihttp", "capabilities": {"http": [rule]}})
            value = {"latitude": 52.52, "longitude": 13.405, "api": base}
            assert rt.call("weather", value).ok
            request = {"method": "GET", "url": base + path}
            check = rt.call("wasihttp-fetch", request)
            assert check.ok and check.output.startswith("200\n"), check.to_dict()
            c_times = _measure(lambda: rt.call("weather", value), samples, warmup)
            wasi_times = _measure(lambda: rt.call("wasihttp-fetch", request), samples, warmup)
    plain, _ = httpx_baselines(base + path, lambda body: True, samples, warmup)
    server.shutdown()
    print_rows(
        [("wasi:http (Rust)", wasi_times), ("http-fetch (C)", c_times), ("httpx fresh client", plain)], "wasi:http"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
