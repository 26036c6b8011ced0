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

The grant's ``secrets`` and ``http_limits`` apply as to a wasm tool's requests
(:class:`EgressGrant`):

- a plain-HTTP request to a host a secret rule names (with ``http`` among its
  ``schemes``) gets the secret's header from the host (any header of that name
  the server wrote is dropped); the server never holds the value. The answer to
  such a request is read whole (at most ``max_response_bytes``) and scrubbed of
  the secret (``[REDACTED]``, in the encodings the HTTP capability scrubs) before
  the server gets it, or withheld (status and ``response_headers`` only) when the
  rule says ``response_body: withhold``. A ``CONNECT`` tunnel is TLS the proxy
  does not read: no secret goes into one;
- ``max_requests``: requests (a tunnel is one) per call in flight on the server's
  process; past it, refused. A request made while no call is in flight counts
  against none;
- ``max_request_bytes`` (a request's ``Content-Length``), ``max_response_bytes``
  (an answer past it is cut, recorded ``too-large``), ``request_timeout_ms`` (the
  connection and each wait for either side); the proxy follows no redirect
  (``max_redirects`` does not apply: each one the server follows is a request).

Every request, allowed or refused, is recorded: :class:`EgressProxy` calls
``record`` with an entry like the ``egress`` entries of a wasm tool's HTTP
requests (``method``, ``url`` without its query, ``status`` or ``error`` and
``reason``, ``ms``, ``via: "proxy"``), and logs it on ``glovebox.http``.
"""

from __future__ import annotations

import json
import logging
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..capabilities._net import Refusal, parse_target, pin_address
from ..model._grantrules import HttpLimits, HttpRule, SecretRule
from ..model._rules import DEFAULT_PORTS, Target, check_rules, host_matches, ip_literal

__all__ = ["FORWARDER", "SANDBOX_SOCKET", "EgressGrant", "EgressProxy"]

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


@dataclass(frozen=True)
class EgressGrant:
    """What a sandboxed stdio server's proxy enforces: a call's ``http`` rules, ``http_limits`` and ``secrets``."""

    rules: tuple[HttpRule, ...] = ()
    limits: HttpLimits = field(default_factory=HttpLimits)
    secrets: tuple[SecretRule, ...] = ()

    @classmethod
    def of(cls, grants: Any) -> EgressGrant:
        """The egress part of a call's effective grants."""
        return cls(tuple(grants.http), grants.http_limits, tuple(grants.secrets))

    def __bool__(self) -> bool:
        return bool(self.rules)

    def key(self) -> str:
        """A text that differs when anything here does (a process is started per grant)."""
        parts = [[r.model_dump(mode="json") for r in self.rules], self.limits.model_dump(mode="json")]
        parts.append([r.model_dump(mode="json") for r in self.secrets])
        return json.dumps(parts, sort_keys=True)


class EgressProxy:
    """An HTTP forward proxy on a Unix socket that lets through only what ``rules`` allow.

    ``record`` is called (on the proxy's threads) with one entry per request.
    """

    def __init__(
        self,
        rules: Sequence[HttpRule] | EgressGrant,
        record: Callable[[dict[str, Any]], None],
        admit: Callable[[int], bool] | None = None,
    ) -> None:
        grant = rules if isinstance(rules, EgressGrant) else EgressGrant(tuple(rules))
        self.rules = list(grant.rules)
        self.limits = grant.limits
        self.secret_rules = grant.secrets
        self.record = record
        #: Whether one more request may be made (``admit(max_requests)``; None: no count).
        self.admit = admit
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
            client.settimeout(self._timeout_s)
            head, rest = _read_head(client)
            method, target, headers = _parse_head(head)
            entry["method"] = method[:32]
            if self.admit is not None and not self.admit(self.limits.max_requests):
                entry["url"] = target[:200].split("?", 1)[0]
                raise Refusal("denied", f"over http_limits.max_requests ({self.limits.max_requests}) for this call")
            if method == "CONNECT":
                self._tunnel(client, target, rest, entry, started)
            else:
                self._forward(client, method, target, headers, rest, entry, started)
        except Refusal as refusal:
            self._refuse(client, refusal, entry, started)
        except TimeoutError:
            self._finish(entry, started, error="timeout", reason="http_limits.request_timeout_ms passed")
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
        upstream = _open(Target("https", host, port, "CONNECT", "/"), rule.allow_private, self._timeout_s)
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
        if length > self.limits.max_request_bytes:
            raise Refusal("too-large", f"a request body over http_limits.max_request_bytes ({length} bytes)")
        secrets = self._secrets_for(target)
        upstream = _open(target, rule.allow_private, self._timeout_s)
        try:
            query = url.split("?", 1)[1] if "?" in url else None
            line = f"{method} {target.path}{'?' + query if query is not None else ''} HTTP/1.1\r\n"
            added = {secret.rule.header.lower() for secret in secrets}
            kept = [(n, v) for n, v in headers if n.lower() not in _HOP_BY_HOP | added and n.lower() != "host"]
            port = "" if target.port == DEFAULT_PORTS[target.scheme] else f":{target.port}"
            kept.insert(0, ("Host", _bracketed(target.host) + port))  # the checked name, not the client's
            kept += [(secret.rule.header, secret.header_value) for secret in secrets]  # from the host, never seen
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
            if secrets:
                answer = _scrubbed_answer(upstream, method, secrets, self.limits.max_response_bytes)
                self._finish(entry, started, status=_status(answer))
                client.sendall(answer)
            else:
                self._relay(client, upstream, entry, started)
        finally:
            upstream.close()

    @property
    def _timeout_s(self) -> float:
        return min(IDLE_S, self.limits.request_timeout_ms / 1000)

    def _secrets_for(self, target: Target) -> list[Any]:
        """The grant's secrets for a plain-HTTP request to ``target`` (read now, so a rotated one is used)."""
        from ..capabilities._secrets import load_secrets

        rules = [rule for rule in self.secret_rules if "http" in rule.schemes and host_matches(rule.host, target.host)]
        return load_secrets(rules) if rules else []

    def _relay(self, client: socket.socket, upstream: socket.socket, entry: dict[str, Any], started: float) -> None:
        """Copy the answer to the server as it comes, cut at ``max_response_bytes`` (plus its head)."""
        first = upstream.recv(65536)
        self._finish(entry, started, status=_status(first))
        limit = self.limits.max_response_bytes + MAX_HEAD_BYTES
        sent = len(first)
        client.sendall(first)
        while chunk := upstream.recv(65536):
            if sent + len(chunk) > limit:
                client.sendall(chunk[: max(limit - sent, 0)])
                logger.info("stdio server egress %s: answer cut at %d bytes", entry["url"], limit)
                return
            sent += len(chunk)
            client.sendall(chunk)

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


def _open(target: Target, allow_private: bool, timeout_s: float = IDLE_S) -> socket.socket:
    """A connection to the one checked address of ``target.host`` (resolved once)."""
    connect_s = min(CONNECT_S, timeout_s)
    address = pin_address(target, allow_private, connect_s)
    try:
        upstream = socket.create_connection((address, target.port), timeout=connect_s)
    except TimeoutError as exc:
        raise Refusal("timeout", f"connecting to {target.host}:{target.port} timed out") from exc
    except OSError as exc:
        raise Refusal("network", f"cannot connect to {target.host}:{target.port}: {exc}") from exc
    upstream.settimeout(timeout_s)
    return upstream


def _scrubbed_answer(upstream: socket.socket, method: str, secrets: Sequence[Any], limit: int) -> bytes:
    """The whole answer to a request that carried ``secrets``, scrubbed of them (or withheld), re-framed.

    Read with h11 (chunked or not), at most ``limit`` bytes of body (then ``Refusal`` too-large).
    """
    import h11

    from ..capabilities._secrets import Scrubber

    parser = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
    parser.send(h11.Request(method=method, target="/", headers=[("Host", "upstream")]))
    parser.send(h11.EndOfMessage())
    response: Any = None
    body = b""
    while True:
        event = parser.next_event()
        if event is h11.NEED_DATA:
            parser.receive_data(upstream.recv(65536))
        elif isinstance(event, h11.Response):
            response = event
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > limit:
                raise Refusal("too-large", f"an answer over http_limits.max_response_bytes ({limit} bytes)")
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            break
        elif isinstance(event, h11.InformationalResponse):
            continue
    scrub = Scrubber(secrets)
    withhold = any(secret.rule.response_body == "withhold" for secret in secrets)
    allowed = {name.lower() for secret in secrets for name in secret.rule.response_headers}
    headers = []
    for raw_name, raw_value in response.headers:
        name = raw_name.decode("latin-1")
        if name.lower() in _HOP_BY_HOP | {"content-length", "transfer-encoding"}:
            continue
        if withhold and name.lower() not in allowed:
            continue
        headers.append((name, scrub.text(raw_value.decode("latin-1"))))
    body = b"" if withhold else scrub.bytes(body)
    head = f"HTTP/1.1 {response.status_code} {response.reason.decode('latin-1')}\r\n"
    head += "".join(f"{n}: {v}\r\n" for n, v in headers)
    head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode("latin-1") + body


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
