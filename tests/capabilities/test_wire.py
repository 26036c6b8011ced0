"""The capability's own HTTP/1.1 exchange (``_wire``) against a raw server on 127.0.0.1.

The server counts connections and records every request head as it arrived,
so each test can say what went over the wire: one connection reused within a
call, none reused once the server closed it, httpx's headers, and a
compressed body inflated no further than the byte cap allows.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import httpx
import pytest

import glovebox
from glovebox.capabilities._fetch import HttpCapability
from glovebox.capabilities._wire import Decoder
from glovebox.sandbox._callstate import CallState

#: What the server answers to one request head: the response bytes, and whether it then closes.
Answer = Callable[[bytes], tuple[bytes, bool]]


class Server:
    """A raw HTTP/1.1 server on 127.0.0.1 that serves requests on a connection until told to close."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.requests: list[tuple[int, bytes]] = []  # (connection number, request head)
        self.ended: list[int] = []  # connections the client closed
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn, self.connections), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        with conn:
            buffered = b""
            while True:
                while b"\r\n\r\n" not in buffered:
                    try:
                        chunk = conn.recv(65536)
                    except ConnectionResetError:  # the client may close with an RST (unread bytes)
                        chunk = b""
                    if not chunk:
                        self.ended.append(number)
                        return
                    buffered += chunk
                head, buffered = buffered.split(b"\r\n\r\n", 1)
                self.requests.append((number, head))
                response, close = self.answer(head)
                conn.sendall(response)
                if close:
                    return

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Answer], Server]]:
    servers: list[Server] = []

    def start(answer: Answer) -> Server:
        servers.append(Server(answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def respond(body: bytes, *headers: str, close: bool = False) -> Answer:
    head = "".join(f"{h}\r\n" for h in (*headers, f"Content-Length: {len(body)}"))
    return lambda _: (f"HTTP/1.1 200 OK\r\n{head}\r\n".encode() + body, close)


def capability(port: int, *, max_requests: int = 4, max_response_bytes: int = 1 << 20) -> HttpCapability:
    methods = ["GET", "POST", "PUT"]
    rule = glovebox.HttpRule(
        host="127.0.0.1", schemes=["http"], ports=[port], paths=["/**"], methods=methods, allow_private=True
    )
    limits = glovebox.HttpLimits(max_requests=max_requests, max_response_bytes=max_response_bytes)
    return HttpCapability([rule], glovebox.Grants(http=[rule], http_limits=limits))


def request(url: str, method: str = "GET", body: bytes | None = None) -> SimpleNamespace:
    return SimpleNamespace(method=method, url=url, headers=[("X-Tool", "t")], body=body)


def state() -> CallState:
    return CallState(deadline=time.monotonic() + 30, log_limit_bytes=0)


def wait_for(condition: Callable[[], bool]) -> bool:
    for _ in range(200):
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_the_requests_of_one_call_to_one_address_share_a_connection(serve: Callable[[Answer], Server]) -> None:
    server = serve(respond(b"{}"))
    http, call = capability(server.port), state()
    answers = [http.fetch(request(server.url(f"/{n}")), call) for n in range(3)]
    assert [(a.status, a.body) for a in answers] == [(200, b"{}")] * 3
    assert server.connections == 1
    assert [number for number, _ in server.requests] == [1, 1, 1]
    http.close()
    assert wait_for(lambda: server.ended == [1])  # closing the call closes its connection


def test_a_connection_the_server_closed_is_not_reused(serve: Callable[[Answer], Server]) -> None:
    server = serve(respond(b"{}", close=True))  # no "Connection: close": the socket just ends
    http, call = capability(server.port), state()
    first = http.fetch(request(server.url("/a")), call)
    assert wait_for(lambda: server.connections == 1 and len(server.requests) == 1)
    time.sleep(0.05)  # the server's FIN reaches the idle connection
    second = http.fetch(request(server.url("/b")), call)
    assert (first.status, second.status) == (200, 200)
    assert [number for number, _ in server.requests] == [1, 2]
    http.close()


def test_a_connection_the_server_said_it_would_close_is_not_reused(serve: Callable[[Answer], Server]) -> None:
    server = serve(respond(b"{}", "Connection: close", close=True))
    http, call = capability(server.port), state()
    assert [http.fetch(request(server.url()), call).status for _ in range(2)] == [200, 200]
    assert [number for number, _ in server.requests] == [1, 2]
    http.close()


def test_the_request_carries_httpx_headers_and_the_host_it_was_checked_for(serve: Callable[[Answer], Server]) -> None:
    server = serve(respond(b""))
    http, call = capability(server.port), state()
    assert http.fetch(request(server.url("/p/a%20b?q=1&r=%2F#frag")), call).status == 200
    assert http.fetch(request(server.url("/post"), "POST"), call).status == 200
    assert http.fetch(request(server.url("/put"), "PUT", b"12345"), call).status == 200
    get, post, put = (head.decode().split("\r\n") for _, head in server.requests)
    assert get[0] == "GET /p/a%20b?q=1&r=%2F HTTP/1.1"
    assert sorted(get[1:]) == sorted(
        [
            "Accept: */*",
            "Connection: keep-alive",
            f"User-Agent: python-httpx/{httpx.__version__}",
            f"Host: 127.0.0.1:{server.port}",
            "X-Tool: t",
            "Accept-Encoding: gzip, deflate",
        ]
    )
    assert "Content-Length: 0" in post
    assert "Content-Length: 5" in put
    http.close()


def test_a_gzip_bomb_is_refused_and_inflated_no_further_than_the_cap(serve: Callable[[Answer], Server]) -> None:
    bomb = gzip.compress(b"\0" * (64 << 20))  # 64 MiB of zeros in ~64 KiB
    decoder = Decoder("gzip")
    assert len(decoder.decode(bomb, 1000)) == 1001  # one byte past the room: over the cap, nothing more inflated
    server = serve(respond(bomb, "Content-Encoding: gzip"))
    http, call = capability(server.port, max_response_bytes=4096), state()
    refused = http.fetch(request(server.url()), call)
    assert (refused.tag, refused.payload) == ("too-large", "response body is over the 4096-byte limit")
    http.close()


@pytest.mark.parametrize(
    ("coding", "body"),
    [
        ("gzip", gzip.compress(b"plain text")),
        ("deflate", zlib.compress(b"plain text")),
        ("deflate", zlib.compress(b"plain text")[2:-4]),  # raw deflate, without the zlib wrapper
        ("deflate, gzip", gzip.compress(zlib.compress(b"plain text"))),  # applied in that order
        ("identity", b"plain text"),
    ],
    ids=["gzip", "deflate", "raw-deflate", "two-codings", "identity"],
)
def test_the_body_is_decoded_as_httpx_decodes_it(serve: Callable[[Answer], Server], coding: str, body: bytes) -> None:
    server = serve(respond(body, f"Content-Encoding: {coding}"))
    http, call = capability(server.port), state()
    answer = http.fetch(request(server.url()), call)
    assert (answer.status, answer.body) == (200, b"plain text")
    assert httpx.Response(200, headers={"Content-Encoding": coding}, content=body).content == b"plain text"
    http.close()


def test_a_corrupt_compressed_body_is_a_network_failure(serve: Callable[[Answer], Server]) -> None:
    server = serve(respond(b"\x1f\x8bnot gzip at all", "Content-Encoding: gzip"))
    http, call = capability(server.port), state()
    failed = http.fetch(request(server.url()), call)
    assert (failed.tag, failed.payload) == ("network", "DecodingError talking to 127.0.0.1")
    assert call.upstream_failures[0]["reason"] == "DecodingError talking to 127.0.0.1"
    http.close()


def test_a_server_that_closes_without_answering_is_a_protocol_error(serve: Callable[[Answer], Server]) -> None:
    server = serve(lambda _: (b"", True))
    http, call = capability(server.port), state()
    failed = http.fetch(request(server.url()), call)
    assert (failed.tag, failed.payload) == ("network", "RemoteProtocolError talking to 127.0.0.1")
    http.close()
