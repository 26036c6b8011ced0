"""The network of a sandboxed local MCP server: an HTTP proxy that enforces the granted HTTP rules.

A stdio server under bubblewrap has its own network namespace: no interface
but its own loopback. When the policy grants the server's tool HTTP rules
(``grants.http``, the rules a wasm tool gets), the server is given one way
out, and only one:

- on the host, an :class:`EgressProxy` listens on a Unix socket (in a fresh
  ``0700`` directory), which bubblewrap binds into the sandbox at
  :data:`SANDBOX_SOCKET`;
- inside the sandbox, :data:`FORWARDER` (a few lines of Python run by the
  host's interpreter) starts first, listens on ``127.0.0.1:<port>`` in the
  sandbox's loopback, forwards each connection to that socket, and runs the
  server with ``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY`` (and their lower
  case forms) pointing at it;
- the proxy answers plain-HTTP requests in absolute form (``GET
  http://host/path``) and ``CONNECT host:port`` tunnels (for ``https``). Each
  is checked against the granted rules with the matcher wasm tools use
  (:func:`glovebox.model._rules.check_rules`), the host resolved once, every
  address checked by the SSRF defence (no loopback, private, link-local or
  reserved address unless the matching rule has ``allow_private``; never a
  cloud-metadata one), and the connection made to exactly the checked address.

A plain-HTTP request is checked on scheme, host, port, method and path, and
is the connection's only request (``Connection: close`` upstream; a request
body must have a ``Content-Length``), its ``Host`` header the checked name. A ``CONNECT`` tunnel carries TLS the
proxy cannot read: only its host and port are checked (a rule for the host
with ``https`` among its schemes and the port among its ports); the method
and path of the requests inside are not.

Every request, allowed or refused, is recorded: :class:`EgressProxy` calls
``record`` with an entry like the ``egress`` entries of a wasm tool's HTTP
requests (``method``, ``url`` without its query, ``status`` or ``error`` and
``reason``, ``ms``, ``via: "proxy"``), and logs it on ``glovebox.http``.
"""

from __future__ import annotations

import logging
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..capabilities._net import Refusal, parse_target, pin_address
from ..model._grantrules import HttpRule
from ..model._rules import DEFAULT_PORTS, Target, check_rules, host_matches, ip_literal

__all__ = ["FORWARDER", "SANDBOX_SOCKET", "EgressProxy"]

logger = logging.getLogger("glovebox.http")

#: Where the proxy's socket is inside the sandbox (its ``/tmp`` is private).
SANDBOX_SOCKET = "/tmp/.glovebox-proxy.sock"
#: The largest request head (request line and headers) the proxy reads, in bytes.
MAX_HEAD_BYTES = 64 * 1024
#: Seconds a connection may stay silent (reading the request, waiting for either side of a tunnel).
IDLE_S = 60.0
#: Seconds the name lookup and the connection to an upstream may take.
CONNECT_S = 10.0
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate", "te", "upgrade"}
)

#: The sandbox's first process: ``python3 -I -S -c FORWARDER SOCKET -- ARGV...``.
FORWARDER = r"""
import os, socket, subprocess, sys, threading
path, argv = sys.argv[1], sys.argv[3:]
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(64)
url = "http://127.0.0.1:%d" % listener.getsockname()[1]
env = dict(os.environ)
for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
    env[name] = env[name.lower()] = url
env.pop("NO_PROXY", None)
env.pop("no_proxy", None)
def pipe(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    try:
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass
def serve(client):
    try:
        upstream = socket.socket(socket.AF_UNIX)
        upstream.connect(path)
    except OSError:
        client.close()
        return
    back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
    back.start()
    pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()
def accept():
    while True:
        client, _ = listener.accept()
        threading.Thread(target=serve, args=(client,), daemon=True).start()
threading.Thread(target=accept, daemon=True).start()
child = subprocess.Popen(argv, env=env)
sys.exit(child.wait())
"""


class EgressProxy:
    """An HTTP forward proxy on a Unix socket that lets through only what ``rules`` allow.

    ``record`` is called (on the proxy's threads) with one entry per request.
    """

    def __init__(self, rules: Sequence[HttpRule], record: Callable[[dict[str, Any]], None]) -> None:
        self.rules = list(rules)
        self.record = record
        self.refused = 0
        self._dir = Path(tempfile.mkdtemp(prefix="glovebox-proxy-"))
        self.socket_path = self._dir / "proxy.sock"
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.socket_path))
        self._listener.listen(64)
        self._closed = False
        threading.Thread(target=self._accept, name="glovebox-egress", daemon=True).start()

    def close(self) -> None:
        """Stop listening and remove the socket (tunnels already open end with their connections)."""
        self._closed = True
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), name="glovebox-egress", daemon=True).start()

    # -- one connection ------------------------------------------------------------

    def _serve(self, client: socket.socket) -> None:
        started = time.monotonic()
        entry: dict[str, Any] = {"method": "", "url": "", "via": "proxy"}
        try:
            client.settimeout(IDLE_S)
            head, rest = _read_head(client)
            method, target, headers = _parse_head(head)
            entry["method"] = method[:32]
            if method == "CONNECT":
                self._tunnel(client, target, rest, entry, started)
            else:
                self._forward(client, method, target, headers, rest, entry, started)
        except Refusal as refusal:
            self._refuse(client, refusal, entry, started)
        except OSError as exc:
            self._finish(entry, started, error="network", reason=str(exc))
        except Exception as exc:  # a bug here must end one connection, never the proxy
            logger.exception("the egress proxy failed on a request")
            self._finish(entry, started, error="network", reason=f"proxy error: {type(exc).__name__}")
        finally:
            client.close()

    def _tunnel(self, client: socket.socket, target: str, rest: bytes, entry: dict[str, Any], started: float) -> None:
        host, port = _authority(target)
        entry["url"] = f"https://{_bracketed(host)}:{port}"
        rule = self._connect_rule(host, port)
        upstream = _open(Target("https", host, port, "CONNECT", "/"), rule.allow_private)
        self._finish(entry, started, status=200)  # recorded before the client can go on
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        if rest:  # what the client sent after its CONNECT head, before the answer
            upstream.sendall(rest)
        _splice(client, upstream)

    def _connect_rule(self, host: str, port: int) -> HttpRule:
        for rule in self.rules:
            ports = rule.ports if rule.ports is not None else [DEFAULT_PORTS[s] for s in rule.schemes]
            if host_matches(rule.host, host) and "https" in rule.schemes and port in ports:
                return rule
        raise Refusal("denied", f"CONNECT to {_bracketed(host)}:{port} is not granted (https host and port)")

    def _forward(
        self,
        client: socket.socket,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        rest: bytes,
        entry: dict[str, Any],
        started: float,
    ) -> None:
        target = parse_target(method, url)
        entry["url"] = target.url
        if target.scheme != "http":
            raise Refusal("denied", "an https request must go through a CONNECT tunnel")
        rule, reason = check_rules(self.rules, target, "granted")
        if rule is None:
            raise Refusal("denied", reason)
        assert isinstance(rule, HttpRule)
        names = {name.lower() for name, _ in headers}
        if "transfer-encoding" in names:
            raise Refusal("denied", "a request body without Content-Length is not forwarded")
        length = _content_length(headers)
        upstream = _open(target, rule.allow_private)
        try:
            query = url.split("?", 1)[1] if "?" in url else None
            line = f"{method} {target.path}{'?' + query if query is not None else ''} HTTP/1.1\r\n"
            kept = [(n, v) for n, v in headers if n.lower() not in _HOP_BY_HOP and n.lower() != "host"]
            port = "" if target.port == DEFAULT_PORTS[target.scheme] else f":{target.port}"
            kept.insert(0, ("Host", _bracketed(target.host) + port))  # the checked name, not the client's
            head = line + "".join(f"{n}: {v}\r\n" for n, v in kept) + "Connection: close\r\n\r\n"
            upstream.sendall(head.encode("latin-1"))
            body = rest[:length]
            upstream.sendall(body)
            while len(body) < length:
                chunk = client.recv(min(65536, length - len(body)))
                if not chunk:
                    break
                body += chunk
                upstream.sendall(chunk)
            first = upstream.recv(65536)
            status = _status(first)
            self._finish(entry, started, status=status)
            client.sendall(first)
            while chunk := upstream.recv(65536):
                client.sendall(chunk)
        finally:
            upstream.close()

    def _refuse(self, client: socket.socket, refusal: Refusal, entry: dict[str, Any], started: float) -> None:
        code = {"denied": 403, "timeout": 504, "too-large": 431}.get(refusal.kind, 502)
        body = f"glovebox: {refusal.reason}\n".encode()
        answer = (
            f"HTTP/1.1 {code} {_REASONS.get(code, 'Bad Gateway')}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        self._finish(entry, started, error=refusal.kind, reason=refusal.reason)  # before the client can go on
        try:
            client.sendall(answer + body)
        except OSError:
            pass

    def _finish(
        self, entry: dict[str, Any], started: float, *, status: int | None = None, error: str = "", reason: str = ""
    ) -> None:
        entry["ms"] = round((time.monotonic() - started) * 1000, 1)
        if status is not None:
            entry["status"] = status
        else:
            entry["error"] = error
            entry["reason"] = reason[:500]
            if error == "denied":
                self.refused += 1
        logger.info("stdio server egress %s %s: %s", entry["method"], entry["url"], status or f"{error} ({reason})")
        try:
            self.record(dict(entry))
        except Exception:  # pragma: no cover - a recorder never stops the proxy
            logger.exception("recording a stdio server's egress failed")


_REASONS = {403: "Forbidden", 504: "Gateway Timeout", 431: "Request Header Fields Too Large"}


def _read_head(client: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_HEAD_BYTES:
            raise Refusal("too-large", f"a request head over {MAX_HEAD_BYTES} bytes")
        chunk = client.recv(65536)
        if not chunk:
            raise Refusal("denied", "the connection ended before a whole request head")
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    return head, rest


def _parse_head(head: bytes) -> tuple[str, str, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise Refusal("denied", "a malformed request line")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or "\0" in line:
            raise Refusal("denied", "a malformed header line")
        headers.append((name, value.strip()))
    return parts[0], parts[1], headers


def _content_length(headers: list[tuple[str, str]]) -> int:
    values = {value for name, value in headers if name.lower() == "content-length"}
    if not values:
        return 0
    if len(values) != 1 or not next(iter(values)).isdigit():
        raise Refusal("denied", "a malformed Content-Length")
    return int(next(iter(values)))


def _authority(target: str) -> tuple[str, int]:
    host, colon, port = target.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise Refusal("denied", f"CONNECT target {target[:100]!r} is not host:port")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    host = host.rstrip(".").lower()
    address = ip_literal(host)
    if not host or (":" in host and address is None):
        raise Refusal("denied", f"CONNECT target {target[:100]!r} is not host:port")
    return (str(address) if address else host), int(port)


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _open(target: Target, allow_private: bool) -> socket.socket:
    """A connection to the one checked address of ``target.host`` (resolved once)."""
    address = pin_address(target, allow_private, CONNECT_S)
    try:
        upstream = socket.create_connection((address, target.port), timeout=CONNECT_S)
    except TimeoutError as exc:
        raise Refusal("timeout", f"connecting to {target.host}:{target.port} timed out") from exc
    except OSError as exc:
        raise Refusal("network", f"cannot connect to {target.host}:{target.port}: {exc}") from exc
    upstream.settimeout(IDLE_S)
    return upstream


def _status(first: bytes) -> int:
    parts = first.split(b"\r\n", 1)[0].split(b" ")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def _splice(client: socket.socket, upstream: socket.socket) -> None:
    """Copy both ways until each side has ended (or stayed silent :data:`IDLE_S`)."""

    def pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while chunk := a.recv(65536):
                b.sendall(chunk)
        except OSError:
            pass
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
    back.start()
    pipe(client, upstream)
    back.join()
    upstream.close()
