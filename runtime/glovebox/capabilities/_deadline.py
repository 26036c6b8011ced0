"""One deadline for a whole HTTP request, enforced at every socket operation.

httpx and httpcore apply their timeouts to each connect, read or write on its
own, so a server that trickles its headers or its body one byte at a time
could hold a request for as long as it liked. The transport built here is
httpx's own with one change: its network backend wraps every stream, and each
operation on it — the TCP connect, the TLS handshake, every ``recv`` and every
``send`` — gets as its timeout the time left before the request's
:class:`Deadline` (a monotonic clock); an operation that would start after the
deadline fails at once with the matching httpcore timeout. CPython bounds a
TLS handshake and a single ``recv``/``send`` by the socket timeout as a whole,
so no operation outlives the deadline, and the whole request (connect, TLS,
headers, body, every redirect hop) ends by it, whatever the server does.

A deadline belongs to one call's HTTP capability (one thread); it is set once
per guest request and read by every stream of that call's connection pools.

Every operation that may block on the network gives up the call's compute slot
while it waits (:func:`glovebox.sandbox._compute.waiting`): the connect, the TLS
handshake, every ``recv``, and a ``send`` that cannot complete at once (a plain
socket tries a non-blocking ``send`` first, holding its slot).
"""

from __future__ import annotations

import math
import socket
import ssl
import time
import typing
from collections.abc import Callable, Iterable

import httpcore
import httpx

from ..sandbox._compute import waiting

__all__ = ["Deadline", "deadline_transport", "send_now"]

_Timeout = type[httpcore.TimeoutException] | type[httpx.TimeoutException]
_LIMITS = httpx.Limits()


class Deadline:
    """A point on a monotonic clock by which the current request must end."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.at = math.inf

    def start(self, seconds: float) -> None:
        """Let the next request run for ``seconds`` from now."""
        self.at = self.clock() + seconds

    def left_s(self) -> float:
        """Seconds left (negative once passed)."""
        return self.at - self.clock()

    def timeout(self, timeout: float | None, error: _Timeout) -> float:
        """``timeout`` capped by the time left; raise ``error`` when none is left."""
        left = self.left_s()
        if left <= 0:
            raise error("the request's deadline has passed")
        return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    """A network stream whose every operation ends by the deadline."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: Deadline) -> None:
        self._inner = inner
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        left = self._deadline.timeout(timeout, httpcore.ReadTimeout)
        with waiting():
            return self._inner.read(max_bytes, left)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        sock = self._inner.get_extra_info("socket")
        if not isinstance(sock, socket.socket):  # pragma: no cover - httpcore's sync streams are sockets
            self._inner.write(buffer, self._deadline.timeout(timeout, httpcore.WriteTimeout))
            return
        view = memoryview(buffer)
        plain = not isinstance(sock, ssl.SSLSocket)
        try:
            while view:  # one send per loop, each within the time left (httpcore reuses one timeout)
                sent = send_now(sock, view) if plain else 0
                if not sent:
                    left = self._deadline.timeout(timeout, httpcore.WriteTimeout)
                    with waiting():
                        sock.settimeout(left)
                        sent = sock.send(view)
                view = view[sent:]
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpcore.WriteError(str(exc)) from exc

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: typing.Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        left = self._deadline.timeout(timeout, httpcore.ConnectTimeout)
        with waiting():
            stream = self._inner.start_tls(ssl_context, server_hostname, left)
        return _Stream(stream, self._deadline)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


def send_now(sock: socket.socket, view: memoryview) -> int:
    """Bytes a non-blocking ``send`` takes at once (0 when the socket's buffer is full)."""
    sock.settimeout(0)
    try:
        return sock.send(view)
    except BlockingIOError:
        return 0


class _Backend(httpcore.NetworkBackend):
    """httpcore's sync backend, its streams wrapped in :class:`_Stream`."""

    def __init__(self, deadline: Deadline) -> None:
        self._inner = httpcore.SyncBackend()
        self._deadline = deadline

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        left = self._deadline.timeout(timeout, httpcore.ConnectTimeout)
        with waiting():
            stream = self._inner.connect_tcp(host, port, left, local_address, socket_options)
        return _Stream(stream, self._deadline)

    def sleep(self, seconds: float) -> None:  # pragma: no cover - only used for retries, which are off
        self._inner.sleep(seconds)


class _Transport(httpx.HTTPTransport):
    """httpx's transport over a connection pool whose network backend keeps ``deadline``."""

    def __init__(self, deadline: Deadline, ssl_context: typing.Any) -> None:
        # httpx's __init__ only builds the pool this replaces (one per call: not built twice).
        limits = _LIMITS
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_Backend(deadline),
        )


def deadline_transport(deadline: Deadline, ssl_context: typing.Any) -> httpx.BaseTransport:
    """An httpx transport (no proxies, TLS verified with ``ssl_context``) whose requests end by ``deadline``."""
    return _Transport(deadline, ssl_context)
