"""Fixtures for code mode: a home with real tools, a policy, and an upstream that counts its hits."""

from __future__ import annotations

import json
import threading
import tomllib
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import glovebox

EXAMPLES = Path(__file__).resolve().parents[2] / "guest" / "examples"


def send_hit(handler: BaseHTTPRequestHandler, hit: int) -> None:
    """Answer ``{"path", "hit"}`` as JSON; a caller killed meanwhile closes the connection."""
    body = json.dumps({"path": handler.path, "hit": hit}).encode()
    try:
        handler.send_response(200)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
    except (BrokenPipeError, ConnectionResetError):  # the caller was killed meanwhile
        handler.close_connection = True


def serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """A threading HTTP server of ``handler`` on a free 127.0.0.1 port, serving on a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


class HitCounter:
    """An HTTP server on 127.0.0.1 counting the requests each path received.

    A request to ``/hold/...`` is counted, then waits until ``release`` is set
    (a test kills the process that sent it meanwhile).
    """

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.held = threading.Event()
        self.release = threading.Event()
        counter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                counter.hits[self.path] += 1
                if self.path.startswith("/hold/"):
                    counter.held.set()
                    counter.release.wait(30)
                send_hit(self, counter.hits[self.path])

            def log_message(self, *args: Any) -> None:
                pass

        self.server, self.thread = serve(Handler)
        self.port = self.server.server_address[1]

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def run_policy(port: int) -> str:
    """agent may call text-stats (text:read), calc and hc; hc-approve only once approved;
    primes is hidden from agent; outsider lacks text:read; admin approves."""
    return f"""
version: 1
principals:
  agent: {{scopes: [text:read]}}
  outsider: {{scopes: []}}
  admin: {{scopes: [text:read, glovebox:approve]}}
defaults:
  action: block
rules:
  - tool: text-stats
    action: allow
  - tool: calc
    action: allow
  - tool: hc
    action: allow
  - tool: hc-approve
    action: require_approval
  - tool: primes
    principals: [admin]
    action: allow
grants:
  - tool: "hc*"
    http:
      - host: 127.0.0.1
        schemes: [http]
        ports: [{port}]
        methods: [GET]
        paths: ["/**"]
        allow_private: true
quotas:
  - tool: calc
    principals: [outsider]
    calls_per_minute: 2
"""


@pytest.fixture
def upstream() -> Iterator[HitCounter]:
    counter = HitCounter()
    yield counter
    counter.close()


@pytest.fixture
def run_home(
    tmp_path: Path, upstream: HitCounter, build_example: Callable[[str], Path], build_guest: Callable[[str], Path]
) -> tuple[Path, Path]:
    """A home with text-stats (requiring text:read), calc, primes, hc and hc-approve, and the run policy."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(run_policy(upstream.port))
    home = tmp_path / "home"
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [upstream.port], "methods": ["GET"]}
    rule |= {"paths": ["/**"], "allow_private": True}
    with glovebox.Runtime(home=home, policy=policy) as rt:
        manifest = tomllib.loads((EXAMPLES / "text-stats" / "glovebox.toml").read_text())
        manifest["required_scopes"] = ["text:read"]
        rt.register(build_example("text-stats"), manifest)
        rt.register(build_example("calc"))
        rt.register(build_example("primes"))
        for name in ("hc", "hc-approve"):
            rt.register(build_guest("http_client"), manifest={"name": name, "capabilities": {"http": [rule]}})
    return home, policy


@pytest.fixture
def rt(run_home: tuple[Path, Path]) -> Iterator[glovebox.Runtime]:
    home, policy = run_home
    with glovebox.Runtime(home=home, policy=policy) as runtime:
        yield runtime


#: The timeout of the slow home's ``hc`` (and of each of its HTTP requests).
TOOL_TIMEOUT_MS = 30_000


class Sleeper:
    """An HTTP server on 127.0.0.1 that counts each request and answers ``/sleep`` only once released
    (at the end of the test, or after a minute)."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.release = threading.Event()
        sleeper = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                sleeper.hits[self.path] += 1
                if self.path == "/sleep":
                    sleeper.release.wait(60)
                send_hit(self, sleeper.hits[self.path])

            def log_message(self, *args: Any) -> None:
                pass

        self.server, _ = serve(Handler)
        self.port = self.server.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sleeper() -> Iterator[Sleeper]:
    server = Sleeper()
    yield server
    server.close()


@pytest.fixture
def slow_home(tmp_path: Path, sleeper: Sleeper, build_guest: Callable[[str], Path]) -> tuple[Path, Path]:
    """A home whose ``hc`` may wait 30 s on the sleeper (its timeout and its requests'), and the run policy."""
    policy = tmp_path / "policy.yaml"
    text = run_policy(sleeper.port)  # each HTTP request of hc may wait as long as the tool may
    text = text.replace("quotas:", f"    http_limits: {{request_timeout_ms: {TOOL_TIMEOUT_MS}}}\nquotas:", 1)
    policy.write_text(text)
    home = tmp_path / "home"
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [sleeper.port], "methods": ["GET"]}
    rule |= {"paths": ["/**"], "allow_private": True}
    manifest = {"name": "hc", "capabilities": {"http": [rule]}, "limits": {"timeout_ms": TOOL_TIMEOUT_MS}}
    with glovebox.Runtime(home=home, policy=policy) as rt:
        info = rt.register(build_guest("http_client"), manifest=manifest)
        assert info.manifest.limits.timeout_ms == TOOL_TIMEOUT_MS
    return home, policy
