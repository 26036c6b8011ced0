"""The back channel to an authorization server: JSON over httpx, no redirects, answers capped.

Every request goes out with ``follow_redirects=False``: an endpoint that
answers 3xx is refused (``redirect_refused``) whatever the target, so a
token request never lands on another origin. A URL must be https, or plain
http to a loopback address (``insecure_url``). Answers are read up to
:data:`MAX_BYTES`.
"""

from __future__ import annotations

import ipaddress
import json
import threading
from typing import Any
from urllib.parse import urlsplit

import httpx

from ._errors import ConnectError

__all__ = ["MAX_BYTES", "Backchannel", "check_secure", "origin"]

#: The largest answer read from an OAuth endpoint.
MAX_BYTES = 256 * 1024
TIMEOUT_S = 10.0


def origin(url: str) -> str:
    """``scheme://host[:port]`` of a URL."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_secure(url: str, what: str) -> str:
    """``url`` when it is https (or http to loopback) with a host; else ``insecure_url``."""
    parts = urlsplit(url)
    ok = parts.scheme == "https" or (parts.scheme == "http" and _loopback(parts.hostname or ""))
    if not ok or not parts.hostname or parts.username or parts.fragment:
        raise ConnectError("insecure_url", f"{what} {url!r} must be https (plain http only to loopback)")
    return url


_shared: httpx.Client | None = None
_shared_lock = threading.Lock()


def _default_client() -> httpx.Client:
    """One client for every connection of the process (its TLS context is built once: ~tens of ms)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = httpx.Client(timeout=TIMEOUT_S, follow_redirects=False)
        return _shared


class Backchannel:
    """Requests to OAuth endpoints (``transport`` injectable, as everywhere in glovebox)."""

    def __init__(self, transport: httpx.BaseTransport | None = None) -> None:
        self._own = transport is not None
        self.client = (
            httpx.Client(transport=transport, timeout=TIMEOUT_S, follow_redirects=False)
            if transport is not None
            else _default_client()
        )

    def close(self) -> None:
        if self._own:
            self.client.close()

    def __enter__(self) -> Backchannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, url: str, what: str, **kwargs: Any) -> httpx.Response:
        """One request; a redirect is refused, a network failure is ``discovery_failed`` or ``token_refused``."""
        check_secure(url, what)
        try:
            with self.client.stream(method, url, headers={"Accept": "application/json"}, **kwargs) as response:
                body = b""
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_BYTES:
                        raise ConnectError("discovery_failed", f"{what} {url} answered over {MAX_BYTES} bytes")
        except httpx.HTTPError as exc:
            raise ConnectError("discovery_failed", f"{what} {url} cannot be reached ({type(exc).__name__})") from None
        if response.is_redirect:
            target = response.headers.get("location", "")
            where = origin(str(response.url.join(target))) if target else "nowhere"
            raise ConnectError(
                "redirect_refused", f"{what} {url} redirected to {where}; OAuth endpoints are not followed"
            )
        return httpx.Response(response.status_code, headers=response.headers, content=body, request=response.request)

    def json(self, method: str, url: str, what: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
        """The status and the JSON object answered (``{}`` when the body is not a JSON object)."""
        response = self.request(method, url, what, **kwargs)
        try:
            document = json.loads(response.content)
        except ValueError:
            document = None
        return response.status_code, document if isinstance(document, dict) else {}
