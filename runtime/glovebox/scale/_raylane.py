"""A replica's lane: calls from a driver on the same node over a Unix socket, beside Ray's task path.

An actor task crosses six threads (the driver's caller and its Ray I/O thread, the
replica's I/O thread and task thread, and back), and on a loaded machine each
hand-off waits for a core: a tiny call's round trip was 2-3 ms there. On one node
the lane takes two: the caller writes the request to a socket, a replica thread
blocked reading it runs the call and writes the envelope back.

- :class:`LaneServer` (in the replica) listens on ``lane.sock`` in a directory
  only its user can enter (``mkdtemp``, mode 0700), and serves each connection on
  a thread of its own. A connection's first 32 bytes must be the lane's token,
  which the replica hands the driver through Ray; any other connection is closed
  unread. Requests are the ``_procwire`` JSON text a Ray call carries, with the
  tool's ``name@version`` and digest: the replica unpickles nothing.
- :class:`Lane` (in the driver) keeps the idle connections to one replica and
  opens another when every one is busy (at most the replica's ``max_pending`` are
  ever busy). :class:`LaneLost` says a connection broke before its answer came:
  the driver then asks Ray whether the replica died, as a Ray call's
  ``ActorDiedError`` says it.

Frames are a 4-byte big-endian length and the bytes. A request is three frames
(request, ``name@version``, digest); an answer is one, the envelope pickled by the
replica (as Ray pickles an actor task's result), or the text of a ``BadRequest``
(or of an exception the call raised), which the driver answers as a failed call.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
import pickle
import secrets
import shutil
import socket
import struct
import tempfile
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Lane", "LaneLost", "LaneRefused", "LaneServer", "LaneUnreachable"]

logger = logging.getLogger("glovebox")

TOKEN_BYTES = 32
#: Largest frame either side reads (an envelope is bounded far below it by the output cap).
MAX_FRAME = 1 << 30
_LENGTH = struct.Struct(">I")
_ANSWER, _BAD = b"a", b"b"


class LaneLost(ConnectionError):
    """The connection broke (or the replica closed it) before the call's answer came."""


class LaneUnreachable(LaneLost):
    """No connection to the lane could be made (its socket is gone, say): nothing was sent."""


class LaneRefused(ValueError):
    """The replica could not read the request (its ``BadRequest``); nothing ran."""


def _read_exact(conn: socket.socket, size: int) -> bytes | None:
    """``size`` bytes, or None when the peer closed first."""
    chunks, left = [], size
    while left:
        chunk = conn.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_frame(conn: socket.socket) -> bytes | None:
    head = _read_exact(conn, _LENGTH.size)
    if head is None:
        return None
    (size,) = _LENGTH.unpack(head)
    if size > MAX_FRAME:
        raise ConnectionError(f"a frame of {size} bytes")
    return _read_exact(conn, size) if size else b""


def _frames(*parts: bytes) -> bytes:
    return b"".join(_LENGTH.pack(len(part)) + part for part in parts)


class LaneServer:
    """The replica's end: a Unix socket whose requests ``handle(data, ref, digest)`` answers."""

    def __init__(self, handle: Callable[[bytes, str, str], Any], bad_request: type[Exception]) -> None:
        self._handle = handle
        self._bad_request = bad_request
        self.token = secrets.token_bytes(TOKEN_BYTES)
        self._dir = tempfile.mkdtemp(prefix="glovebox-lane-")  # mode 0700: only this user enters
        self.path = os.path.join(self._dir, "lane.sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(256)
        self._closed = False
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        #: Calls answered on the lane so far (counted as each answer is about to be sent).
        self.answered = 0
        threading.Thread(target=self._accept, name="glovebox-lane", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name="glovebox-lane-call", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            offered = _read_exact(conn, TOKEN_BYTES)
            if offered is None or not hmac.compare_digest(offered, self.token):
                logger.warning("a connection to the lane without its token was closed")
                return
            while (data := _read_frame(conn)) is not None:
                ref, digest = _read_frame(conn), _read_frame(conn)
                if ref is None or digest is None:
                    return
                try:
                    answer = _ANSWER + pickle.dumps(self._handle(data, ref.decode(), digest.decode()))
                except self._bad_request as exc:
                    answer = _BAD + str(exc).encode()
                except Exception:  # as a Ray task's exception would be: this call fails, the lane goes on
                    logger.exception("a call on the lane raised")
                    answer = _BAD + b"the replica raised while answering the call"
                with self._lock:  # counted before it is sent: whoever reads the answer may ask the count next
                    self.answered += 1
                conn.sendall(_frames(answer))
        except (OSError, UnicodeDecodeError) as exc:
            logger.warning("a lane connection ended: %s", exc)
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

    def close(self) -> None:
        """Stop listening and end every connection (a call running on one still finishes)."""
        with self._lock:
            self._closed = True
            conns = list(self._conns)
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RD)
        shutil.rmtree(self._dir, ignore_errors=True)


class Lane:
    """The driver's end for one replica: idle connections, each carrying one call at a time."""

    def __init__(self, path: str, token: bytes) -> None:
        self._path = path
        self._token = token
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False

    def _take(self) -> socket.socket:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self._path)
            conn.sendall(self._token)
        except OSError as exc:
            conn.close()
            raise LaneUnreachable(f"cannot reach the replica's lane: {exc}") from None
        return conn

    def _give(self, conn: socket.socket) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(conn)
                return
        conn.close()

    def call(self, data: bytes, ref: str, digest: str) -> Any:
        """The replica's answer (None: its home lacks the tool).

        Raises:
            LaneLost: the connection broke before the answer came.
            LaneRefused: the replica could not read the request.
        """
        conn = self._take()
        try:
            conn.sendall(_frames(data, ref.encode(), digest.encode()))
            answer = _read_frame(conn)
        except OSError as exc:
            conn.close()
            raise LaneLost(str(exc)) from None
        if answer is None:
            conn.close()
            raise LaneLost("the replica closed the connection")
        self._give(conn)
        if answer[:1] == _BAD:
            raise LaneRefused(answer[1:].decode(errors="replace"))
        return pickle.loads(answer[1:])  # noqa: S301  (the replica's envelope, as Ray's own results are)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
