"""URL, header and address checks for the HTTP capability (SSRF defence).

Which addresses may be reached is decided in :mod:`._addresses` (re-exported
here as ``blocked_reason``); this module parses targets, checks headers,
resolves names within the call's time and pins the checked address.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
import ssl
import threading
from typing import Any
from urllib.parse import urlsplit

from ..model._rules import DEFAULT_PORTS, Target, ip_literal, path_refusal
from ..sandbox._compute import waiting
from ._addresses import blocked_reason

__all__ = [
    "MAX_REQUEST_HEADERS",
    "MAX_REQUEST_HEADER_CHARS",
    "Refusal",
    "blocked_reason",
    "check_headers",
    "parse_target",
    "pin_address",
    "ssl_context",
]

_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,256}$")
_RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "upgrade", "te"})
#: Headers one request may carry, and their names and values together, in characters. The HTTP
#: client's cost grows faster than the count, on the host and outside the call's deadline.
MAX_REQUEST_HEADERS = 100
MAX_REQUEST_HEADER_CHARS = 64 * 1024


class Refusal(Exception):
    """A request the host will not (or could not) complete; ``kind`` is the http-error case."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


def check_headers(headers: list[tuple[str, str]]) -> None:
    """Refuse too many headers, CR/LF/NUL anywhere, malformed names and headers the host owns."""
    if len(headers) > MAX_REQUEST_HEADERS:
        raise Refusal("too-large", f"{len(headers)} request headers, over the limit of {MAX_REQUEST_HEADERS}")
    size = sum(len(name) + len(value) for name, value in headers)
    if size > MAX_REQUEST_HEADER_CHARS:
        raise Refusal(
            "too-large", f"request headers of {size} characters, over the {MAX_REQUEST_HEADER_CHARS}-character limit"
        )
    for name, value in headers:
        if any(c in name or c in value for c in "\r\n\0"):
            raise Refusal("denied", f"header {name.strip()[:64]!r} contains CR, LF or NUL")
        if not _HEADER_NAME.match(name):
            raise Refusal("denied", f"header name {name[:64]!r} is not a valid token")
        if name.lower() in _RESERVED_HEADERS:
            raise Refusal("denied", f"header {name} is set by the host, not the tool")


def parse_target(method: str, url: str) -> Target:
    """Split an absolute http(s) URL into what rules match; refuse what they cannot."""
    if not re.fullmatch(r"[A-Z][A-Z0-9_-]{0,31}", method):
        raise Refusal("denied", f"method {method[:32]!r} is not an HTTP method")
    if any(ord(c) <= 0x20 or c == "\x7f" for c in url):
        raise Refusal("denied", "URL contains whitespace or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise Refusal("denied", f"malformed URL: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise Refusal("denied", f"scheme {scheme or '(none)'} not allowed (only http and https)")
    if "@" in parts.netloc:
        raise Refusal("denied", "URLs with userinfo (user:password@) are refused")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise Refusal("denied", "URL has no host")
    path = parts.path or "/"
    problem = path_refusal(path)
    if problem is not None:
        raise Refusal("denied", f"path {path} has {problem}")  # bounded where it is kept, after scrubbing
    address = ip_literal(host)
    return Target(scheme, str(address) if address else host, port or DEFAULT_PORTS[scheme], method, path)


#: Name lookups that may run at once in the process (each on its own daemon thread).
MAX_LOOKUPS = 16
_lookup_slots = threading.BoundedSemaphore(MAX_LOOKUPS)


def _resolve(host: str, port: int, timeout_s: float) -> list[Any]:
    """``getaddrinfo`` bounded by ``timeout_s``: the lookup runs on a daemon thread,
    so a resolver that hangs costs the call its deadline, never the process.

    A hung lookup keeps its thread until the resolver answers, so at most
    :data:`MAX_LOOKUPS` run at once: a lookup that finds them all busy waits for
    one to end within ``timeout_s``, else answers ``timeout`` naming the busy
    resolver without starting a thread. An IP literal needs no lookup.
    """
    literal = _literal_answer(host, port)
    if literal is not None:
        return literal
    with waiting():  # the call's compute slot is free for others while the resolver works
        return _lookup(host, port, timeout_s)


def _lookup(host: str, port: int, timeout_s: float) -> list[Any]:
    if not _lookup_slots.acquire(timeout=max(timeout_s, 0.0)):
        raise Refusal("timeout", f"resolving {host}: all {MAX_LOOKUPS} name lookups are busy (resolver not answering)")
    done = threading.Event()
    answer: list[Any] = []

    def lookup() -> None:
        try:
            answer.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except (OSError, UnicodeError) as exc:
            answer.append(exc)
        finally:
            _lookup_slots.release()
            done.set()

    try:
        threading.Thread(target=lookup, name="glovebox-dns", daemon=True).start()
    except RuntimeError as exc:  # pragma: no cover - the process is out of threads
        _lookup_slots.release()
        raise Refusal("network", f"cannot resolve {host}: {exc}") from exc
    if not done.wait(max(timeout_s, 0.0)):
        raise Refusal("timeout", f"resolving {host} took longer than the {timeout_s * 1000:.0f} ms left")
    if isinstance(answer[0], Exception):
        raise Refusal("network", f"cannot resolve {host}: {answer[0]}")
    return list(answer[0])


def _literal_answer(host: str, port: int) -> list[Any] | None:
    """What ``getaddrinfo`` answers for an IP literal, without a thread; None for a name."""
    address = ip_literal(host)
    if address is None:
        return None
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (str(address), port))]


def pin_address(target: Target, allow_private: bool, timeout_s: float = 10.0) -> str:
    """Resolve ``target.host`` once (within ``timeout_s``), check every address,
    and return the one to connect to."""
    infos = _resolve(target.host, target.port, timeout_s)
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if not addresses:
        raise Refusal("network", f"cannot resolve {target.host}")
    for address in addresses:
        reason = blocked_reason(address, allow_private)
        if reason is not None:
            hint = "" if allow_private or reason.startswith(("a cloud", "a multicast")) else "; not granted"
            raise Refusal("denied", f"host {target.host} resolves to {address}, {reason}{hint}")
    return str(addresses[0])


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """One verifying TLS context for the process (building one costs milliseconds), offering HTTP/1.1 by ALPN."""
    context = ssl.create_default_context()
    context.set_alpn_protocols(["http/1.1"])  # what httpcore sets on it too
    return context
