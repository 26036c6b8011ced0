"""The http-fetch capability attacked by hostile servers and hostile guests.

Hostile servers are raw sockets on 127.0.0.1 (trickling headers or bodies one
byte at a time, streaming forever, redirecting in a loop); hostile guests send
what httpx cannot, or call ``http-fetch`` ten thousand times. Each test asserts
the exact outcome, that nothing reached a server that should not have, and,
where a call is held, that a concurrent call on the same runtime is unaffected.
A trickling server gives up after ``TRICKLE_BYTES`` and then answers in full: a
client that waited for it would see that answer instead of the refusal asserted.
"""

from __future__ import annotations

import datetime
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

import glovebox
from glovebox.capabilities import _net
from glovebox.capabilities._fetch import HttpCapability
from glovebox.sandbox._callstate import CallState

#: Every test here runs on the native core and on the pure-Python path (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("sandbox_path")

BuildGuest = Callable[[str], Path]
Handler = Callable[["Hostile", socket.socket, bytes], None]
#: Bytes a trickling server sends, one per PACE_S, before it answers in full (30 s).
TRICKLE_BYTES = 3000
PACE_S = 0.01


@dataclass
class Hostile:
    """A raw HTTP server on 127.0.0.1 running ``handler`` for every request."""

    handler: Handler
    stop: threading.Event = field(default_factory=threading.Event)
    engaged: threading.Event = field(default_factory=threading.Event)
    #: Set when a trickle ran to its end: the client waited for all of it.
    completed: threading.Event = field(default_factory=threading.Event)
    requests: list[bytes] = field(default_factory=list)
    port: int = 0
    #: A server-side TLS context: the server trickles its handshake instead of speaking HTTP.
    tls: ssl.SSLContext | None = None

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def serve(self, listener: socket.socket) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        with conn:
            try:
                if self.tls is not None:
                    self._handshake(conn, self.tls)
                    return
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    head += chunk
                self.requests.append(head)
                self.handler(self, conn, head)
            except OSError:
                pass  # the client gave up: expected

    def _handshake(self, conn: socket.socket, context: ssl.SSLContext) -> None:
        """Answer the ClientHello with a real server flight, one byte per PACE_S."""
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = context.wrap_bio(incoming, outgoing, server_side=True)
        incoming.write(conn.recv(65536))
        with pytest.raises(ssl.SSLWantReadError):
            tls.do_handshake()
        flight = outgoing.read()
        self.engaged.set()
        for byte in flight:
            if self.stop.wait(PACE_S):
                return
            conn.sendall(bytes([byte]))
        self.completed.set()

    def trickle(self, conn: socket.socket, count: int = TRICKLE_BYTES) -> None:
        """Send one byte per PACE_S, ``count`` times (fewer when the test ends)."""
        self.engaged.set()
        for _ in range(count):
            if self.stop.wait(PACE_S):
                return
            conn.sendall(b"a")
        self.completed.set()


@pytest.fixture
def hostile() -> Iterator[Callable[[Handler], Hostile]]:
    started: list[tuple[Hostile, socket.socket]] = []

    def start(handler: Handler) -> Hostile:
        listener = socket.create_server(("127.0.0.1", 0))
        server = Hostile(handler, port=listener.getsockname()[1])
        threading.Thread(target=server.serve, args=(listener,), daemon=True).start()
        started.append((server, listener))
        return server

    yield start
    for server, listener in started:
        server.stop.set()
        listener.close()


@pytest.fixture(scope="module")
def server_tls(tmp_path_factory: pytest.TempPathFactory) -> ssl.SSLContext:
    """A TLS server context with a fresh self-signed certificate for 127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    pem = tmp_path_factory.mktemp("tls") / "server.pem"
    pem.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pem)
    return context


def trickled_headers(server: Hostile, conn: socket.socket, head: bytes) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    server.trickle(conn)
    conn.sendall(b"\r\nContent-Length: 2\r\n\r\n{}")


def trickled_body(server: Hostile, conn: socket.socket, head: bytes) -> None:
    conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {TRICKLE_BYTES}\r\n\r\n".encode())
    server.trickle(conn)


def endless_body(server: Hostile, conn: socket.socket, head: bytes) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
    server.engaged.set()
    while not server.stop.is_set():
        conn.sendall(b"x" * 65536)


def ok(server: Hostile, conn: socket.socket, head: bytes) -> None:
    body = json.dumps({"request": head.decode("latin-1")}).encode()
    conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


def redirect_to(location: str) -> Handler:
    def handler(server: Hostile, conn: socket.socket, head: bytes) -> None:
        conn.sendall(
            f"HTTP/1.1 302 Found\r\nLocation: {location}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n".encode()
        )

    return handler


def rule(*ports: int, **extra: Any) -> dict[str, Any]:
    return {
        "host": "127.0.0.1",
        "schemes": ["http"],
        "ports": list(ports),
        "paths": ["/**"],
        "allow_private": True,
        **extra,
    }


def runtime(
    home: Path, wasm: Path, rules: list[dict[str, Any]], timeout_ms: int = 30_000, **http_limits: Any
) -> glovebox.Runtime:
    """A Runtime with ``wasm`` registered as ``hc`` under ``rules`` (declared and granted)."""
    rt = glovebox.Runtime(home=home, grants={"http": rules, "http_limits": http_limits})
    rt.register(wasm, manifest={"name": "hc", "capabilities": {"http": rules}, "limits": {"timeout_ms": timeout_ms}})
    return rt


def call_while_held(rt: glovebox.Runtime, server: Hostile, held: dict[str, Any], other: str) -> glovebox.CallResult:
    """Run ``held`` against ``server``; once the server holds it, a call to ``other`` must succeed."""
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(rt.call, "hc", held)
        assert server.engaged.wait(10)
        concurrent = rt.call("hc", {"url": other})
        assert concurrent.ok and concurrent.output["http_status"] == 200, concurrent.to_dict()
        return future.result()


# -- one deadline for the whole request ------------------------------------------------------


def test_trickled_headers_end_at_the_calls_deadline(
    _isolated_env: Path, build_guest: BuildGuest, hostile: Callable[[Handler], Hostile]
) -> None:
    slow, fine = hostile(trickled_headers), hostile(ok)
    with runtime(_isolated_env, build_guest("http_client"), [rule(slow.port, fine.port)], timeout_ms=500) as rt:
        result = call_while_held(rt, slow, {"url": slow.url()}, fine.url())
    assert result.code == "timeout", result.to_dict()
    assert result.error is not None and result.error.details == {"timeout_ms": 500}
    [egress] = result.meta["egress"]
    assert egress["error"] == "timeout"
    assert "status" not in egress
    assert not slow.completed.is_set()


@pytest.mark.parametrize("handler", [trickled_headers, trickled_body], ids=["headers", "body"])
def test_a_trickle_ends_at_request_timeout(
    _isolated_env: Path, build_guest: BuildGuest, hostile: Callable[[Handler], Hostile], handler: Handler
) -> None:
    slow, fine = hostile(handler), hostile(ok)
    rules = [rule(slow.port, fine.port)]
    with runtime(_isolated_env, build_guest("http_client"), rules, request_timeout_ms=300) as rt:
        result = call_while_held(rt, slow, {"url": slow.url()}, fine.url())
    assert result.ok, result.to_dict()
    assert result.output == {"status": "timeout", "reason": "no answer within 300 ms"}
    assert result.meta["egress"][0]["error"] == "timeout"
    assert len(slow.requests) == 1
    assert not slow.completed.is_set()


def test_a_trickled_tls_handshake_ends_at_request_timeout(
    _isolated_env: Path, build_guest: BuildGuest, hostile: Callable[[Handler], Hostile], server_tls: ssl.SSLContext
) -> None:
    slow, fine = hostile(ok), hostile(ok)
    slow.tls = server_tls
    rules = [rule(slow.port, fine.port, schemes=["http", "https"])]
    with runtime(_isolated_env, build_guest("http_client"), rules, request_timeout_ms=300) as rt:
        result = call_while_held(rt, slow, {"url": f"https://127.0.0.1:{slow.port}/"}, fine.url())
    assert result.ok, result.to_dict()
    assert result.output == {"status": "timeout", "reason": "no answer within 300 ms"}
    assert not slow.completed.is_set()


def test_a_trickled_body_ends_at_the_calls_deadline(
    _isolated_env: Path, build_guest: BuildGuest, hostile: Callable[[Handler], Hostile]
) -> None:
    slow = hostile(trickled_body)
    with runtime(_isolated_env, build_guest("http_client"), [rule(slow.port)], timeout_ms=500) as rt:
        result = rt.call("hc", {"url": slow.url()})
    assert result.code == "timeout", result.to_dict()
    assert result.meta["egress"][0]["error"] == "timeout"
    assert not slow.completed.is_set()


def test_an_endless_body_ends_at_the_byte_cap(
    _isolated_env: Path, build_guest: BuildGuest, hostile: Callable[[Handler], Hostile]
) -> None:
    endless, fine = hostile(endless_body), hostile(ok)
    rules = [rule(endless.port, fine.port)]
    with runtime(_isolated_env, build_guest("http_client"), rules, max_response_bytes=100_000) as rt:
        result = call_while_held(rt, endless, {"url": endless.url()}, fine.url())
    assert result.ok, result.to_dict()
    assert result.output == {"status": "too-large", "reason": "response body is over the 100000-byte limit"}
    [egress] = result.meta["egress"]
    assert egress["error"] == "too-large"
    assert egress["bytes_in"] > 100_000


# -- redirects ---------------------------------------------------------------------------------


def test_a_redirect_loop_ends_at_max_redirects(
    _isolated_env: Path, build_guest: BuildGuest, hostile: Callable[[Handler], Hostile]
) -> None:
    loop = hostile(redirect_to("/loop"))
    rules = [rule(loop.port, follow_redirects=True)]
    with runtime(_isolated_env, build_guest("http_client"), rules, max_redirects=3) as rt:
        result = rt.call("hc", {"url": loop.url("/loop")})
    assert result.output == {"status": "denied", "reason": "more than 3 redirects"}
    assert len(loop.requests) == 4
    assert result.meta["denials"][0]["reason"] == "more than 3 redirects"


def test_a_redirect_ping_pong_between_ports_ends_at_max_redirects(
    _isolated_env: Path, build_guest: BuildGuest, hostile: Callable[[Handler], Hostile]
) -> None:
    ping = hostile(ok)  # re-pointed below, once both ports are known
    pong = hostile(redirect_to(ping.url("/ping")))
    ping.handler = redirect_to(pong.url("/pong"))
    rules = [rule(ping.port, pong.port, follow_redirects=True)]
    with runtime(_isolated_env, build_guest("http_client"), rules) as rt:
        result = rt.call("hc", {"url": ping.url("/ping")})
    assert result.output == {"status": "denied", "reason": "more than 5 redirects"}
    assert (len(ping.requests), len(pong.requests)) == (3, 3)


@pytest.mark.parametrize("header", ["Authorization", "Cookie", "Proxy-Authorization"])
def test_guest_credentials_are_dropped_on_a_redirect_to_another_port(
    _isolated_env: Path, build_guest: BuildGuest, hostile: Callable[[Handler], Hostile], header: str
) -> None:
    other = hostile(ok)

    def here_handler(server: Hostile, conn: socket.socket, head: bytes) -> None:
        if head.startswith((b"GET /a ", b"GET /same ")):
            redirect_to(other.url("/b") if head.startswith(b"GET /a ") else "/b")(server, conn, head)
        else:
            ok(server, conn, head)

    here = hostile(here_handler)
    rules = [rule(here.port, other.port, follow_redirects=True)]
    credential = {"header_name": header, "header_value": "guest-credential"}
    with runtime(_isolated_env, build_guest("http_client"), rules) as rt:
        moved = rt.call("hc", {"url": here.url("/a"), **credential})
        stayed = rt.call("hc", {"url": here.url("/same"), **credential})
    assert moved.output["http_status"] == stayed.output["http_status"] == 200
    assert [b"guest-credential" in r for r in here.requests[:1]] == [True]
    assert len(other.requests) == 1
    assert b"guest-credential" not in other.requests[0]
    # A redirect within the same scheme, host and port keeps them.
    assert [r.split(b" ")[1] for r in here.requests] == [b"/a", b"/same", b"/b"]
    assert [b"guest-credential" in r for r in here.requests[1:]] == [True, True]


def test_a_malformed_redirect_location_is_an_upstream_failure(
    _isolated_env: Path,
    build_guest: BuildGuest,
    hostile: Callable[[Handler], Hostile],
    caplog: pytest.LogCaptureFixture,
) -> None:
    bad = hostile(ok)
    bad.handler = redirect_to(f"http://0177.0.0.1:{bad.port}/")
    with runtime(_isolated_env, build_guest("http_client"), [rule(bad.port, follow_redirects=True)]) as rt:
        result = rt.call("hc", {"url": bad.url("/")})
    assert result.output == {"status": "network", "reason": "RemoteProtocolError talking to 127.0.0.1"}
    assert result.meta["egress"][0]["error"] == "network"
    assert len(bad.requests) == 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


# -- what httpx cannot send is refused before it counts -----------------------------------------

PUBLIC_IP = "93.184.216.34"


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fake DNS answering PUBLIC_IP for every name; records each name looked up."""
    lookups: list[str] = []

    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        lookups.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC_IP, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return lookups


def capability(handler: Callable[[httpx.Request], httpx.Response], *hosts: str, **rule: Any) -> HttpCapability:
    rules = [glovebox.HttpRule(host=host, paths=["/**"], **rule) for host in hosts or ["api.example.com"]]
    grants = glovebox.Grants(http=rules, http_limits=glovebox.HttpLimits(max_requests=1))
    return HttpCapability(rules, grants, transport=httpx.MockTransport(handler))


def request(url: str, headers: list[tuple[str, str]] | None = None) -> SimpleNamespace:
    return SimpleNamespace(method="GET", url=url, headers=headers or [], body=None)


@pytest.mark.parametrize(
    ("host", "url", "headers", "reason"),
    [
        ("0177.0.0.1", "http://0177.0.0.1/", [], "malformed URL: Invalid IPv4 address: '0177.0.0.1'"),
        ("api.example.com", "http://api.example.com/" + "a" * 200_000, [], "malformed URL: URL too long"),
        ("api.example.com", "http://api.example.com/", [("X-Name", "Zoë")], "header X-Name has a non-ASCII value"),
    ],
    ids=["octal-host", "200KB-url", "non-ascii-header"],
)
def test_what_httpx_cannot_send_is_denied_before_it_counts(
    resolver: list[str],
    caplog: pytest.LogCaptureFixture,
    host: str,
    url: str,
    headers: list[tuple[str, str]],
    reason: str,
) -> None:
    sent: list[httpx.Request] = []
    answer = lambda r: sent.append(r) or httpx.Response(200)  # noqa: E731
    http = capability(answer, host, "api.example.com", schemes=["http"], allow_private=True)
    state = CallState(deadline=time.monotonic() + 30, log_limit_bytes=0)
    refused = http.fetch(request(url, headers), state)
    assert (refused.tag, refused.payload) == ("denied", reason)
    assert [d["reason"] for d in state.denials] == [reason]
    assert (resolver, sent, http.requests) == ([], [], 0)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    # The one request max_requests allows is still there.
    assert http.fetch(request("http://api.example.com/"), state).status == 200
    assert resolver == ["api.example.com"]


def test_a_non_ascii_header_from_a_real_guest(
    _isolated_env: Path,
    build_guest: BuildGuest,
    hostile: Callable[[Handler], Hostile],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = hostile(ok)
    with runtime(_isolated_env, build_guest("http_client"), [rule(server.port)]) as rt:
        result = rt.call("hc", {"url": server.url(), "header_name": "X-Name", "header_value": "Zoë"})
    assert result.output == {"status": "denied", "reason": "header X-Name has a non-ASCII value"}
    assert server.requests == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_guest_credentials_are_dropped_when_a_redirect_changes_the_scheme(resolver: list[str]) -> None:
    sent: list[httpx.Request] = []

    def answer(r: httpx.Request) -> httpx.Response:
        sent.append(r)
        if r.url.scheme == "https":
            return httpx.Response(302, headers={"Location": "http://api.example.com:443/b"})
        return httpx.Response(200)

    http = capability(answer, schemes=["http", "https"], ports=[443], follow_redirects=True)
    http.limits = glovebox.HttpLimits(max_requests=2)
    state = CallState(deadline=time.monotonic() + 30, log_limit_bytes=0)
    response = http.fetch(request("https://api.example.com/a", [("Authorization", "Bearer guest")]), state)
    assert response.status == 200
    assert [(r.url.scheme, r.url.port, r.headers.get("authorization")) for r in sent] == [
        ("https", None, "Bearer guest"),
        ("http", 443, None),
    ]


# -- a hanging resolver holds a bounded number of threads ---------------------------------------


def test_a_hanging_resolver_holds_at_most_max_lookups_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    lookups: list[str] = []

    def hanging(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        lookups.append(host)
        release.wait(30)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC_IP, port))]

    monkeypatch.setattr(_net.socket, "getaddrinfo", hanging)
    target = _net.parse_target("GET", "https://api.example.com/")
    try:
        for _ in range(_net.MAX_LOOKUPS):
            with pytest.raises(_net.Refusal, match="took longer than"):
                _net.pin_address(target, allow_private=False, timeout_s=0.01)
        with pytest.raises(_net.Refusal) as busy:
            _net.pin_address(target, allow_private=False, timeout_s=0.05)
        assert busy.value.kind == "timeout"
        assert busy.value.reason == (
            f"resolving api.example.com: all {_net.MAX_LOOKUPS} name lookups are busy (resolver not answering)"
        )
        assert len(lookups) == _net.MAX_LOOKUPS
        # An IP literal needs no lookup: it is unaffected.
        literal = _net.parse_target("GET", "https://93.184.216.34/")
        assert _net.pin_address(literal, allow_private=False, timeout_s=0.05) == PUBLIC_IP
    finally:
        release.set()
    for thread in [t for t in threading.enumerate() if t.name == "glovebox-dns"]:
        thread.join(10)
    assert _net.pin_address(target, allow_private=False, timeout_s=5) == PUBLIC_IP
    assert len(lookups) == _net.MAX_LOOKUPS + 1


# -- ten thousand host calls in one invocation --------------------------------------------------


def test_ten_thousand_fetches_without_a_grant(_isolated_env: Path, build_guest: BuildGuest) -> None:
    with glovebox.Runtime(home=_isolated_env) as rt:
        rt.register(build_guest("http_flood"), manifest={"name": "flood", "limits": {"timeout_ms": 30_000}})
        result = rt.call("flood", {"url": "http://127.0.0.1:9/", "count": 10_000})
        again = rt.call("flood", {"url": "http://127.0.0.1:9/", "count": 1})
    assert result.ok, result.to_dict()
    reason = "the http capability is not granted to this call"
    assert result.output == {
        "denied": 10_000,
        "timeout": 0,
        "too-large": 0,
        "network": 0,
        "ok": 0,
        "last_reason": reason,
    }
    assert again.ok and again.output["denied"] == 1


def test_ten_thousand_fetches_past_max_requests(
    _isolated_env: Path, build_guest: BuildGuest, hostile: Callable[[Handler], Hostile]
) -> None:
    server = hostile(ok)
    with runtime(_isolated_env, build_guest("http_flood"), [rule(server.port)], max_requests=2) as rt:
        result = rt.call("hc", {"url": server.url(), "count": 10_000})
        again = rt.call("hc", {"url": server.url(), "count": 1})
    assert result.ok, result.to_dict()
    reason = "request limit reached (2 per call)"
    assert result.output == {
        "denied": 9_998,
        "timeout": 0,
        "too-large": 0,
        "network": 0,
        "ok": 2,
        "last_reason": reason,
    }
    assert again.ok and again.output["ok"] == 1
    assert len(server.requests) == 3


def test_the_deadline_caps_every_timeout_and_refuses_once_passed() -> None:
    import httpcore

    from glovebox.capabilities._deadline import Deadline

    now = [100.0]
    deadline = Deadline(clock=lambda: now[0])
    deadline.start(2.0)
    assert deadline.timeout(10.0, httpcore.ReadTimeout) == 2.0
    assert deadline.timeout(None, httpcore.ReadTimeout) == 2.0
    now[0] = 101.5
    assert deadline.timeout(10.0, httpcore.ReadTimeout) == 0.5
    assert deadline.timeout(0.25, httpcore.ReadTimeout) == 0.25
    now[0] = 102.0
    with pytest.raises(httpcore.WriteTimeout, match="the request's deadline has passed"):
        deadline.timeout(10.0, httpcore.WriteTimeout)
