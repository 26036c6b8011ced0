"""The HTTP/1.1 exchange behind the capability's checks, without httpx's client stack.

:mod:`._fetch` checks a request (URL, rules, headers, limits), pins its address
and builds its headers; this module only carries it: a TCP connection to
exactly the pinned address (TLS with the host's name for SNI and certificate
verification), the request and response framed by ``h11`` (the parser httpx
uses), and the body handed back raw, for the capability to decode and count.
httpx's ``Client``, request and URL objects and httpcore's pool cost about as
much Python per request again as the exchange itself; a burst of calls waiting
on an upstream is bound by that Python under one GIL.

Every socket operation ends by the request's :class:`~._deadline.Deadline` and
gives up the call's compute slot while it may block, as the deadline transport
does (see :mod:`._deadline`). Failures raise the httpx exception httpx's own
transport raises for the same failure (``ConnectError``, ``ReadTimeout``,
``RemoteProtocolError`` …), so the capability handles one set. What the wire
sends matches httpx's: its default ``Accept``, ``Connection`` and
``User-Agent`` headers unless the request names them, and ``Content-Length``
as httpx sets it.

A call keeps at most one idle connection per (scheme, pinned address, port,
server name) for its next request; one the server closed, or that has bytes
waiting, is dropped instead of reused. Nothing is shared between calls.
"""

from __future__ import annotations

import select
import socket
import ssl
import zlib
from collections.abc import Callable, Iterable, Iterator

import h11
import httpx

from ..sandbox._compute import waiting
from ._deadline import Deadline, send_now

__all__ = ["Decoder", "Response", "Wire"]

#: Bytes asked of one ``recv`` and the largest response head, as httpcore's.
READ_BYTES = 64 * 1024
MAX_HEAD_BYTES = 100 * 1024
#: httpx's client headers, sent unless the request carries the same name.
DEFAULT_HEADERS = (("Accept", "*/*"), ("Connection", "keep-alive"), ("User-Agent", f"python-httpx/{httpx.__version__}"))
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})

_Key = tuple[str, str, int, str]


class Response:
    """A response whose head is read: status, headers (names lower-case), the raw body to come."""

    __slots__ = ("_chunks", "_close", "content", "decoded", "headers", "status_code")

    def __init__(
        self,
        status_code: int,
        headers: list[tuple[str, str]],
        chunks: Callable[[], Iterator[bytes]],
        close: Callable[[], None],
        *,
        decoded: bool = False,
    ) -> None:
        self.status_code = status_code
        #: Whether :meth:`chunks` are already decoded from the content coding.
        self.decoded = decoded
        self.headers = headers
        self.content = b""
        self._chunks = chunks
        self._close = close

    @classmethod
    def of(cls, response: httpx.Response) -> Response:
        """An httpx response streamed from an injected transport, seen the same way (httpx decodes its body)."""
        headers = response.headers.multi_items()
        return cls(response.status_code, headers, response.iter_bytes, response.close, decoded=True)

    def header(self, name: str) -> str | None:
        """Every value of header ``name`` (lower-case) joined by ``", "``, or None (as httpx's ``get``)."""
        values = [value for key, value in self.headers if key == name]
        return ", ".join(values) if values else None

    def chunks(self) -> Iterator[bytes]:
        """The body as it arrives (still in its content coding unless :attr:`decoded`)."""
        return self._chunks()

    def close(self) -> None:
        """Done with the body (a connection read to its end may carry the next request)."""
        self._close()


class Decoder:
    """Undo a ``Content-Encoding`` of gzip and deflate steps (others pass through), as httpx does.

    The last step inflates at most one byte past the room it is given, so a
    small compressed body cannot expand far past the byte cap in memory.
    """

    def __init__(self, coding: str | None) -> None:
        names = [c.strip().lower() for c in (coding or "").split(",")]
        self._steps = [_Inflate(name) for name in reversed(names) if name in ("gzip", "deflate")]

    def decode(self, data: bytes, room: int) -> bytes:
        """``data`` decoded; more than ``room`` bytes means over the cap (the rest is not inflated)."""
        for step in self._steps[:-1]:
            data = step.decode(data, 0)
        return self._steps[-1].decode(data, room + 1) if self._steps else data

    def flush(self) -> bytes:
        """What the decoders still hold at the end of the body."""
        data = b""
        for step in self._steps:
            data = step.decode(data, 0) + step.flush()
        return data


class _Inflate:
    def __init__(self, name: str) -> None:
        self._deflate = name == "deflate"
        self._first = True
        self._z = zlib.decompressobj(zlib.MAX_WBITS | 16 if name == "gzip" else zlib.MAX_WBITS)

    def decode(self, data: bytes, limit: int) -> bytes:
        first, self._first = self._first, False
        try:
            return self._z.decompress(data, limit)
        except zlib.error as exc:
            if first and self._deflate:  # a raw deflate stream, without the zlib wrapper (as httpx allows)
                self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                return self.decode(data, limit)
            raise httpx.DecodingError(str(exc)) from exc

    def flush(self) -> bytes:
        try:
            return self._z.flush()
        except zlib.error as exc:  # pragma: no cover - flush only returns what is buffered
            raise httpx.DecodingError(str(exc)) from exc


class Wire:
    """The connections of one call's HTTP capability; every operation ends by ``deadline``."""

    def __init__(self, deadline: Deadline, tls: Callable[[], ssl.SSLContext]) -> None:
        self._deadline = deadline
        self._tls = tls
        self._idle: dict[_Key, _Connection] = {}

    def close(self) -> None:
        """Close the idle connections."""
        for connection in self._idle.values():
            connection.close()
        self._idle.clear()

    def send(
        self,
        scheme: str,
        address: str,
        port: int,
        server_name: str,
        method: str,
        target: bytes,
        headers: list[tuple[str, str]],
        body: bytes | None,
    ) -> Response:
        """Send one request to ``address`` and read its head; the body is left to :meth:`Response.chunks`.

        Raises:
            httpx.TimeoutException: the deadline passed (connect, TLS, write or read).
            httpx.HTTPError: the connection, TLS or the server's HTTP failed.
        """
        key = (scheme, address, port, server_name)
        connection = self._idle.pop(key, None)
        if connection is not None and connection.stale():
            connection.close()
            connection = None
        if connection is None:
            connection = _Connection.open(self._deadline, key, self._tls)
        try:
            status, answer = connection.request(method, target, _with_defaults(method, headers, body), body)
        except BaseException:
            connection.close()
            raise
        return Response(status, answer, connection.body, lambda: self._done(key, connection))

    def _done(self, key: _Key, connection: _Connection) -> None:
        if connection.reusable():
            previous = self._idle.pop(key, None)
            if previous is not None and previous is not connection:
                previous.close()
            self._idle[key] = connection
        else:
            connection.close()


def _with_defaults(method: str, headers: list[tuple[str, str]], body: bytes | None) -> list[tuple[str, str]]:
    named = {name.lower() for name, _ in headers}
    out = [(name, value) for name, value in DEFAULT_HEADERS if name.lower() not in named]
    out += headers
    if body:
        out.append(("Content-Length", str(len(body))))
    elif method in _BODY_METHODS:
        out.append(("Content-Length", "0"))
    return out


class _Connection:
    """One socket and its h11 state machine."""

    def __init__(self, sock: socket.socket, deadline: Deadline) -> None:
        self._sock = sock
        self._deadline = deadline
        self._h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        self._closed = False

    @classmethod
    def open(cls, deadline: Deadline, key: _Key, tls: Callable[[], ssl.SSLContext]) -> _Connection:
        scheme, address, port, server_name = key
        left = deadline.timeout(None, httpx.ConnectTimeout)
        sock = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
        try:
            with waiting():
                sock.settimeout(left)
                sock.connect((address, port))
            if scheme == "https":
                left = deadline.timeout(None, httpx.ConnectTimeout)
                with waiting():
                    sock.settimeout(left)
                    sock = tls().wrap_socket(sock, server_hostname=server_name)
        except TimeoutError as exc:
            sock.close()
            raise httpx.ConnectTimeout(str(exc) or "timed out") from exc
        except httpx.TimeoutException:
            sock.close()
            raise
        except OSError as exc:  # ssl.SSLError included: _network_reason finds it in the chain
            sock.close()
            raise httpx.ConnectError(str(exc)) from exc
        return cls(sock, deadline)

    def request(
        self, method: str, target: bytes, headers: list[tuple[str, str]], body: bytes | None
    ) -> tuple[int, list[tuple[str, str]]]:
        try:
            data = self._h11.send(h11.Request(method=method, target=target, headers=headers))
            if body:
                data += self._h11.send(h11.Data(data=body))
            data += self._h11.send(h11.EndOfMessage())
            assert data is not None
            self._write(data)
            while True:
                event = self._next()
                if isinstance(event, h11.Response):
                    return event.status_code, _decoded(event.headers)
                if isinstance(event, h11.ConnectionClosed):
                    raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
                # an InformationalResponse (1xx) is skipped, as httpcore does
        except h11.RemoteProtocolError as exc:
            raise httpx.RemoteProtocolError(str(exc)) from exc
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc)) from exc

    def body(self) -> Iterator[bytes]:
        try:
            while True:
                event = self._next()
                if isinstance(event, h11.Data):
                    yield bytes(event.data)
                elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                    return
                else:  # pragma: no cover - h11 yields only these after a response head
                    raise httpx.RemoteProtocolError(f"unexpected {type(event).__name__} in a response body")
        except h11.RemoteProtocolError as exc:
            raise httpx.RemoteProtocolError(str(exc)) from exc

    def _next(self) -> object:
        while True:
            event = self._h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            self._h11.receive_data(self._read())

    def _read(self) -> bytes:
        left = self._deadline.timeout(None, httpx.ReadTimeout)
        try:
            with waiting():
                self._sock.settimeout(left)
                return self._sock.recv(READ_BYTES)
        except TimeoutError as exc:
            raise httpx.ReadTimeout(str(exc) or "timed out") from exc
        except OSError as exc:
            raise httpx.ReadError(str(exc)) from exc

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        plain = not isinstance(self._sock, ssl.SSLSocket)
        try:
            while view:  # one send per loop, each within the time left
                sent = send_now(self._sock, view) if plain else 0
                if not sent:
                    left = self._deadline.timeout(None, httpx.WriteTimeout)
                    with waiting():
                        self._sock.settimeout(left)
                        sent = self._sock.send(view)
                view = view[sent:]
        except TimeoutError as exc:
            raise httpx.WriteTimeout(str(exc) or "timed out") from exc
        except OSError as exc:
            raise httpx.WriteError(str(exc)) from exc

    def reusable(self) -> bool:
        """Both sides finished one exchange and may start the next (then it is started)."""
        if self._closed or self._h11.our_state is not h11.DONE or self._h11.their_state is not h11.DONE:
            return False
        self._h11.start_next_cycle()
        return True

    def stale(self) -> bool:
        """An idle connection the server closed, or sent bytes on unasked."""
        if isinstance(self._sock, ssl.SSLSocket) and self._sock.pending():
            return True
        try:
            readable, _, _ = select.select([self._sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._sock.close()


def _decoded(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    """Header names and values as text, in httpx's encoding choice (ASCII, else UTF-8, else Latin-1)."""
    raw = list(headers)
    for encoding in ("ascii", "utf-8"):
        try:
            return [(name.decode(encoding), value.decode(encoding)) for name, value in raw]
        except UnicodeDecodeError:
            continue
    return [(name.decode("iso-8859-1"), value.decode("iso-8859-1")) for name, value in raw]
