"""A sandboxed stdio MCP server reaches the network only through the host's egress proxy.

The server (``servers/stdio_lab.py``) runs under bubblewrap with no network of
its own; the policy's ``grants.http`` rules for its tool are enforced by the
proxy (the matcher and SSRF defence of the wasm ``http`` capability), and what
the proxy saw during a call is the call's ``meta.egress``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.importers import import_mcp
from glovebox.policy import parse_policy
from glovebox.remote import _bwrap

pytestmark = [
    pytest.mark.system,
    pytest.mark.slow,
    pytest.mark.skipif(not _bwrap.available(), reason="bubblewrap is not installed or cannot make a sandbox here"),
]

LAB = Path(__file__).parent / "servers" / "stdio_lab.py"
PYTHON = str(Path(sys.executable).parent / "python")


def policy(port: int, tunnel_port: int) -> str:
    return f"""
version: 1
principals:
  agent: {{scopes: ["lab:call"]}}
rules:
  - {{tool: "*", action: allow}}
grants:
  - tool: "lab-*"
    principals: [agent]
    http:
      - {{host: 127.0.0.1, schemes: [http], ports: [{port}], methods: [GET], paths: ["/data"], allow_private: true}}
      - {{host: 127.0.0.1, schemes: [https], ports: [{tunnel_port}], allow_private: true}}
      - {{host: localhost, schemes: [http], ports: [{port}], methods: [GET], paths: ["/data"]}}
"""


async def hello(scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    host = dict(scope["headers"]).get(b"host", b"").decode()
    await send({"type": "http.response.body", "body": f"hello {scope['method']} {scope['path']} {host}".encode()})


def test_a_sandboxed_server_reaches_only_granted_hosts_and_only_through_the_proxy(
    runtime: glovebox.Runtime, serve_app: Any
) -> None:
    import_mcp(runtime, command=[PYTHON, str(LAB)], name="lab", sandbox="bwrap", timeout_ms=20_000)
    granted, other, tunnel = serve_app(hello), serve_app(hello), serve_app(hello)
    port, tunnel_port = int(granted.rsplit(":", 1)[1]), int(tunnel.rsplit(":", 1)[1])
    with glovebox.Runtime(home=runtime.home, policy=parse_policy(policy(port, tunnel_port))) as rt:

        def fetch(url: str, host: str = "") -> tuple[dict[str, Any], list[dict[str, Any]]]:
            done = rt.call("lab-fetch", {"url": url, "host": host}, principal="agent")
            assert done.ok, done.error
            egress = done.meta.get("egress", [])
            refused = [{"capability": "http", **{k: e[k] for k in ("method", "url", "reason")}} for e in egress
                       if e.get("error") == "denied"]  # fmt: skip
            assert done.meta.get("denials", []) == refused
            return done.output, egress

        # a granted host, port, method and path: through the proxy to the host's 127.0.0.1
        answer, egress = fetch(f"{granted}/data?q=1")
        assert answer == {"status": 200, "body": f"hello GET /data 127.0.0.1:{port}"}
        assert [(e["method"], e["url"], e.get("status"), e["via"]) for e in egress] == [
            ("GET", f"{granted}/data", 200, "proxy")
        ]
        # the upstream sees the checked name as Host, not another one the server wrote
        answer, egress = fetch(f"{granted}/data", host="internal.example")
        assert answer == {"status": 200, "body": f"hello GET /data 127.0.0.1:{port}"}
        # refused by the proxy: another path, another port, another host name, a name resolving to a private address
        for url, reason in [
            (f"{granted}/secret", "path /secret not allowed"),
            (f"{other}/data", f"port {other.rsplit(':', 1)[1]} not allowed"),
            (f"http://127.0.0.2:{port}/data", "host 127.0.0.2 not allowed"),
        ]:
            answer, egress = fetch(url)
            assert answer["status"] == 403 and reason in answer["body"], (url, answer)
            assert egress[0]["error"] == "denied" and reason in egress[0]["reason"]
        # https goes by CONNECT: a granted host and port opens a tunnel (the server here speaks no TLS) ...
        answer, egress = fetch(f"https://127.0.0.1:{tunnel_port}/")
        assert "error" in answer and egress[0]["method"] == "CONNECT" and egress[0]["status"] == 200
        # ... any other is refused before a connection is made
        answer, egress = fetch(f"https://127.0.0.1:{port}/data")
        assert "403" in answer["error"] and egress[0]["error"] == "denied"
        assert f"CONNECT to 127.0.0.1:{port} is not granted" in egress[0]["reason"]
        # a granted host name that resolves to a loopback address, without allow_private: the SSRF defence
        answer, egress = fetch(f"http://localhost:{port}/data")
        assert answer["status"] == 403 and "a loopback address" in answer["body"], answer
        assert egress[0]["error"] == "denied"
        # a direct connection, bypassing the proxy: the sandbox has no network
        for host in ("127.0.0.1", "1.1.1.1"):
            probe = rt.call("lab-probe", {"outside": "/nonexistent/x", "host": host, "port": port}, principal="agent")
            assert probe.ok and probe.output["connect"] != "ok", probe.output


def test_without_http_grants_the_sandboxed_server_has_no_proxy(runtime: glovebox.Runtime, serve_app: Any) -> None:
    import_mcp(runtime, command=[PYTHON, str(LAB)], name="lab", sandbox="bwrap", timeout_ms=20_000)
    granted = serve_app(hello)
    bare = "version: 1\nprincipals:\n  agent: {scopes: [\"lab:call\"]}\nrules:\n  - {tool: '*', action: allow}\n"
    with glovebox.Runtime(home=runtime.home, policy=parse_policy(bare)) as rt:
        done = rt.call("lab-fetch", {"url": f"{granted}/data"}, principal="agent")
        assert done.ok and "error" in done.output and "egress" not in done.meta
        seen = rt.call("lab-whoami", {}, principal="agent")
        assert not any(name.lower().endswith("_proxy") for name in seen.output["env"])


SECRET = "lab-s3cret-value"


def secret_policy(port: int) -> str:
    return f"""
version: 1
principals:
  agent: {{scopes: ["lab:call"]}}
rules:
  - {{tool: "*", action: allow}}
grants:
  - tool: "lab-*"
    principals: [agent]
    http:
      - {{host: 127.0.0.1, schemes: [http], ports: [{port}], methods: [GET], allow_private: true}}
    http_limits: {{max_requests: 2, max_response_bytes: 2000}}
    secrets:
      - {{name: lab, source: LAB_UPSTREAM_TOKEN, host: 127.0.0.1, schemes: [http]}}
"""


async def guarded(scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
    """Answers /echo with the Authorization header it got (so a leak would show), /big with 10 kB."""
    if scope["type"] != "http":
        return
    authorization = dict(scope["headers"]).get(b"authorization", b"").decode()
    body = ("x" * 10_000).encode() if scope["path"] == "/big" else f"got {authorization}".encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})


def test_the_proxy_adds_the_grants_secret_and_applies_its_http_limits(
    runtime: glovebox.Runtime, serve_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host adds the bearer secret the server never sees (the upstream's echo of it comes back scrubbed),
    a header of that name the server writes is replaced, and max_requests and max_response_bytes hold."""
    monkeypatch.setenv("LAB_UPSTREAM_TOKEN", SECRET)
    import_mcp(runtime, command=[PYTHON, str(LAB)], name="lab", sandbox="bwrap", timeout_ms=20_000)
    upstream = serve_app(guarded)
    port = int(upstream.rsplit(":", 1)[1])
    with glovebox.Runtime(home=runtime.home, policy=parse_policy(secret_policy(port))) as rt:
        done = rt.call(
            "lab-fetch_all", {"urls": [f"{upstream}/echo"], "authorization": "Bearer forged"}, principal="agent"
        )
        assert done.ok, done.error
        answer = done.output["result"] if isinstance(done.output, dict) and "result" in done.output else done.output
        # the upstream got the host's secret, not the server's header; the server got its echo scrubbed
        assert answer == [{"status": 200, "body": "got [REDACTED]"}], answer
        assert SECRET not in json.dumps(done.to_dict())
        seen = rt.call("lab-whoami", {}, principal="agent")
        assert SECRET not in json.dumps(seen.output) and "LAB_UPSTREAM_TOKEN" not in seen.output["env"]
        # http_limits.max_requests: 2 per call; the third is refused by the proxy (and recorded as refused)
        three = rt.call("lab-fetch_all", {"urls": [f"{upstream}/echo"] * 3}, principal="agent")
        answers = three.output["result"] if "result" in three.output else three.output
        assert [a.get("status") for a in answers] == [200, 200, 403], answers
        assert "max_requests" in answers[2]["body"]
        assert [e.get("status", e.get("error")) for e in three.meta["egress"]] == [200, 200, "denied"]
        # http_limits.max_response_bytes: an answer over it (to a request carrying the secret) is refused whole
        big = rt.call("lab-fetch_all", {"urls": [f"{upstream}/big"]}, principal="agent")
        answers = big.output["result"] if "result" in big.output else big.output
        assert answers[0].get("status") == 431 or "error" in answers[0], answers
        assert big.meta["egress"][0]["error"] == "too-large"
