"""An imported OpenAPI GET operation next to plain httpx and a hand-written C tool.

Run ``python bench/bench_import.py [--quick]``. All three GET the same small
JSON document from the same loopback server (a threaded ``http.server`` on
127.0.0.1, keep-alive off on the glovebox side as each call is a new connection):

* imported: ``Runtime.call`` of ``petstore-get-pet-by-id``, imported from
  ``tests/fixtures/petstore.yaml`` with ``glovebox.import_openapi`` and run under
  the policy fragment the import made (scope check, policy decision, input
  validation, the generic guest building the request, the grant check, DNS
  pinning, a bearer secret injected and scrubbed, output validation, audit);
* C tool: ``Runtime.call`` of the ``weather`` example (a hand-written C tool doing
  one GET), granted the same server with no policy (grants only);
* httpx: ``httpx.Client().get`` with a fresh client per request (a new connection,
  as glovebox) and, for reference, one keep-alive client. Both share one TLS context, as glovebox does.

Prints p50/p99 of each and the ratios. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import tomllib
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import yaml

import glovebox

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_http import _measure, httpx_baselines, print_rows, serve  # noqa: E402  (one timing loop for the HTTP benches)

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "tests" / "fixtures" / "petstore.yaml"
EXAMPLE = ROOT / "guest" / "examples" / "weather"
PET = json.dumps({"id": "1", "name": "Rex"}).encode()
WEATHER = json.dumps({"current_weather": {"temperature": 21.5, "windspeed": 7.25}}).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        body = WEATHER if self.path.startswith("/v1/forecast") else PET
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def _imported(tmp: Path, base: str, samples: int, warmup: int) -> list[float]:
    os.environ["PETSTORE_BEARERAUTH"] = "bench-token"
    home = tmp / "imported"
    with glovebox.Runtime(home=home) as rt:
        result = glovebox.import_openapi(rt, SPEC, server=f"{base}/v1")
    policy = {**result.policy, "principals": {"agent": {"scopes": ["petstore:read"]}}}
    (tmp / "policy.yaml").write_text(yaml.safe_dump(policy))
    with glovebox.Runtime(home=home, policy=tmp / "policy.yaml") as rt:
        check = rt.call("petstore-get-pet-by-id", {"petId": "1"}, principal="agent")
        assert check.ok and check.output == {"id": "1", "name": "Rex"}, check.to_dict()
        return _measure(lambda: rt.call("petstore-get-pet-by-id", {"petId": "1"}, principal="agent"), samples, warmup)


def _c_tool(tmp: Path, base: str, port: int, samples: int, warmup: int) -> list[float]:
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [port], "paths": ["/v1/forecast"], "allow_private": True}
    manifest = tomllib.loads((EXAMPLE / "glovebox.toml").read_text())
    manifest["capabilities"] = {"http": [rule]}
    wasm = glovebox.build(EXAMPLE / "tool.c", tmp / "weather.wasm")
    with glovebox.Runtime(home=tmp / "c", grants={"http": [rule]}) as rt:
        rt.register(wasm, manifest=manifest)
        value = {"latitude": 52.52, "longitude": 13.405, "api": base}
        check = rt.call("weather", value)
        assert check.ok, check.to_dict()
        return _measure(lambda: rt.call("weather", value), samples, warmup)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args()
    samples, warmup = (200, 20) if args.quick else (2000, 100)
    server, base = serve(_Handler)
    port = server.server_address[1]
    url = f"{base}/v1/pets/1"
    with tempfile.TemporaryDirectory() as tmp:
        imported = _imported(Path(tmp), base, samples, warmup)
        c_tool = _c_tool(Path(tmp), base, port, samples, warmup)

    plain, pooled = httpx_baselines(url, lambda body: body["name"] == "Rex", samples, warmup)
    server.shutdown()
    rows = [
        ("imported operation", imported),
        ("hand-written C tool", c_tool),
        ("httpx fresh client", plain),
        ("httpx keep-alive", pooled),
    ]
    print_rows(rows, "imported")
    return 0


if __name__ == "__main__":
    sys.exit(main())
