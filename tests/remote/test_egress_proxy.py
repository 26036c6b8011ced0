"""The host side of a sandboxed stdio server's network: the egress proxy on its Unix socket.

Spoken to directly (as the in-sandbox forwarder does), with real upstreams on
127.0.0.1; no bubblewrap needed.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from glovebox.model._grantrules import HttpRule
from glovebox.remote._egress import EgressProxy


class _Echo(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self._answer(b"")

    def do_POST(self) -> None:
        self._answer(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

    def _answer(self, body: bytes) -> None:
        text = f"{self.command} {self.path} host={self.headers['Host']} body={body.decode()}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def log_message(self, *args: Any) -> None:
        pass


pytestmark = pytest.mark.system


@pytest.fixture(scope="module")
def upstream() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(upstream: int) -> Iterator[tuple[EgressProxy, list[dict[str, Any]]]]:
    rules = [
        HttpRule(host="127.0.0.1", schemes=["http"], ports=[upstream], methods=["GET", "POST"], paths=["/ok/**"],
                 allow_private=True),
        HttpRule(host="127.0.0.1", schemes=["https"], ports=[upstream], allow_private=True),
        HttpRule(host="localhost", schemes=["http", "https"], ports=[upstream]),
    ]  # fmt: skip
    seen: list[dict[str, Any]] = []
    egress = EgressProxy(rules, seen.append)
    yield egress, seen
    egress.close()
    assert not egress.socket_path.exists()


def exchange(egress: EgressProxy, data: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(10)
        client.connect(str(egress.socket_path))
        client.sendall(data)
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
        return answer


def test_a_granted_request_goes_through_once_with_the_checked_host(proxy: Any, upstream: int) -> None:
    egress, seen = proxy
    request = (
        f"POST http://127.0.0.1:{upstream}/ok/a?x=1 HTTP/1.1\r\nHost: internal.example\r\n"
        "Proxy-Authorization: Basic eA==\r\nContent-Length: 5\r\n\r\nhelloGET /ok/b HTTP/1.1\r\n\r\n"
    ).encode()
    answer = exchange(egress, request)
    assert answer.startswith(b"HTTP/1.0 200") or answer.startswith(b"HTTP/1.1 200")
    assert answer.endswith(f"POST /ok/a?x=1 host=127.0.0.1:{upstream} body=hello".encode())  # one request only
    assert seen == [
        {"method": "POST", "url": f"http://127.0.0.1:{upstream}/ok/a", "via": "proxy", "status": 200,
         "ms": seen[0]["ms"]}
    ]  # fmt: skip
    assert egress.refused == 0


@pytest.mark.parametrize(
    ("request_head", "reason"),
    [
        ("GET http://127.0.0.1:{port}/other HTTP/1.1", "path /other not allowed"),
        ("DELETE http://127.0.0.1:{port}/ok/a HTTP/1.1", "method DELETE not allowed"),
        ("GET http://127.0.0.1:1/ok/a HTTP/1.1", "port 1 not allowed"),
        ("GET http://10.0.0.1:{port}/ok/a HTTP/1.1", "host 10.0.0.1 not allowed"),
        ("GET http://localhost:{port}/ok HTTP/1.1", "a loopback address"),  # granted, but private: SSRF check
        ("GET https://127.0.0.1:{port}/ok/a HTTP/1.1", "must go through a CONNECT tunnel"),
        ("GET /ok/a HTTP/1.1", "scheme (none) not allowed"),
        ("GET http://user:pw@127.0.0.1:{port}/ok/a HTTP/1.1", "userinfo"),
        ("CONNECT 127.0.0.1:1 HTTP/1.1", "CONNECT to 127.0.0.1:1 is not granted"),
        ("CONNECT example.com:{port} HTTP/1.1", "CONNECT to example.com:"),
        ("CONNECT localhost:{port} HTTP/1.1", "a loopback address"),
        ("CONNECT 169.254.169.254:443 HTTP/1.1", "not granted"),
        ("CONNECT nonsense HTTP/1.1", "is not host:port"),
        ("GARBAGE", "a malformed request line"),
    ],
)
def test_what_the_rules_do_not_allow_is_refused_and_recorded(
    proxy: Any, upstream: int, request_head: str, reason: str
) -> None:
    egress, seen = proxy
    answer = exchange(egress, (request_head.format(port=upstream) + "\r\nHost: x\r\n\r\n").encode())
    assert answer.startswith(b"HTTP/1.1 403 Forbidden") and reason in answer.decode(), answer
    assert seen[0]["error"] == "denied" and reason in seen[0]["reason"] and egress.refused == 1


def test_a_chunked_body_is_refused(proxy: Any, upstream: int) -> None:
    egress, _ = proxy
    head = f"POST http://127.0.0.1:{upstream}/ok/a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    assert b"without Content-Length" in exchange(egress, head.encode())


def test_a_granted_connect_opens_a_tunnel_to_the_checked_address(proxy: Any, upstream: int) -> None:
    egress, seen = proxy
    tunneled = f"CONNECT 127.0.0.1:{upstream} HTTP/1.1\r\n\r\nGET /anything HTTP/1.0\r\nHost: h\r\n\r\n"
    answer = exchange(egress, tunneled.encode())
    assert answer.startswith(b"HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.0 200")
    assert answer.endswith(b"GET /anything host=h body=")  # inside a tunnel only host and port were checked
    assert seen[0]["method"] == "CONNECT" and seen[0]["status"] == 200
