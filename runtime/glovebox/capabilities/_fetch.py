"""The enforcing HTTP client behind the ``http-fetch`` host function.

Every request, and every redirect hop, goes through the same steps: parse the
URL (http/https only, no userinfo, no dot segments or encoded slashes), check
it against the tool's declared rules AND the call's granted rules with the one
matcher, resolve the host once and refuse non-public addresses unless both
rules allow private addresses, then connect to exactly the address that was
checked (the URL carries the IP; the ``Host`` header, TLS SNI and certificate
verification use the name). A URL or header that httpx would not send is
refused (``denied``) before the request counts against the limits. Limits bound
the number of requests and the bytes each way; time is one deadline per guest
request, ``min(request_timeout_ms, the call's remaining time)``, kept at every
socket operation (see :mod:`._deadline`) and covering name resolution and every
redirect hop. The exchange itself is :mod:`._wire`'s (h11 on a socket to the
pinned address), or an injected httpx transport's. A followed redirect to another scheme, host
or port drops the guest's ``Authorization``, ``Cookie`` and
``Proxy-Authorization``. Secrets are added here and scrubbed from what the
guest gets back.

Failures become :class:`Refusal` (kind = ``denied``, ``timeout``,
``too-large`` or ``network``) and reach the guest as an ``http-error``. The
call state records each refusal in ``denials``, and each failure of a granted
upstream — a network or TLS error, a per-request timeout, a 5xx answer — in
``upstream_failures``; the outcome of the call weighs them (see
:mod:`glovebox.sandbox._outcome`).
"""

from __future__ import annotations

import functools
import logging
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import httpx
from wasmtime.component import Record, Variant

from ..model._grants import Grants, HttpRule
from ..model._rules import Target, check_rules, path_matches
from ..sandbox._callstate import clip
from ..telemetry import _tracing
from ._deadline import Deadline
from ._net import Refusal, check_headers, parse_target, pin_address, ssl_context
from ._secrets import Scrubber, Secret, guard_logs
from ._wire import Decoder, Response, Wire

if TYPE_CHECKING:
    from ..sandbox._callstate import CallState

__all__ = ["HttpCapability"]

logger = logging.getLogger("glovebox.http")

REDIRECTS = frozenset({301, 302, 303, 307, 308})
DROP_ON_NEW_ORIGIN = frozenset({"authorization", "cookie", "proxy-authorization"})
#: The only content codings the host asks for (and decodes, so the scrubber sees plain bytes).
ACCEPT_ENCODING = "gzip, deflate"
DECODED = frozenset({"gzip", "deflate", "identity", ""})
#: URLs up to this length are parsed once per process (1,024 of them kept), longer ones every time.
CACHED_URL_CHARS = 2048


@dataclass
class _Outgoing:
    """The request as the guest asked for it (updated on each redirect hop)."""

    method: str
    url: str
    headers: list[tuple[str, str]]
    body: bytes | None

    def redirected(self, status: int, location: str) -> _Outgoing:
        try:
            url = str(httpx.URL(self.url).join(location))
        except httpx.InvalidURL as exc:
            raise Refusal("denied", f"redirect to a malformed URL: {exc}") from exc
        if status == 303 or (status in (301, 302) and self.method == "POST"):
            return _Outgoing("GET", url, self.headers, None)
        return _Outgoing(self.method, url, self.headers, self.body)


class HostGuard(Protocol):
    """The circuit breakers of upstream hosts, as a call sees them (``glovebox.guards.HostBreakers``)."""

    def blocked_ms(self, host: str) -> int | None:
        """None when a request to ``host`` may go out now, else the milliseconds until one may."""
        ...

    def settle(self, host: str, failed: bool) -> None:
        """Report how a request to ``host`` went."""
        ...


class HttpCapability:
    """What one call may fetch: declared ∩ granted rules, limits and secrets.

    With ``hosts`` (the policy's host circuit breakers), a request to a host
    whose breaker is open is not sent: the guest gets ``network`` and the call
    ends ``circuit_open`` unless the tool copes; every request sent is reported
    (a connection failure, a timeout or a 5xx is a failure).
    """

    def __init__(
        self,
        declared: Sequence[HttpRule],
        grants: Grants,
        secrets: Sequence[Secret] = (),
        transport: httpx.BaseTransport | None = None,
        *,
        tracer: Any = None,
        hosts: HostGuard | None = None,
    ) -> None:
        self.declared = list(declared)
        self.hosts = hosts
        #: The call's tracer (one ``glovebox.http`` span per request), or None when the call is not traced.
        self.tracer = tracer
        #: The last hop's ``url.scheme``, ``server.port`` and ``http.route``, for the request's span.
        self._target: dict[str, Any] = {}
        self.granted = list(grants.http)
        self.limits = grants.http_limits
        self.secrets = list(secrets)
        self.scrubber = Scrubber(self.secrets)
        guard_logs(self.scrubber, active=True)
        self.requests = 0
        #: Response headers shown when a secret sent with the request withholds the body, else None.
        self._shown: frozenset[str] | None = None
        self._transport = transport
        self._deadline = Deadline()
        self._clients: dict[str, httpx.Client] = {}
        #: The connections of the host's own exchange, used when no transport is injected.
        self._wire = Wire(self._deadline, ssl_context) if transport is None else None

    def close(self) -> None:
        """Close the call's connections."""
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        if self._wire is not None:
            self._wire.close()
        guard_logs(self.scrubber, active=False)

    def scrub(self, text: str) -> str:
        """``text`` with this call's secrets replaced."""
        return self.scrubber.text(text)

    def fetch(self, request: Any, state: CallState) -> Record | Variant:
        """Perform one guest request; never raises."""
        entry: dict[str, Any] = {}
        if self.tracer is None:
            return self._perform(request, state, entry)
        with _tracing.http_span(self.tracer) as span:
            self._target = {}
            try:
                return self._perform(request, state, entry)
            finally:
                _tracing.end_http(span, entry, self._target)

    def _perform(self, request: Any, state: CallState, entry: dict[str, Any]) -> Record | Variant:
        method, url = str(request.method).upper(), str(request.url)
        entry.update(method=clip(method, self.scrub, 32), url=_loggable(url))
        started = time.monotonic()
        body = None if request.body is None else bytes(request.body)
        outgoing = _Outgoing(method, url, [(str(k), str(v)) for k, v in request.headers], body)
        request_id = {"capability": "http", "method": entry["method"], "url": entry["url"]}
        self._shown = None
        self._deadline.start(min(self.limits.request_timeout_ms / 1000.0, state.remaining_s()))
        try:
            response = self._fetch(outgoing, state, entry)
        except Refusal as refusal:
            reason = clip(refusal.reason, self.scrub)
            entry["error"] = refusal.kind
            if refusal.kind == "denied":
                state.add_denial({**request_id, "reason": reason})
            elif isinstance(refusal, CircuitRefusal):
                state.add_upstream_failure(
                    {**request_id, "reason": reason, "circuit_open_ms": refusal.wait_ms, "host": refusal.host}
                )
            elif refusal.kind == "network" or (refusal.kind == "timeout" and not state.timed_out):
                state.add_upstream_failure({**request_id, "reason": reason})
                self._settle(entry, True)
            return Variant(refusal.kind, reason)
        finally:
            entry["ms"] = round((time.monotonic() - started) * 1000, 3)
            state.add_egress(entry)
        status = entry.get("status", 0)
        if status >= 500:
            state.add_upstream_failure({**request_id, "reason": f"HTTP {status}", "status": status})
        self._settle(entry, status >= 500)
        return response

    def _settle(self, entry: dict[str, Any], failed: bool) -> None:
        """Report a request that reached (or tried to reach) its host to the host's breaker."""
        host = entry.get("host")
        if self.hosts is not None and host is not None:
            self.hosts.settle(host, failed)

    def _fetch(self, out: _Outgoing, state: CallState, entry: dict[str, Any]) -> Record:
        check_headers(out.headers)
        limit = self.limits.max_request_bytes
        if out.body is not None and len(out.body) > limit:
            raise Refusal("too-large", f"request body is {len(out.body)} bytes, over the {limit}-byte limit")
        _check_header_values(out.headers)
        target = _parse(out.method, out.url)
        for hop in range(self.limits.max_redirects + 1):
            rule = self._authorize(target)
            entry.update(host=target.host, path=target.path)
            response = self._send(target, out, rule, state, entry)
            location = response.header("location")
            if response.status_code not in REDIRECTS or not location or not rule.follow_redirects:
                return self._deliver(response)
            if hop == self.limits.max_redirects:
                raise Refusal("denied", f"more than {self.limits.max_redirects} redirects")
            out = out.redirected(response.status_code, location)
            new = _parse(out.method, out.url)
            if (new.scheme, new.host, new.port) != (target.scheme, target.host, target.port):
                out.headers = [(k, v) for k, v in out.headers if k.lower() not in DROP_ON_NEW_ORIGIN]
            target = new
        raise AssertionError("unreachable")  # pragma: no cover

    def _authorize(self, target: Target) -> HttpRule:
        declared, reason = check_rules(self.declared, target, "declared")
        if declared is None:
            raise Refusal("denied", reason)
        granted, reason = check_rules(self.granted, target, "granted")
        if granted is None:
            raise Refusal("denied", reason)
        assert isinstance(declared, HttpRule) and isinstance(granted, HttpRule)
        if self.tracer is not None:
            route = next((pattern for pattern in granted.paths if path_matches(pattern, target.path)), None)
            self._target = {"url.scheme": target.scheme, "server.port": target.port, "http.route": route or ""}
        return granted.model_copy(
            update={
                "allow_private": declared.allow_private and granted.allow_private,
                "follow_redirects": declared.follow_redirects and granted.follow_redirects,
            }
        )

    def _send(
        self,
        target: Target,
        out: _Outgoing,
        rule: HttpRule,
        state: CallState,
        entry: dict[str, Any],
    ) -> Response:
        if self.requests >= self.limits.max_requests:
            raise Refusal("denied", f"request limit reached ({self.limits.max_requests} per call)")
        timeout = self._deadline.left_s()
        if timeout <= 0:
            raise self._timeout(state, "has passed")
        if self.hosts is not None and (wait_ms := self.hosts.blocked_ms(target.host)) is not None:
            raise CircuitRefusal(target.host, wait_ms)
        try:
            address = pin_address(target, rule.allow_private, timeout)
        except Refusal as refusal:
            if refusal.kind == "timeout" and state.remaining_s() <= 0.005:
                state.timed_out = True
            raise
        self.requests += 1
        headers = self._headers(target, out.headers, rule.propagate_trace)
        entry["bytes_out"] = entry.get("bytes_out", 0) + len(out.body or b"")
        try:
            response = self._open(target, out, address, headers, timeout)
            self._read(response, state, entry)
        except httpx.TimeoutException as exc:
            raise self._timeout(state, "passed while waiting for the server") from exc
        except httpx.HTTPError as exc:
            raise Refusal("network", _network_reason(exc, target.host)) from exc
        entry["status"] = response.status_code
        return response

    def _open(
        self, target: Target, out: _Outgoing, address: str, headers: list[tuple[str, str]], timeout: float
    ) -> Response:
        """Send the request to the pinned ``address`` and read the answer's head."""
        url = _url(out.url)
        if self._wire is not None:
            response = self._wire.send(
                target.scheme, address, target.port, target.host, target.method, url.raw_path, headers, out.body
            )
            _check_location(response)
            return response
        request = self._client(target.host).build_request(
            target.method,
            url.copy_with(host=address, fragment=None),
            headers=headers,
            content=out.body,
            timeout=httpx.Timeout(timeout),
            extensions={"sni_hostname": target.host} if target.scheme == "https" else {},
        )
        return Response.of(self._client(target.host).send(request, stream=True))

    def _read(self, response: Response, state: CallState, entry: dict[str, Any]) -> None:
        coding = _check_encoding(response)
        decoder = Decoder(None if response.decoded else coding)
        chunks, size, cap = [], 0, self.limits.max_response_bytes
        try:
            for raw in response.chunks():
                chunk = decoder.decode(raw, cap - size)
                size += len(chunk)
                if size > cap:
                    raise Refusal("too-large", f"response body is over the {cap}-byte limit")
                if self._deadline.left_s() <= 0:
                    raise self._timeout(state, "passed while reading the response")
                chunks.append(chunk)
            chunk = decoder.flush()
            size += len(chunk)
            if size > cap:
                raise Refusal("too-large", f"response body is over the {cap}-byte limit")
            chunks.append(chunk)
        finally:
            response.close()
            entry["bytes_in"] = entry.get("bytes_in", 0) + size
        response.content = b"".join(chunks)

    def _timeout(self, state: CallState, when: str) -> Refusal:
        """The refusal for a request out of time: the call's deadline (the call ends as
        ``timeout``) when the call has no time left, else ``request_timeout_ms``."""
        if state.remaining_s() <= 0.005:
            state.timed_out = True
            return Refusal("timeout", f"the call's deadline {when}")
        return Refusal("timeout", f"no answer within {self.limits.request_timeout_ms} ms")

    def _headers(self, target: Target, headers: list[tuple[str, str]], propagate: bool) -> list[tuple[str, str]]:
        secrets = [s for s in self.secrets if s.applies_to(target.scheme, target.host)]
        self._withhold(secrets)
        replaced = {s.rule.header.lower() for s in secrets} | {"accept-encoding"}
        trace_headers = _tracing.inject() if propagate and self.tracer is not None else []
        if trace_headers:  # the host's trace context replaces any the guest wrote
            replaced |= {"traceparent", "tracestate"}
        out = [(k, v) for k, v in headers if k.lower() not in replaced]
        out += [(s.rule.header, s.header_value) for s in secrets]
        out += trace_headers
        out.append(("Accept-Encoding", ACCEPT_ENCODING))
        default = {"http": 80, "https": 443}[target.scheme] == target.port
        host = f"[{target.host}]" if ":" in target.host else target.host
        return [("Host", host if default else f"{host}:{target.port}"), *out]

    def _withhold(self, secrets: Sequence[Secret]) -> None:
        """Note the headers a withholding secret sent with this request lets through."""
        for secret in secrets:
            if secret.rule.response_body == "withhold":
                shown = frozenset(name.lower() for name in secret.rule.response_headers)
                self._shown = shown if self._shown is None else self._shown & shown

    def _deliver(self, response: Response) -> Record:
        record = Record()
        headers = response.headers
        body = response.content
        if self._shown is not None:
            headers = [(name, value) for name, value in headers if name.lower() in self._shown]
            body = b""
        record.__dict__.update(
            status=response.status_code,
            headers=[(self.scrubber.text(name), self.scrubber.text(value)) for name, value in headers],
            body=self.scrubber.bytes(body),
        )
        return record

    def _client(self, host: str) -> httpx.Client:
        """The httpx client over the injected transport (each call's own, one per host)."""
        client = self._clients.get(host)
        if client is None:
            client = httpx.Client(transport=self._transport, trust_env=False, follow_redirects=False)
            self._clients[host] = client
        return client


class CircuitRefusal(Refusal):
    """A request not sent: the circuit breaker of its host is open."""

    def __init__(self, host: str, wait_ms: int) -> None:
        super().__init__("network", f"the circuit breaker of upstream host {host} is open; retry in {wait_ms} ms")
        self.wait_ms = wait_ms
        self.host = host


def _parse(method: str, url: str) -> Target:
    """:func:`parse_target`, and refuse what httpx cannot send (too long, a bad IP literal or name)."""
    target = parse_target(method, url)
    try:
        _url(url)
    except httpx.InvalidURL as exc:
        raise Refusal("denied", f"malformed URL: {exc}") from exc
    return target


def _check_location(response: Response) -> None:
    """A redirect's ``Location`` that httpx cannot parse is the server's protocol error, as in httpx's client."""
    location = response.header("location")
    if response.status_code in REDIRECTS and location is not None:
        try:
            _url(location)
        except httpx.InvalidURL as exc:
            response.close()
            raise httpx.RemoteProtocolError(f"Invalid URL in location header: {exc}.") from exc


def _check_header_values(headers: list[tuple[str, str]]) -> None:
    """Refuse header values HTTP/1.1 cannot carry as text (httpx sends ASCII only)."""
    for name, value in headers:
        if not value.isascii():
            raise Refusal("denied", f"header {name} has a non-ASCII value")


def _network_reason(exc: httpx.HTTPError, host: str) -> str:
    """What failed, for the guest and the caller: a TLS failure by its reason, else the error's kind."""
    cause: BaseException | None = exc
    for _ in range(8):  # httpx wraps httpcore, which wraps the ssl/socket error
        if cause is None:
            break
        if isinstance(cause, ssl.SSLError):
            what = getattr(cause, "verify_message", None) or cause.reason or "handshake failed"
            return f"TLS failure talking to {host}: {what}"
        cause = cause.__cause__ or cause.__context__
    return f"{type(exc).__name__} talking to {host}"


def _check_encoding(response: Response) -> str:
    """The answer's content coding; refuse one the host did not ask for (the scrubber could not read it)."""
    coding = response.header("content-encoding") or ""
    unasked = [c.strip() for c in coding.lower().split(",") if c.strip() not in DECODED]
    if unasked:
        response.close()
        raise Refusal(
            "network", f"the server answered in a content-encoding the host did not ask for ({ACCEPT_ENCODING})"
        )
    return coding


def _url(url: str) -> httpx.URL:
    """``httpx.URL(url)``, parsed once per distinct short URL (an ``httpx.URL`` is immutable).

    Raises:
        httpx.InvalidURL: as ``httpx.URL`` does (never cached).
    """
    return _cached_url(url) if len(url) <= CACHED_URL_CHARS else httpx.URL(url)


@functools.lru_cache(maxsize=1024)
def _cached_url(url: str) -> httpx.URL:
    return httpx.URL(url)


@functools.lru_cache(maxsize=1024)
def _loggable_short(url: str) -> str:
    parsed = _cached_url(url)
    return str(parsed.copy_with(userinfo=b"", query=None, fragment=None))


def _loggable(url: str) -> str:
    """The URL without userinfo, query or fragment, for meta (uncut: what records it scrubs, then cuts)."""
    try:
        if len(url) <= CACHED_URL_CHARS:
            return _loggable_short(url)
        return str(httpx.URL(url).copy_with(userinfo=b"", query=None, fragment=None))
    except (httpx.InvalidURL, TypeError, ValueError):
        return url
