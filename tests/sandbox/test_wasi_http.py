"""``wasi:http/outgoing-handler`` through the HTTP capability: a Rust component using the ``wasi`` crate's
wasi:http bindings (``tests/guests/typed/rust-http``), built here for ``wasm32-wasip2``, against a real
server on 127.0.0.1."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import glovebox
from tests.typedguests import TYPED, WASIP2, built_rust, dummy_component

pytestmark = [pytest.mark.system, pytest.mark.slow]

SECRET = "wasi-http-secret-7c1f"


class _Echo(http.server.BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []

    def _answer(self, status: int) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        headers = {k.lower(): v for k, v in self.headers.items()}
        _Echo.seen.append({"method": self.command, "path": self.path, "headers": headers, "body": body})
        data = json.dumps({"path": self.path, "body": body, "authorized": "authorization" in headers}).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.startswith("/ok/slow"):
            time.sleep(3)
        self._answer(200)

    def do_POST(self) -> None:
        self._answer(201)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def fetcher_wasm(cache_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_rust(TYPED / "rust-http", tmp_path_factory.mktemp("http") / "fetcher.wasm", cache_root, target=WASIP2)


def _rule(port: int) -> dict[str, Any]:
    return {"host": "127.0.0.1", "ports": [port], "schemes": ["http"], "allow_private": True}


def _runtime(tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch) -> glovebox.Runtime:
    monkeypatch.setenv("FETCHER_TOKEN", SECRET)
    grant = {
        "tool": "fetcher-*",
        "http": [{**_rule(port), "methods": ["GET", "POST"], "paths": ["/ok/**"]}],
        "secrets": [{"name": "token", "source": "FETCHER_TOKEN", "host": "127.0.0.1", "schemes": ["http"]}],
    }
    policy = glovebox.Policy.model_validate({"version": 1, "defaults": {"action": "allow"}, "grants": [grant]})
    return glovebox.Runtime(home=tmp_path / "home", policy=policy)


def _manifest(port: int) -> dict[str, Any]:
    return {"name": "fetcher", "capabilities": {"http": [{**_rule(port), "methods": ["*"], "paths": ["/**"]}]}}


def test_a_granted_host_answers_and_the_secret_stays_on_the_host(
    tmp_path: Path, fetcher_wasm: Path, server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _Echo.seen.clear()
    with _runtime(tmp_path, server, monkeypatch) as rt:
        rt.register_all(fetcher_wasm, manifest=_manifest(server))
        got = rt.call("fetcher-fetch", {"method": "GET", "url": f"http://127.0.0.1:{server}/ok/a?x=1"})
        assert got.ok, got.error
        status, rest = got.output.split("\n", 1)
        assert status == "200"
        body = json.loads(rest.split("\n\n", 1)[1])
        assert body == {"path": "/ok/a?x=1", "body": "", "authorized": True}
        assert SECRET not in got.output
        sent = _Echo.seen[-1]["headers"]
        assert sent["authorization"] == f"Bearer {SECRET}"  # added by the host
        assert sent["x-guest"] == "rust"  # the guest's own header went through
        assert [(e["method"], e["host"], e["status"]) for e in got.meta["egress"]] == [("GET", "127.0.0.1", 200)]
        [row] = [row for row in rt.audit.tail(5) if row["call_id"] == got.meta["call_id"]]
        assert "/ok/a" in row["egress"] and SECRET not in json.dumps(row)  # audited like http-fetch, scrubbed
        assert rt.audit.verify().ok
        posted = rt.call(
            "fetcher-fetch", {"method": "POST", "url": f"http://127.0.0.1:{server}/ok/p", "body": "ab" * 5000}
        )
        assert posted.ok and posted.output.startswith("201\n")
        assert _Echo.seen[-1]["body"] == "ab" * 5000  # a body written in chunks through a wasi:io stream


def test_a_host_path_or_method_not_granted_is_refused_before_the_network(
    tmp_path: Path, fetcher_wasm: Path, server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _Echo.seen.clear()
    with _runtime(tmp_path, server, monkeypatch) as rt:
        rt.register_all(fetcher_wasm, manifest=_manifest(server))
        for method, url in (
            ("GET", "http://example.com/ok/a"),
            ("GET", "http://localhost:1/ok/a"),
            ("GET", f"http://127.0.0.1:{server}/private"),
            ("DELETE", f"http://127.0.0.1:{server}/ok/a"),
        ):
            refused = rt.call("fetcher-fetch", {"method": method, "url": url})
            assert refused.error is not None and refused.error.code == "capability_denied", url
            assert refused.error.details["guest_message"] == "ErrorCode::HttpRequestDenied"
            assert refused.error.details["denials"][0]["capability"] == "http"
        smuggled = rt.call("fetcher-fetch", {"method": "GET", "url": f"http://127.0.0.1:{server}@example.com/ok/a"})
        assert smuggled.error is not None and smuggled.error.code == "guest_error"  # no userinfo in an authority
        assert smuggled.error.message == "authority"
        assert _Echo.seen == []


def test_without_an_http_grant_every_request_is_denied(tmp_path: Path, fetcher_wasm: Path, server: int) -> None:
    with glovebox.Runtime(home=tmp_path / "home") as rt:
        rt.register_all(fetcher_wasm, manifest=_manifest(server))
        refused = rt.call("fetcher-fetch", {"method": "GET", "url": f"http://127.0.0.1:{server}/ok/a"})
        assert refused.error is not None and refused.error.code in ("capability_denied", "permission_denied")


def test_a_private_address_is_refused_without_allow_private(
    tmp_path: Path, fetcher_wasm: Path, server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    grant = {"tool": "fetcher-*", "http": [{"host": "127.0.0.1", "ports": [server], "schemes": ["http"]}]}
    policy = glovebox.Policy.model_validate({"version": 1, "defaults": {"action": "allow"}, "grants": [grant]})
    with glovebox.Runtime(home=tmp_path / "home", policy=policy) as rt:
        rt.register_all(fetcher_wasm, manifest=_manifest(server))
        refused = rt.call("fetcher-fetch", {"method": "GET", "url": f"http://127.0.0.1:{server}/ok/a"})
        assert refused.error is not None and refused.error.code == "capability_denied"


def test_the_call_deadline_holds_across_a_request(
    tmp_path: Path, fetcher_wasm: Path, server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _runtime(tmp_path, server, monkeypatch) as rt:
        rt.register_all(fetcher_wasm, manifest={**_manifest(server), "limits": {"timeout_ms": 1000}})
        slow = rt.call("fetcher-fetch", {"method": "GET", "url": f"http://127.0.0.1:{server}/ok/slow"})
        assert slow.error is not None and slow.error.code == "timeout", slow.to_dict()
        assert slow.meta["duration_ms"] < 2900


def test_the_rest_of_wasi_is_deny_by_default_on_glovebox_s_own_host(tmp_path: Path, fetcher_wasm: Path) -> None:
    with glovebox.Runtime(home=tmp_path / "home") as rt:
        rt.register_all(fetcher_wasm, manifest={"name": "fetcher", "limits": {"timeout_ms": 5000}})
        connect = rt.call("fetcher-connect", {"address": "127.0.0.1:9"})
        assert connect.error is not None and connect.error.code == "guest_error"
        assert "ermission denied" in connect.error.message  # wasi:sockets answers access-denied
        for path in ("/etc/passwd", "../../etc/passwd", "/files/x"):
            read = rt.call("fetcher-read-file", {"path": path})
            assert read.error is not None and read.error.code == "guest_error", path  # nothing preopened
        shout = rt.call("fetcher-shout", {"text": "hi"})
        assert shout.output == 0  # no environment variable, no argument
        assert {"level": "info", "message": "hi"} in shout.meta["logs"]
        assert {"level": "warn", "message": "hi"} in shout.meta["logs"]  # stderr, unbuffered: one write a piece
        nap = rt.call("fetcher-nap", {"ms": 50})
        assert nap.ok and 50 <= nap.output < 2000  # the monotonic clock's pollables wait
        past = rt.call("fetcher-nap", {"ms": 60_000})
        assert past.error is not None and past.error.code == "timeout"  # a wait never outlasts the call


def test_a_component_serving_wasi_http_is_refused_with_the_reason(runtime: glovebox.Runtime, tmp_path: Path) -> None:
    wit = tmp_path / "wit"
    (wit / "deps" / "http").mkdir(parents=True)
    (wit / "deps" / "http" / "handler.wit").write_text(
        "package wasi:http@0.2.6;\ninterface incoming-handler { handle: func(url: string) -> string; }\n"
    )
    (wit / "world.wit").write_text(
        "package test:serve@0.1.0;\nworld serve { import wasi:http/incoming-handler@0.2.6; export go: func(); }\n"
    )
    component = dummy_component(wit, "serve", tmp_path / "serve.wasm")
    with pytest.raises(glovebox.InvalidArtifact, match="glovebox links only `wasi:http/types`") as caught:
        runtime.register_all(component)
    assert "outgoing-handler" in str(caught.value)
