"""The http-fetch capability against real HTTP servers on 127.0.0.1.

The servers run in threads started by fixtures; every grant that reaches them
names 127.0.0.1 with ``allow_private`` explicitly. Each test asserts the exact
http-error kind the guest saw, what meta recorded, and — for refusals — that
the request never reached the server.
"""

from __future__ import annotations

import json
import logging
import socket
import socketserver
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

import httpx
import pytest
from wasmtime.component import Variant

import glovebox
from glovebox.capabilities._fetch import HttpCapability
from glovebox.sandbox._callstate import CallState

#: Every test here runs on the native core and on the pure-Python path (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("sandbox_path")

BuildGuest = Callable[[str], Path]
SECRET = "s3cret-T0KEN-never-shown"
#: How long /slow holds its answer at most (released at once when the test ends).
SLOW_SECONDS = 30.0


@dataclass
class Server:
    port: int
    seen: list[dict[str, Any]] = field(default_factory=list)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and answers with a sized body."""

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Handler(QuietHandler):
    server: _Server

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers)})
        path = self.path.split("?")[0]
        auth = self.headers.get("Authorization", "")
        if path == "/slow":
            self.server.release.wait(SLOW_SECONDS)
            self._reply(200, b"{}")
        elif path.startswith("/status/"):
            self._reply(int(path.split("/")[2]), b'{"error": "upstream says no"}')
        elif path == "/big":
            self._reply(200, b"x" * 100_000)
        elif path.startswith("/redirect/"):
            target = path[len("/redirect/") :]
            location = target if target.startswith("http") else "/" + target
            self._reply(302, b"", {"Location": location.replace("PORT", str(self.server.server_address[1]))})
        elif path == "/v1/forecast":
            weather = {"current_weather": {"temperature": 21.5, "windspeed": 7.25, "weathercode": 3}}
            self._reply(200, json.dumps(weather).encode(), {"Content-Type": "application/json"})
        elif path == "/echo":
            echoed = json.dumps({"auth": auth, "headers": dict(self.headers), "body": body.decode()}).encode()
            self._reply(200, echoed, {"X-Echo-Auth": auth, "Content-Type": "application/json"})
        else:
            self._reply(200, json.dumps({"method": self.command, "path": path}).encode())

    do_GET = do_POST = do_DELETE = _handle


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    seen: list[dict[str, Any]]
    release: threading.Event

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (timeout, too-large) is expected here


_S = TypeVar("_S", bound=socketserver.BaseServer)


@contextmanager
def in_thread(httpd: _S, release: Callable[[], object] | None = None) -> Iterator[_S]:
    """Serve ``httpd`` on a daemon thread until the block ends; then ``release`` (held requests), stop and close.

    The poll interval is short: ``shutdown()`` waits for the loop to notice, up to one interval.
    """
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        if release is not None:
            release()
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.seen = []
    httpd.release = threading.Event()
    with in_thread(httpd, httpd.release.set):
        yield Server(httpd.server_address[1], httpd.seen)


def local_rule(server: Server, **extra: Any) -> dict[str, Any]:
    return {
        "host": "127.0.0.1",
        "schemes": ["http"],
        "ports": [server.port],
        "methods": ["GET"],
        "paths": ["/**"],
        "allow_private": True,
        **extra,
    }


def make_runtime(home: Path, grants: dict[str, Any]) -> glovebox.Runtime:
    return glovebox.Runtime(home=home, grants=grants)


def client(
    home: Path,
    build_guest: BuildGuest,
    granted: list[dict[str, Any]],
    declared: list[dict[str, Any]] | None = None,
    limits: dict[str, Any] | None = None,
    **grants: Any,
) -> glovebox.Runtime:
    """A Runtime with the http_client guest registered as ``hc``."""
    rt = make_runtime(home, {"http": granted, **grants})
    manifest: dict[str, Any] = {"name": "hc", "capabilities": {"http": declared if declared is not None else granted}}
    if limits:
        manifest["limits"] = limits
    rt.register(build_guest("http_client"), manifest=manifest)
    return rt


def fetch(rt: glovebox.Runtime, url: str, method: str = "GET", **extra: str) -> glovebox.CallResult:
    result = rt.call("hc", {"method": method, "url": url, **extra})
    assert result.ok, result.to_dict()
    return result


def assert_denied(result: glovebox.CallResult, reason: str) -> None:
    assert result.output["status"] == "denied", result.output
    assert reason in result.output["reason"]
    [denial] = result.meta["denials"]
    assert denial["capability"] == "http"
    assert reason in denial["reason"]
    assert result.meta["egress"][-1]["error"] == "denied"


# -- the grant -------------------------------------------------------------------------------


def test_allowed_get(_isolated_env: Path, build_guest: BuildGuest, server: Server) -> None:
    with client(_isolated_env, build_guest, [local_rule(server)]) as rt:
        result = fetch(rt, server.url("/users/1?q=a"))
    assert result.output["status"] == "ok"
    assert result.output["http_status"] == 200
    assert json.loads(result.output["body"]) == {"method": "GET", "path": "/users/1"}
    assert "denials" not in result.meta
    [egress] = result.meta["egress"]
    assert egress["method"] == "GET"
    assert egress["host"] == "127.0.0.1"
    assert egress["path"] == "/users/1"
    assert egress["status"] == 200
    assert egress["bytes_in"] == len(result.output["body"])
    assert "q=a" not in json.dumps(result.meta)
    assert [s["path"] for s in server.seen] == ["/users/1?q=a"]


def test_denied_host(_isolated_env: Path, build_guest: BuildGuest, server: Server) -> None:
    declared = [local_rule(server), {"host": "api.example.test", "schemes": ["http"], "paths": ["/**"]}]
    with client(_isolated_env, build_guest, [local_rule(server)], declared) as rt:
        result = fetch(rt, "http://api.example.test/users/1")
    assert_denied(result, "host api.example.test not allowed (granted: 127.0.0.1)")
    assert server.seen == []


def test_read_allowed_delete_denied_on_the_same_url(
    _isolated_env: Path, build_guest: BuildGuest, server: Server
) -> None:
    granted = [local_rule(server, paths=["/users/*"])]
    declared = [local_rule(server, methods=["GET", "DELETE"], paths=["/users/*"])]
    with client(_isolated_env, build_guest, granted, declared) as rt:
        read = fetch(rt, server.url("/users/1"))
        delete = fetch(rt, server.url("/users/1"), method="DELETE")
    assert read.output["http_status"] == 200
    assert_denied(delete, f"method DELETE not allowed for {server.url('/users/1')} (granted: GET)")
    assert [s["method"] for s in server.seen] == ["GET"]


def test_method_outside_the_manifest_names_the_manifest(
    _isolated_env: Path, build_guest: BuildGuest, server: Server
) -> None:
    granted = [local_rule(server, methods=["*"])]
    with client(_isolated_env, build_guest, granted, [local_rule(server)]) as rt:
        result = fetch(rt, server.url("/users/1"), method="POST", body="{}")
    assert_denied(result, "method POST not allowed for")
    assert "(declared: GET)" in result.output["reason"]


def test_denied_path(_isolated_env: Path, build_guest: BuildGuest, server: Server) -> None:
    granted = [local_rule(server, paths=["/users/*"])]
    with client(_isolated_env, build_guest, granted, [local_rule(server)]) as rt:
        result = fetch(rt, server.url("/admin/users"))
        nested = fetch(rt, server.url("/users/1/keys"))
        dotted = fetch(rt, server.url("/users/../admin"))
    assert_denied(result, "path /admin/users not allowed for 127.0.0.1 (granted: /users/*)")
    assert_denied(nested, "path /users/1/keys not allowed")
    assert_denied(dotted, "dot segments")
    assert server.seen == []


def test_port_not_granted(_isolated_env: Path, build_guest: BuildGuest, server: Server) -> None:
    declared = [local_rule(server, ports=[server.port, server.port + 1])]
    with client(_isolated_env, build_guest, [local_rule(server)], declared) as rt:
        result = fetch(rt, f"http://127.0.0.1:{server.port + 1}/")
    assert_denied(result, f"port {server.port + 1} not allowed for 127.0.0.1 (granted: {server.port})")


def test_redirects_are_returned_unless_granted(_isolated_env: Path, build_guest: BuildGuest, server: Server) -> None:
    with client(_isolated_env, build_guest, [local_rule(server)]) as rt:
        result = fetch(rt, server.url("/redirect/users/2"))
    assert result.output["http_status"] == 302
    assert [s["path"] for s in server.seen] == ["/redirect/users/2"]


def test_redirect_followed_when_granted(_isolated_env: Path, build_guest: BuildGuest, server: Server) -> None:
    with client(_isolated_env, build_guest, [local_rule(server, follow_redirects=True)]) as rt:
        result = fetch(rt, server.url("/redirect/users/2"))
    assert result.output["http_status"] == 200
    assert json.loads(result.output["body"])["path"] == "/users/2"
    assert [s["path"] for s in server.seen] == ["/redirect/users/2", "/users/2"]


def test_redirect_to_a_denied_host(_isolated_env: Path, build_guest: BuildGuest, server: Server) -> None:
    with client(_isolated_env, build_guest, [local_rule(server, follow_redirects=True)]) as rt:
        result = fetch(rt, server.url("/redirect/http://evil.example.test:PORT/steal"))
    assert_denied(result, "host evil.example.test not allowed")
    assert len(server.seen) == 1


def test_redirect_to_a_denied_path(_isolated_env: Path, build_guest: BuildGuest, server: Server) -> None:
    granted = [local_rule(server, follow_redirects=True, paths=["/redirect/**"])]
    with client(_isolated_env, build_guest, granted) as rt:
        result = fetch(rt, server.url("/redirect/admin"))
    assert_denied(result, "path /admin not allowed")


# -- SSRF ---------------------------------------------------------------------------------------


def test_name_resolving_to_loopback_without_allow_private(
    _isolated_env: Path, build_guest: BuildGuest, server: Server
) -> None:
    rule = {"host": "localhost", "schemes": ["http"], "ports": [server.port], "paths": ["/**"]}
    with client(_isolated_env, build_guest, [rule]) as rt:
        result = fetch(rt, server.url("/users/1", host="localhost"))
    assert_denied(result, "host localhost resolves to ")
    assert "a loopback address; not granted" in result.output["reason"]
    assert server.seen == []


def test_private_allowed_on_only_one_side_is_refused(
    _isolated_env: Path, build_guest: BuildGuest, server: Server
) -> None:
    declared = [local_rule(server, allow_private=False)]
    with client(_isolated_env, build_guest, [local_rule(server)], declared) as rt:
        result = fetch(rt, server.url("/"))
    assert_denied(result, "host 127.0.0.1 resolves to 127.0.0.1, a loopback address")
    assert server.seen == []


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://user:pw@127.0.0.1:{port}/", "userinfo"),
        ("ftp://127.0.0.1:{port}/", "scheme ftp not allowed"),
        ("file:///etc/passwd", "scheme file not allowed"),
        ("http://127.0.0.2:{port}/", "host 127.0.0.2 not allowed"),
        ("http://[::ffff:127.0.0.1]:{port}/", "host ::ffff:7f00:1 not allowed"),
        ("http://127.0.0.1:{port}/a%2f..%2fadmin", "dot segments once decoded"),
        ("http://127.0.0.1:{port}/ a", "whitespace"),
    ],
)
def test_refused_urls(_isolated_env: Path, build_guest: BuildGuest, server: Server, url: str, reason: str) -> None:
    with client(_isolated_env, build_guest, [local_rule(server)]) as rt:
        result = fetch(rt, url.format(port=server.port))
    assert_denied(result, reason)
    assert server.seen == []


@pytest.mark.parametrize(
    ("name", "value"),
    [("X-Test", "a\r\nX-Injected: 1"), ("X-Test\r\nX-Injected", "1"), ("X-Test", "a\nb"), ("Host", "evil.test")],
)
def test_header_injection_is_refused(
    _isolated_env: Path, build_guest: BuildGuest, server: Server, name: str, value: str
) -> None:
    with client(_isolated_env, build_guest, [local_rule(server)]) as rt:
        result = fetch(rt, server.url("/echo"), header_name=name, header_value=value)
    assert result.output["status"] == "denied"
    assert "CR, LF" in result.output["reason"] or "set by the host" in result.output["reason"]
    assert server.seen == []


# -- limits -------------------------------------------------------------------------------------


def test_oversized_response(_isolated_env: Path, build_guest: BuildGuest, server: Server) -> None:
    with client(_isolated_env, build_guest, [local_rule(server)], http_limits={"max_response_bytes": 10_000}) as rt:
        result = fetch(rt, server.url("/big"))
    assert result.output == {"status": "too-large", "reason": "response body is over the 10000-byte limit"}
    assert result.meta["egress"][0]["error"] == "too-large"
    assert "denials" not in result.meta


def test_oversized_request_body(_isolated_env: Path, build_guest: BuildGuest, server: Server) -> None:
    rule = local_rule(server, methods=["POST"])
    with client(_isolated_env, build_guest, [rule], http_limits={"max_request_bytes": 10}) as rt:
        result = fetch(rt, server.url("/echo"), method="POST", body="x" * 11)
    assert result.output == {"status": "too-large", "reason": "request body is 11 bytes, over the 10-byte limit"}
    assert server.seen == []


def test_slow_server_past_the_deadline(_isolated_env: Path, build_guest: BuildGuest, server: Server) -> None:
    with client(_isolated_env, build_guest, [local_rule(server)], limits={"timeout_ms": 500}) as rt:
        result = rt.call("hc", {"url": server.url("/slow")})
    # /slow answers 200 only when released, after this test: a call that waited for it would be ok.
    assert not result.ok
    assert result.code == "timeout"
    assert result.error.details == {"timeout_ms": 500}  # type: ignore[union-attr]
    assert result.meta["egress"][0]["error"] == "timeout"


def test_request_timeout_is_returned_to_the_guest(_isolated_env: Path, build_guest: BuildGuest, server: Server) -> None:
    limits = {"request_timeout_ms": 300}
    with client(
        _isolated_env, build_guest, [local_rule(server)], limits={"timeout_ms": 3000}, http_limits=limits
    ) as rt:
        result = fetch(rt, server.url("/slow"))
    assert result.output == {"status": "timeout", "reason": "no answer within 300 ms"}


# -- secrets ------------------------------------------------------------------------------------


def test_secret_never_reaches_the_guest(
    _isolated_env: Path,
    build_guest: BuildGuest,
    server: Server,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("TEST_API_TOKEN", SECRET)
    secret = {"name": "api", "provider": "env", "source": "TEST_API_TOKEN", "host": "127.0.0.1", "schemes": ["http"]}
    caplog.set_level(logging.DEBUG)
    with client(_isolated_env, build_guest, [local_rule(server)], secrets=[secret]) as rt:
        result = fetch(rt, server.url("/echo"), header_name="Authorization", header_value="Bearer guest-made")
    assert server.seen[0]["headers"]["Authorization"] == f"Bearer {SECRET}"
    echoed = json.loads(result.output["body"])
    assert echoed["auth"] == "[REDACTED]"
    assert ["x-echo-auth", "[REDACTED]"] in result.output["headers"]
    envelope = json.dumps(result.to_dict())
    assert SECRET not in envelope
    assert SECRET not in caplog.text
    assert "guest-made" not in json.dumps(server.seen)


def test_secret_from_a_file_only_for_its_host(
    _isolated_env: Path, build_guest: BuildGuest, server: Server, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text(SECRET + "\n")
    secret = {"name": "api", "provider": "file", "source": str(token), "host": "api.example.test", "schemes": ["http"]}
    with client(_isolated_env, build_guest, [local_rule(server)], secrets=[secret]) as rt:
        result = fetch(rt, server.url("/echo"))
    assert "Authorization" not in server.seen[0]["headers"]
    assert json.loads(result.output["body"])["auth"] == ""


# -- configuration ------------------------------------------------------------------------------


def test_no_grant_means_denied(_isolated_env: Path, build_guest: BuildGuest, server: Server) -> None:
    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(build_guest("http_client"), manifest={"name": "hc", "capabilities": {"http": [local_rule(server)]}})
        result = fetch(rt, server.url("/"))
    assert_denied(result, "not granted")
    assert server.seen == []


def test_grants_file_from_the_environment(
    _isolated_env: Path, build_guest: BuildGuest, server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    grants = tmp_path / "grants.toml"
    grants.write_text(
        f'[[http]]\nhost = "127.0.0.1"\nschemes = ["http"]\nports = [{server.port}]\npaths = ["/**"]\n'
        "allow_private = true\n"
    )
    monkeypatch.setenv("GLOVEBOX_GRANTS", str(grants))
    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(build_guest("http_client"), manifest={"name": "hc", "capabilities": {"http": [local_rule(server)]}})
        result = fetch(rt, server.url("/users/1"))
    assert result.output["http_status"] == 200


def test_invalid_grants_file_names_the_file_and_field(tmp_path: Path) -> None:
    grants = tmp_path / "grants.json"
    grants.write_text(json.dumps({"http": [{"host": "*.com"}]}))
    with pytest.raises(glovebox.InvalidGrants, match=r"grants\.json: http\.0\.host: host pattern '\*\.com'") as info:
        glovebox.Runtime(home=tmp_path / "home", grants=grants)
    assert info.value.code == "invalid_grants"
    assert isinstance(info.value, glovebox.InvalidPolicy)
    assert info.value.details["file"] == str(grants)
    assert info.value.details["field"] == "http.0.host"


@pytest.mark.parametrize(
    ("name", "text", "field"),
    [
        ("grants.toml", '[[http]]\nhost = "api.example.com"\nverbs = ["GET"]\n', "http.0.verbs"),
        ("grants.toml", "[[http]\nhost = 1\n", "(syntax)"),
        ("grants.json", "[1, 2]", "(root)"),
        ("grants.json", "\udcff", "(file)"),
        ("missing.toml", None, "(file)"),
    ],
)
def test_bad_grants_files_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str | None, field: str
) -> None:
    grants = tmp_path / name
    if text is not None:
        grants.write_bytes(text.encode("utf-8", "surrogateescape"))
    monkeypatch.setenv("GLOVEBOX_GRANTS", str(grants))
    with pytest.raises(glovebox.InvalidGrants) as info:
        glovebox.Runtime(home=tmp_path / "home")
    assert info.value.message.startswith(f"invalid grants {grants}: {field}: ")
    assert info.value.details["field"] == field


def test_a_bad_grants_dict_is_refused_the_same_way(tmp_path: Path) -> None:
    with pytest.raises(glovebox.InvalidGrants, match=r"invalid grants \(dict\): http\.0\.ports: ports must be"):
        glovebox.Runtime(home=tmp_path / "home", grants={"http": [{"host": "a.example", "ports": [0]}]})


# -- the example tool ---------------------------------------------------------------------------


def test_weather_example_calls_a_json_api(
    _isolated_env: Path, build_example: BuildGuest, server: Server, tmp_path: Path
) -> None:
    wasm = build_example("weather")
    manifest = tomllib.loads((Path(__file__).parents[2] / "guest/examples/weather/glovebox.toml").read_text())
    assert manifest["capabilities"]["http"] == [
        {"host": "api.open-meteo.com", "methods": ["GET"], "paths": ["/v1/forecast"]}
    ]
    rule = local_rule(server, paths=["/v1/forecast"])
    manifest["capabilities"] = {"http": [rule]}
    value = {"latitude": 52.52, "longitude": 13.405, "api": server.url("")}
    with glovebox.Runtime(home=_isolated_env, grants={"http": [rule]}) as rt:
        rt.register(wasm, manifest=manifest)
        result = rt.call("weather", value)
    assert result.ok, result.to_dict()
    assert result.output == {"temperature_c": 21.5, "windspeed_kmh": 7.25}
    assert server.seen[0]["path"] == "/v1/forecast?latitude=52.5200&longitude=13.4050&current_weather=true"


def test_weather_example_without_a_grant(_isolated_env: Path, build_example: BuildGuest) -> None:
    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(build_example("weather"))
        result = rt.call("weather", {"latitude": 1, "longitude": 2})
    assert result.code == "capability_denied"
    assert result.error is not None
    assert "not granted" in result.error.message
    assert "weather API unreachable (denied)" in result.error.details["guest_message"]
    assert result.error.details["denials"][0]["capability"] == "http"


@pytest.fixture
def ts_weather(build_js: Callable[[Path], Path]) -> Path:
    return build_js(Path(__file__).parents[2] / "guest" / "examples" / "ts-weather" / "tool.ts")


def test_the_typescript_weather_example_calls_a_json_api(_isolated_env: Path, ts_weather: Path, server: Server) -> None:
    manifest = tomllib.loads(ts_weather.with_name("ts-weather.glovebox.toml").read_text())
    assert manifest["capabilities"]["http"] == [
        {"host": "api.open-meteo.com", "methods": ["GET"], "paths": ["/v1/forecast"]}
    ]
    rule = local_rule(server, paths=["/v1/forecast"])
    manifest["capabilities"] = {"http": [rule]}
    value = {"latitude": 52.52, "longitude": 13.405, "api": server.url("")}
    with glovebox.Runtime(home=_isolated_env, grants={"http": [rule]}) as rt:
        rt.register(ts_weather, manifest=manifest)
        result = rt.call("ts-weather", value)
    assert result.ok, result.to_dict()
    assert result.output == {"temperature_c": 21.5, "windspeed_kmh": 7.25}
    assert result.meta["logs"] == [{"level": "info", "message": "forecast for 52.5200,13.4050"}]
    assert server.seen[0]["path"] == "/v1/forecast?latitude=52.5200&longitude=13.4050&current_weather=true"


def test_the_typescript_weather_example_without_a_grant(_isolated_env: Path, ts_weather: Path) -> None:
    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(ts_weather)
        result = rt.call("ts-weather", {"latitude": 1, "longitude": 2})
    assert result.code == "capability_denied"
    assert result.error is not None
    assert result.error.details["guest_message"].startswith("http denied: ")
    assert result.error.details["denials"][0]["capability"] == "http"


JS_ECHO = """
import { http, HttpError } from "glovebox";


export default async function (input) {
  const posted = await http.post(input.url + "/echo", { hello: "wörld" }, { headers: { "X-Trace": "t-1" } });
  let refused = null;
  try {
    await http.fetch(input.url + "/echo", { method: "DELETE" });
  } catch (error) {
    refused = error instanceof HttpError ? error.kind : String(error);
  }
  return {
    status: posted.status,
    ok: posted.ok,
    type: posted.header("CONTENT-TYPE"),
    echoed: posted.json(),
    refused,
  };
}
"""


def test_the_javascript_helper_posts_json_and_reads_the_answer(
    _isolated_env: Path, build_js: Callable[[Path], Path], server: Server, tmp_path: Path
) -> None:
    src = tmp_path / "js_echo.js"
    src.write_text(JS_ECHO)
    rule = local_rule(server, methods=["POST"], paths=["/echo"])
    manifest = {"name": "js-echo", "capabilities": {"http": [rule]}}
    with glovebox.Runtime(home=_isolated_env, grants={"http": [rule]}) as rt:
        rt.register(build_js(src), manifest=manifest)
        result = rt.call("js-echo", {"url": server.url("")})
    assert result.ok, result.to_dict()
    output = result.output
    assert (output["status"], output["ok"], output["type"]) == (200, True, "application/json")
    assert json.loads(output["echoed"]["body"]) == {"hello": "wörld"}
    headers = {name.lower(): value for name, value in output["echoed"]["headers"].items()}
    assert (headers["content-type"], headers["x-trace"]) == ("application/json", "t-1")
    assert output["refused"] == "denied"  # DELETE is not granted: the host refuses, the tool catches it


# -- upstream failures --------------------------------------------------------------------------


def weather(home: Path, build_example: BuildGuest, rule: dict[str, Any], api: str) -> glovebox.CallResult:
    """Call the weather example against ``api`` with ``rule`` declared and granted."""
    manifest = tomllib.loads((Path(__file__).parents[2] / "guest/examples/weather/glovebox.toml").read_text())
    manifest["capabilities"] = {"http": [rule]}
    with glovebox.Runtime(home=home, grants={"http": [rule]}) as rt:
        rt.register(build_example("weather"), manifest=manifest)
        return rt.call("weather", {"latitude": 52.52, "longitude": 13.405, "api": api})


def test_a_tool_failing_after_a_5xx_is_an_upstream_error(
    _isolated_env: Path, build_example: BuildGuest, server: Server
) -> None:
    result = weather(_isolated_env, build_example, local_rule(server), server.url("/status/503"))
    assert result.code == "upstream_error"
    assert result.error is not None and result.error.retryable is True
    url = server.url("/status/503/v1/forecast")
    assert result.error.message == f"the tool failed after an upstream request failed (GET {url}): HTTP 503"
    assert result.error.details == {
        "upstream_failures": [{"capability": "http", "method": "GET", "url": url, "reason": "HTTP 503", "status": 503}],
        "guest_code": "guest_error",
        "guest_message": "weather API answered HTTP 503",
    }
    assert "latitude" not in json.dumps(result.to_dict()["error"])  # no query string
    assert result.meta["egress"][0]["status"] == 503


def test_a_tool_failing_after_a_4xx_is_its_own_error(
    _isolated_env: Path, build_example: BuildGuest, server: Server
) -> None:
    result = weather(_isolated_env, build_example, local_rule(server), server.url("/status/404"))
    assert result.code == "guest_error"
    assert result.error is not None and result.error.message == "weather API answered HTTP 404"


def test_a_tool_that_copes_with_a_5xx_is_ok(_isolated_env: Path, build_guest: BuildGuest, server: Server) -> None:
    with client(_isolated_env, build_guest, [local_rule(server)]) as rt:
        result = fetch(rt, server.url("/status/502"))
    assert result.output["http_status"] == 502
    assert result.meta["egress"][0]["status"] == 502


def test_tls_to_a_plain_http_port_is_an_upstream_error(
    _isolated_env: Path, build_example: BuildGuest, server: Server
) -> None:
    # An https rule for a port that speaks plain HTTP: the TLS handshake fails.
    rule = local_rule(server, schemes=["https"])
    api = f"https://127.0.0.1:{server.port}"
    result = weather(_isolated_env, build_example, rule, api)
    assert result.code == "upstream_error", result.to_dict()
    assert result.error is not None
    [failure] = result.error.details["upstream_failures"]
    assert failure["url"] == f"{api}/v1/forecast"
    assert failure["reason"].startswith("TLS failure talking to 127.0.0.1: ")
    assert "weather API unreachable (network): TLS failure" in result.error.details["guest_message"]
    assert result.meta["egress"][0]["error"] == "network"


def test_a_refused_connection_is_an_upstream_error(_isolated_env: Path, build_example: BuildGuest) -> None:
    with socket.socket() as sock:  # a port nobody listens on once this closes
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [port], "paths": ["/**"], "allow_private": True}
    result = weather(_isolated_env, build_example, rule, f"http://127.0.0.1:{port}")
    assert result.code == "upstream_error"
    assert result.error is not None
    assert result.error.details["upstream_failures"][0]["reason"] == "ConnectError talking to 127.0.0.1"


# -- the capability itself, with an injected transport --------------------------------------------

PUBLIC_IP = "93.184.216.34"


def _request(url: str, method: str = "GET") -> SimpleNamespace:
    return SimpleNamespace(method=method, url=url, headers=[], body=None)


def _state() -> CallState:
    return CallState(deadline=time.monotonic() + 5, log_limit_bytes=0)


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Fake DNS: host -> addresses; every lookup is recorded under "lookups"."""
    table: dict[str, list[str]] = {"api.example.com": [PUBLIC_IP], "lookups": []}

    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        table["lookups"].append(host)
        family = socket.AF_INET6
        return [(family if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in table[host]]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return table


def _capability(handler: Callable[[httpx.Request], httpx.Response], **rule: Any) -> HttpCapability:
    http_rule = glovebox.HttpRule(host="api.example.com", paths=["/**"], **rule)
    grants = glovebox.Grants(http=[http_rule], http_limits=glovebox.HttpLimits(max_requests=2))
    return HttpCapability([http_rule], grants, transport=httpx.MockTransport(handler))


def test_connects_to_the_checked_address_with_the_name_for_host_and_tls(resolver: dict[str, list[str]]) -> None:
    sent: list[httpx.Request] = []
    capability = _capability(lambda request: sent.append(request) or httpx.Response(200, content=b"ok"))
    response = capability.fetch(_request("https://api.example.com/users/1?x=1"), _state())
    assert response.status == 200
    assert response.body == b"ok"
    [request] = sent
    assert request.url.host == PUBLIC_IP
    assert request.url.path == "/users/1"
    assert request.headers["host"] == "api.example.com"
    assert request.extensions["sni_hostname"] == "api.example.com"
    assert resolver["lookups"] == ["api.example.com"]


@pytest.mark.parametrize(
    ("addresses", "reason"),
    [
        (["169.254.169.254"], "169.254.169.254, a cloud metadata address"),
        (["fd00:ec2::254"], "fd00:ec2::254, a cloud metadata address"),
        (["10.1.2.3"], "10.1.2.3, a private address; not granted"),
        (["100.64.0.1"], "100.64.0.1, a private address; not granted"),
        (["fd12::1"], "fd12::1, a private address; not granted"),
        (["::ffff:127.0.0.1"], "::ffff:7f00:1, a loopback address; not granted"),
        (["169.254.1.1"], "169.254.1.1, a link-local address; not granted"),
        ([PUBLIC_IP, "127.0.0.1"], "127.0.0.1, a loopback address; not granted"),
        (["224.0.0.1"], "224.0.0.1, a multicast or unspecified address"),
    ],
)
def test_non_public_addresses_are_refused(resolver: dict[str, list[str]], addresses: list[str], reason: str) -> None:
    resolver["api.example.com"] = addresses
    capability = _capability(lambda request: httpx.Response(200))
    state = _state()
    result = capability.fetch(_request("https://api.example.com/"), state)
    assert result == Variant("denied", f"host api.example.com resolves to {reason}")
    assert state.denials[0]["reason"] == f"host api.example.com resolves to {reason}"


def test_metadata_stays_refused_with_allow_private(resolver: dict[str, list[str]]) -> None:
    resolver["api.example.com"] = ["169.254.169.254"]
    capability = _capability(lambda request: httpx.Response(200), allow_private=True)
    result = capability.fetch(_request("https://api.example.com/"), _state())
    assert result.tag == "denied"
    assert "cloud metadata" in result.payload


def test_request_count_limit(resolver: dict[str, list[str]]) -> None:
    capability = _capability(lambda request: httpx.Response(200))
    state = _state()
    kinds = [getattr(capability.fetch(_request("https://api.example.com/"), state), "tag", "ok") for _ in range(3)]
    assert kinds == ["ok", "ok", "denied"]
    assert state.denials[0]["reason"] == "request limit reached (2 per call)"


def test_network_errors_are_typed(resolver: dict[str, list[str]]) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    state = _state()
    result = _capability(refuse).fetch(_request("https://api.example.com/users?token=x"), state)
    assert result == Variant("network", "ConnectError talking to api.example.com")
    assert state.upstream_failures == [
        {
            "capability": "http",
            "method": "GET",
            "url": "https://api.example.com/users",
            "reason": "ConnectError talking to api.example.com",
        }
    ]
    assert state.denials == []


def test_a_request_timeout_is_an_upstream_failure(resolver: dict[str, list[str]]) -> None:
    def stall(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    state = _state()
    result = _capability(stall).fetch(_request("https://api.example.com/"), state)
    assert result == Variant("timeout", "no answer within 10000 ms")
    assert [f["reason"] for f in state.upstream_failures] == ["no answer within 10000 ms"]
    assert not state.timed_out


def test_refusals_and_answers_below_500_are_not_upstream_failures(resolver: dict[str, list[str]]) -> None:
    statuses = iter([499, 500])
    capability = _capability(lambda request: httpx.Response(next(statuses)))
    state = _state()
    assert capability.fetch(_request("https://api.example.com/"), state).status == 499
    assert state.upstream_failures == []
    assert capability.fetch(_request("https://api.example.com/"), state).status == 500
    assert [f["status"] for f in state.upstream_failures] == [500]
    assert capability.fetch(_request("https://api.example.com/"), state).tag == "denied"  # request limit
    assert len(state.upstream_failures) == 1


def test_passed_deadline_ends_the_call_as_timeout(resolver: dict[str, list[str]]) -> None:
    state = CallState(deadline=time.monotonic() - 1, log_limit_bytes=0)
    result = _capability(lambda request: httpx.Response(200)).fetch(_request("https://api.example.com/"), state)
    assert result == Variant("timeout", "the call's deadline has passed")
    assert state.timed_out
    assert state.upstream_failures == []  # the call's own deadline, not the upstream's fault


# -- name resolution is bounded by the call's deadline ----------------------------------------


def test_a_hanging_resolver_costs_the_deadline_not_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from glovebox.capabilities import _net

    release = threading.Event()

    def hanging_getaddrinfo(*args: Any, **kwargs: Any) -> list[Any]:
        release.wait(30)  # a lookup that was waited for would end as "no address", not as a timeout
        return []

    monkeypatch.setattr(_net.socket, "getaddrinfo", hanging_getaddrinfo)
    target = _net.parse_target("GET", "https://api.example.com/x")
    with pytest.raises(_net.Refusal) as refused:
        _net.pin_address(target, allow_private=False, timeout_s=0.1)
    release.set()
    assert refused.value.kind == "timeout"
    assert "resolving api.example.com took longer than the 100 ms left" in refused.value.reason
