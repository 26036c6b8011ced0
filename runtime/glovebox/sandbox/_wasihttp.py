"""``wasi:http/outgoing-handler`` through glovebox's HTTP capability, on a WASI host of glovebox's own.

wasmtime-py offers wasi:http only as wasmtime's own client (``add_wasi_http``),
which would reach the network around the HTTP capability. And the streams of a
wasi:http body are ``wasi:io/streams`` resources, the same type as stdout's:
whoever implements one implements them all. So a component importing
``wasi:http`` is linked, instead of ``add_wasip2``, with the Python host below,
one linker per component (:func:`linker_for`):

- ``wasi:http/types`` and ``outgoing-handler``: a request is sent when its
  response is first waited for or read, by the ``http-fetch`` entry point of the
  ``http`` capability: the same allowlist, SSRF defence, deadline, secrets
  (added by the host, never shown to the guest) and audit. A refused request
  answers ``HTTP-request-denied``, a timeout ``connection-timeout``, a body
  over the limits ``HTTP-request-body-size``/``HTTP-response-body-size``, any
  other failure ``internal-error`` with the reason;
- ``wasi:io`` (error, poll, streams): in memory; a pollable is ready at once, a
  clock's when its instant comes (a wait never outlasts the call's deadline);
- ``wasi:cli``: stdout and stderr into the call's logs (``info``, ``warn``),
  stdin empty, no terminal, environment and arguments empty;
- clocks and randomness work;
- ``wasi:filesystem``: no preopened directory (a ``files`` grant does not apply);
  ``wasi:sockets``: every socket and name lookup answers ``access-denied``;
- anything else the component imports (``wasi:cli/exit``, the methods of a
  resource that cannot be made, the server side of wasi:http) traps when called.

Host functions here never raise for a guest's misuse: a handle that is not the
call's answers an error value where the type has one. Per-call tables live in
:class:`WasiHost`, found through the call on the thread (``current_call``).
"""

from __future__ import annotations

import random
import secrets
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import wasmtime
from wasmtime.component import (
    Component,
    ComponentInstanceType,
    EnumType,
    FuncType,
    Linker,
    ListType,
    OptionType,
    Record,
    RecordType,
    ResourceAny,
    ResourceHost,
    ResourceType,
    ResultType,
    TupleType,
    Variant,
    VariantType,
)

from ..core._world import HOST_INTERFACE
from ._callstate import CallState, HttpRequest, current_call
from ._host import host_functions, make_linker

__all__ = ["Err", "Ok", "Some", "WasiHost", "imports_wasi_http", "linker_for"]

#: Bytes a guest may buffer in one outgoing body (the capability's own limit applies when it is sent).
MAX_BODY_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Ok:
    value: Any = None


@dataclass(frozen=True)
class Err:
    value: Any = None


@dataclass(frozen=True)
class Some:
    value: Any


def imports_wasi_http(engine: wasmtime.Engine, component: Component) -> bool:
    """Whether ``component`` imports any ``wasi:http`` interface."""
    return any(name.startswith("wasi:http/") for name in component.type.imports(engine))


# --- the per-call host -----------------------------------------------------------------------------


@dataclass
class _Body:
    """An outgoing body: what the guest wrote, and whether it finished it."""

    data: bytearray = field(default_factory=bytearray)
    stream_taken: bool = False
    finished: bool = False
    over: bool = False


@dataclass
class _Request:
    headers: int
    method: str = "GET"
    scheme: str | None = None
    authority: str | None = None
    path: str | None = None
    body: _Body = field(default_factory=_Body)
    body_taken: bool = False


@dataclass
class _Future:
    request: _Request
    answer: Any = None  # Ok(response rep) / Err(error-code variant) once sent
    taken: bool = False


@dataclass
class _Input:
    data: bytes
    at: int = 0


@dataclass
class _Output:
    kind: str  # "stdout", "stderr" or "body"
    body: _Body | None = None


@dataclass
class _Fields:
    entries: list[tuple[str, bytes]]
    mutable: bool = True


@dataclass
class _Response:
    status: int
    headers: int
    body: bytes
    consumed: bool = False


@dataclass
class _Pollable:
    until: float = 0.0  # monotonic seconds; 0 when ready at once
    future: _Future | None = None


class WasiHost:
    """One call's WASI resources, by handle."""

    def __init__(self, state: CallState | None) -> None:
        self.state = state
        self._items: dict[int, Any] = {}
        self._next = 1

    def add(self, item: Any) -> int:
        rep = self._next
        self._next += 1
        self._items[rep] = item
        return rep

    def get(self, rep: int, kind: type[Any]) -> Any:
        item = self._items.get(rep)
        return item if isinstance(item, kind) else None

    def drop(self, rep: int) -> None:
        self._items.pop(rep, None)

    # the request leaves when its answer is first wanted
    def settle(self, future: _Future) -> None:
        if future.answer is not None:
            return
        request = future.request
        if request.body_taken and not request.body.finished:
            return  # still being written
        future.answer = self._send(request)

    def _send(self, request: _Request) -> Any:
        if request.body.over:
            return Variant("HTTP-request-body-size", None)
        headers = self.get(request.headers, _Fields)
        pairs = [] if headers is None else [(k, v.decode("latin-1")) for k, v in headers.entries]
        scheme = request.scheme or "https"
        url = f"{scheme}://{request.authority or ''}{request.path or '/'}"
        body = bytes(request.body.data) if request.body_taken else None
        answer = _fetch(self.state, HttpRequest(method=request.method, url=url, headers=pairs, body=body))
        tag = getattr(answer, "tag", None)
        if tag is not None:
            return Variant(*_ERROR_CODES.get(tag, ("internal-error", Some(str(answer.payload)))))
        fields = self.add(_Fields([(str(k).lower(), str(v).encode("latin-1", "replace")) for k, v in answer.headers]))
        self.get(fields, _Fields).mutable = False
        return Ok(self.add(_Response(int(answer.status), fields, bytes(answer.body))))


#: The http capability's answers as wasi:http error codes.
_ERROR_CODES: dict[str, tuple[str, Any]] = {
    "denied": ("HTTP-request-denied", None),
    "timeout": ("connection-timeout", None),
    "too-large": ("HTTP-response-body-size", None),
}


def _fetch(state: CallState | None, request: HttpRequest) -> Any:
    """The ``http`` capability's ``http-fetch`` entry point (a response record or an ``http-error``)."""
    for function in host_functions()[HOST_INTERFACE]:
        if function.name == "http-fetch":
            return function.answer(state, request)
    return Variant("denied", "the http capability is not registered")


_HOSTS: dict[int, WasiHost] = {}


def _host() -> WasiHost:
    """The host of the call on this thread (a throwaway one outside a call)."""
    state = current_call()
    if state is None:
        return WasiHost(None)
    key = id(state)
    host = _HOSTS.get(key)
    if host is None or host.state is not state:
        host = _HOSTS[key] = WasiHost(state)
        weakref.finalize(state, _HOSTS.pop, key, None)
    return host


# --- resources -------------------------------------------------------------------------------------

#: Every resource type the host defines, by interface (unversioned) and name: its host type id.
_RESOURCES: dict[tuple[str, str], int] = {
    ("wasi:io/error", "error"): 0x6C0001,
    ("wasi:io/poll", "pollable"): 0x6C0002,
    ("wasi:io/streams", "input-stream"): 0x6C0003,
    ("wasi:io/streams", "output-stream"): 0x6C0004,
    ("wasi:cli/terminal-input", "terminal-input"): 0x6C0005,
    ("wasi:cli/terminal-output", "terminal-output"): 0x6C0006,
    ("wasi:filesystem/types", "descriptor"): 0x6C0007,
    ("wasi:filesystem/types", "directory-entry-stream"): 0x6C0008,
    ("wasi:sockets/network", "network"): 0x6C0009,
    ("wasi:sockets/tcp", "tcp-socket"): 0x6C000A,
    ("wasi:sockets/udp", "udp-socket"): 0x6C000B,
    ("wasi:sockets/udp", "incoming-datagram-stream"): 0x6C000C,
    ("wasi:sockets/udp", "outgoing-datagram-stream"): 0x6C000D,
    ("wasi:sockets/ip-name-lookup", "resolve-address-stream"): 0x6C000E,
    ("wasi:http/types", "fields"): 0x6C0010,
    ("wasi:http/types", "incoming-request"): 0x6C0011,
    ("wasi:http/types", "outgoing-request"): 0x6C0012,
    ("wasi:http/types", "request-options"): 0x6C0013,
    ("wasi:http/types", "response-outparam"): 0x6C0014,
    ("wasi:http/types", "incoming-response"): 0x6C0015,
    ("wasi:http/types", "incoming-body"): 0x6C0016,
    ("wasi:http/types", "future-trailers"): 0x6C0017,
    ("wasi:http/types", "outgoing-response"): 0x6C0018,
    ("wasi:http/types", "outgoing-body"): 0x6C0019,
    ("wasi:http/types", "future-incoming-response"): 0x6C001A,
}
_T = {name: ty for (_, name), ty in _RESOURCES.items()}


def _own(kind: str, item: Any) -> ResourceHost:
    return ResourceHost.own(_host().add(item), _T[kind])


def _rep(store: Any, handle: Any) -> int:
    """The host handle behind a resource argument (0 when it is not one of the host's)."""
    try:
        host = handle if isinstance(handle, ResourceHost) else handle.to_host(store)
        return int(host.rep)
    except wasmtime.WasmtimeError:
        return 0


def _item(store: Any, handle: Any, kind: type[Any]) -> Any:
    return _host().get(_rep(store, handle), kind)


def _drop(store: Any, rep: int) -> None:
    state = current_call()
    if state is not None and id(state) in _HOSTS:
        _HOSTS[id(state)].drop(rep)


# --- wasi:io ---------------------------------------------------------------------------------------

_CLOSED = Err(Variant("closed"))


def _failed(message: str) -> Err:
    return Err(Variant("last-operation-failed", _own("error", message)))


def _error_debug(store: Any, error: Any) -> str:
    item = _host().get(_rep(store, error), str)
    return item if item is not None else "error"


def _wait(pollable: _Pollable) -> None:
    host = _host()
    if pollable.future is not None:
        host.settle(pollable.future)
    if pollable.until:
        limit = host.state.deadline if host.state is not None else time.monotonic()
        delay = min(pollable.until, limit) - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        if host.state is not None and pollable.until > limit:
            host.state.timed_out = True  # the wait ran into the call's deadline: the call ends `timeout`


def _ready(pollable: _Pollable) -> bool:
    if pollable.future is not None:
        _host().settle(pollable.future)
        return pollable.future.answer is not None
    return time.monotonic() >= pollable.until


def _pollable_ready(store: Any, handle: Any) -> bool:
    item = _item(store, handle, _Pollable)
    return True if item is None else _ready(item)


def _pollable_block(store: Any, handle: Any) -> None:
    item = _item(store, handle, _Pollable)
    if item is not None:
        _wait(item)


def _poll(store: Any, handles: list[Any]) -> list[int]:
    items = [_item(store, handle, _Pollable) for handle in handles]
    ready = [i for i, item in enumerate(items) if item is None or _ready(item)]
    if ready or not items:
        return ready
    _wait(min(items, key=lambda item: item.until))
    return [i for i, item in enumerate(items) if _ready(item)] or [0]


def _read(store: Any, handle: Any, length: int) -> Any:
    item = _item(store, handle, _Input)
    if item is None or item.at >= len(item.data):
        return _CLOSED
    chunk = item.data[item.at : item.at + min(length, 1 << 20)]
    item.at += len(chunk)
    return Ok(chunk)


def _skip(store: Any, handle: Any, length: int) -> Any:
    read = _read(store, handle, length)
    return Ok(len(read.value)) if isinstance(read, Ok) else read


def _subscribe(store: Any, handle: Any) -> ResourceHost:
    return _own("pollable", _Pollable())


def _check_write(store: Any, handle: Any) -> Any:
    return _CLOSED if _item(store, handle, _Output) is None else Ok(1 << 20)


def _write(store: Any, handle: Any, data: bytes) -> Any:
    item = _item(store, handle, _Output)
    if item is None:
        return _CLOSED
    if item.body is None:
        state = _host().state
        text = bytes(data).decode("utf-8", "replace").rstrip("\n")
        if state is not None and text:
            state.add_log("info" if item.kind == "stdout" else "warn", text)
        return Ok()
    if item.body.finished:
        return _CLOSED
    if len(item.body.data) + len(data) > MAX_BODY_BYTES:
        item.body.over = True
        return _failed(f"the request body is over {MAX_BODY_BYTES} bytes")
    item.body.data += data
    return Ok()


def _write_zeroes(store: Any, handle: Any, length: int) -> Any:
    return _write(store, handle, bytes(min(length, MAX_BODY_BYTES + 1)))


def _flush(store: Any, handle: Any) -> Any:
    return _CLOSED if _item(store, handle, _Output) is None else Ok()


def _splice(store: Any, handle: Any, source: Any, length: int) -> Any:
    read = _read(store, source, length)
    if not isinstance(read, Ok):
        return read
    written = _write(store, handle, read.value)
    return Ok(len(read.value)) if isinstance(written, Ok) else written


_IO: dict[str, Callable[..., Any]] = {
    "[method]error.to-debug-string": _error_debug,
    "[method]pollable.ready": _pollable_ready,
    "[method]pollable.block": _pollable_block,
    "poll": _poll,
    "[method]input-stream.read": _read,
    "[method]input-stream.blocking-read": _read,
    "[method]input-stream.skip": _skip,
    "[method]input-stream.blocking-skip": _skip,
    "[method]input-stream.subscribe": _subscribe,
    "[method]output-stream.check-write": _check_write,
    "[method]output-stream.write": _write,
    "[method]output-stream.blocking-write-and-flush": _write,
    "[method]output-stream.flush": _flush,
    "[method]output-stream.blocking-flush": _flush,
    "[method]output-stream.subscribe": _subscribe,
    "[method]output-stream.write-zeroes": _write_zeroes,
    "[method]output-stream.blocking-write-zeroes-and-flush": _write_zeroes,
    "[method]output-stream.splice": _splice,
    "[method]output-stream.blocking-splice": _splice,
}

# --- wasi:cli, clocks, random, filesystem, sockets ------------------------------------------------


def _now_ns() -> int:
    return time.monotonic_ns()


def _subscribe_instant(store: Any, when: int) -> ResourceHost:
    return _own("pollable", _Pollable(until=max(when / 1e9, 1e-9)))


def _subscribe_duration(store: Any, duration: int) -> ResourceHost:
    return _own("pollable", _Pollable(until=time.monotonic() + duration / 1e9))


def _wall_now(store: Any) -> Record:
    ns = time.time_ns()
    return _record(seconds=ns // 1_000_000_000, nanoseconds=ns % 1_000_000_000)


def _record(**values: Any) -> Record:
    record = Record()
    record.__dict__.update(values)
    return record


def _random_bytes(store: Any, length: int) -> bytes:
    return secrets.token_bytes(min(length, 1 << 20))


_DENIED = Err(Variant("access-denied"))

_SYSTEM: dict[str, dict[str, Callable[..., Any]]] = {
    "wasi:cli/environment": {
        "get-environment": lambda store: [],
        "get-arguments": lambda store: [],
        "initial-cwd": lambda store: None,
    },
    "wasi:cli/stdin": {"get-stdin": lambda store: _own("input-stream", _Input(b""))},
    "wasi:cli/stdout": {"get-stdout": lambda store: _own("output-stream", _Output("stdout"))},
    "wasi:cli/stderr": {"get-stderr": lambda store: _own("output-stream", _Output("stderr"))},
    "wasi:cli/terminal-stdin": {"get-terminal-stdin": lambda store: None},
    "wasi:cli/terminal-stdout": {"get-terminal-stdout": lambda store: None},
    "wasi:cli/terminal-stderr": {"get-terminal-stderr": lambda store: None},
    "wasi:clocks/monotonic-clock": {
        "now": lambda store: _now_ns(),
        "resolution": lambda store: 1,
        "subscribe-instant": _subscribe_instant,
        "subscribe-duration": _subscribe_duration,
    },
    "wasi:clocks/wall-clock": {"now": _wall_now, "resolution": lambda store: _record(seconds=0, nanoseconds=1)},
    "wasi:random/random": {
        "get-random-bytes": _random_bytes,
        "get-random-u64": lambda store: secrets.randbits(64),
    },
    "wasi:random/insecure": {
        "get-insecure-random-bytes": lambda store, length: random.randbytes(min(length, 1 << 20)),
        "get-insecure-random-u64": lambda store: random.getrandbits(64),
    },
    "wasi:random/insecure-seed": {"insecure-seed": lambda store: (random.getrandbits(64), random.getrandbits(64))},
    "wasi:filesystem/preopens": {"get-directories": lambda store: []},
    "wasi:filesystem/types": {"filesystem-error-code": lambda store, error: None},
    "wasi:sockets/instance-network": {"instance-network": lambda store: _own("network", object())},
    "wasi:sockets/tcp-create-socket": {"create-tcp-socket": lambda store, family: _DENIED},
    "wasi:sockets/udp-create-socket": {"create-udp-socket": lambda store, family: _DENIED},
    "wasi:sockets/ip-name-lookup": {"resolve-addresses": lambda store, network, name: _DENIED},
}

# --- wasi:http -------------------------------------------------------------------------------------

_HEADER_ERROR = Err(Variant("immutable"))


def _fields_new(store: Any) -> ResourceHost:
    return _own("fields", _Fields([]))


def _fields_from_list(store: Any, entries: list[tuple[str, bytes]]) -> Any:
    for name, value in entries:
        if not _valid_header(name, value):
            return Err(Variant("invalid-syntax"))
    return Ok(_own("fields", _Fields([(name.lower(), bytes(value)) for name, value in entries])))


def _valid_header(name: str, value: bytes) -> bool:
    token = name and all(33 <= ord(c) < 127 and c not in '"(),/:;<=>?@[\\]{}' for c in name)
    return bool(token) and b"\r" not in value and b"\n" not in value and b"\0" not in value


def _fields_get(store: Any, handle: Any, name: str) -> list[bytes]:
    item = _item(store, handle, _Fields)
    return [] if item is None else [v for k, v in item.entries if k == name.lower()]


def _fields_has(store: Any, handle: Any, name: str) -> bool:
    return bool(_fields_get(store, handle, name))


def _fields_set(store: Any, handle: Any, name: str, values: list[bytes]) -> Any:
    item = _item(store, handle, _Fields)
    if item is None or not item.mutable:
        return _HEADER_ERROR
    if not all(_valid_header(name, value) for value in values) or not name:
        return Err(Variant("invalid-syntax"))
    item.entries = [(k, v) for k, v in item.entries if k != name.lower()]
    item.entries += [(name.lower(), bytes(value)) for value in values]
    return Ok()


def _fields_delete(store: Any, handle: Any, name: str) -> Any:
    item = _item(store, handle, _Fields)
    if item is None or not item.mutable:
        return _HEADER_ERROR
    item.entries = [(k, v) for k, v in item.entries if k != name.lower()]
    return Ok()


def _fields_append(store: Any, handle: Any, name: str, value: bytes) -> Any:
    item = _item(store, handle, _Fields)
    if item is None or not item.mutable:
        return _HEADER_ERROR
    if not _valid_header(name, value):
        return Err(Variant("invalid-syntax"))
    item.entries.append((name.lower(), bytes(value)))
    return Ok()


def _fields_entries(store: Any, handle: Any) -> list[tuple[str, bytes]]:
    item = _item(store, handle, _Fields)
    return [] if item is None else list(item.entries)


def _fields_clone(store: Any, handle: Any) -> ResourceHost:
    item = _item(store, handle, _Fields)
    return _own("fields", _Fields(list(item.entries) if item is not None else []))


def _request_new(store: Any, headers: Any) -> ResourceHost:
    fields = _item(store, headers, _Fields)
    copy = _host().add(_Fields(list(fields.entries) if fields is not None else []))
    return _own("outgoing-request", _Request(copy))


def _request(store: Any, handle: Any) -> _Request | None:
    item: _Request | None = _item(store, handle, _Request)
    return item


def _request_body(store: Any, handle: Any) -> Any:
    item = _request(store, handle)
    if item is None or item.body_taken:
        return Err()
    item.body_taken = True
    return Ok(_own("outgoing-body", item.body))


_METHODS = ("get", "head", "post", "put", "delete", "connect", "options", "trace", "patch")


def _method_name(method: Any) -> str:
    tag = getattr(method, "tag", method)
    return str(method.payload if tag == "other" else tag).upper()


def _method(store: Any, handle: Any) -> Variant:
    item = _request(store, handle)
    name = "GET" if item is None else item.method
    return Variant(name.lower()) if name.lower() in _METHODS else Variant("other", name)


def _set_method(store: Any, handle: Any, method: Any) -> Any:
    item = _request(store, handle)
    name = _method_name(method)
    if item is None or not name or not all(33 <= ord(c) < 127 for c in name):
        return Err()
    item.method = name
    return Ok()


def _getter(attribute: str) -> Callable[[Any, Any], Any]:
    def get(store: Any, handle: Any) -> Any:
        item = _request(store, handle)
        value = None if item is None else getattr(item, attribute)
        return None if value is None else Some(value)

    return get


def _setter(attribute: str) -> Callable[[Any, Any, Any], Any]:
    def put(store: Any, handle: Any, value: Any) -> Any:
        item = _request(store, handle)
        if item is None or (value is not None and any(c in str(value) for c in "\r\n\0 ")):
            return Err()
        setattr(item, attribute, value)
        return Ok()

    return put


def _scheme(store: Any, handle: Any) -> Any:
    item = _request(store, handle)
    if item is None or item.scheme is None:
        return None
    return Some(Variant(item.scheme) if item.scheme in ("http", "https") else Variant("other", item.scheme))


def _set_scheme(store: Any, handle: Any, scheme: Any) -> Any:
    item = _request(store, handle)
    if item is None:
        return Err()
    tag = getattr(scheme, "tag", None)
    item.scheme = None if scheme is None else str(scheme.payload if tag == "other" else tag).lower()
    return Ok()


def _request_headers(store: Any, handle: Any) -> ResourceHost:
    item = _request(store, handle)
    fields = None if item is None else _host().get(item.headers, _Fields)
    return _own("fields", fields if fields is not None else _Fields([]))  # the request's own, shared


def _body_write(store: Any, handle: Any) -> Any:
    item = _item(store, handle, _Body)
    if item is None or item.stream_taken:
        return Err()
    item.stream_taken = True
    return Ok(_own("output-stream", _Output("body", item)))


def _body_finish(store: Any, handle: Any, trailers: Any) -> Any:
    item = _item(store, handle, _Body)
    if item is None:
        return Err(Variant("internal-error", Some("not an outgoing body")))
    item.finished = True
    if item.over:
        return Err(Variant("HTTP-request-body-size", Some(len(item.data))))
    return Ok()


def _handle(store: Any, request: Any, options: Any) -> Any:
    item = _request(store, request)
    if item is None:
        return Err(Variant("internal-error", Some("not an outgoing request")))
    future = _Future(item)
    if not item.body_taken:
        _host().settle(future)
    return Ok(_own("future-incoming-response", future))


def _future_subscribe(store: Any, handle: Any) -> ResourceHost:
    return _own("pollable", _Pollable(future=_item(store, handle, _Future)))


def _future_get(store: Any, handle: Any) -> Any:
    item = _item(store, handle, _Future)
    if item is None:
        return Some(Err())
    _host().settle(item)
    if item.answer is None:
        return None
    if item.taken:
        return Some(Err())
    item.taken = True
    answer = item.answer
    if isinstance(answer, Ok):
        return Some(Ok(Ok(ResourceHost.own(answer.value, _T["incoming-response"]))))
    return Some(Ok(Err(answer)))


def _response(store: Any, handle: Any) -> _Response | None:
    item: _Response | None = _item(store, handle, _Response)
    return item


def _status(store: Any, handle: Any) -> int:
    item = _response(store, handle)
    return 0 if item is None else item.status


def _response_headers(store: Any, handle: Any) -> ResourceHost:
    item = _response(store, handle)
    fields = None if item is None else _host().get(item.headers, _Fields)
    return _own("fields", _Fields(list(fields.entries) if fields is not None else [], mutable=False))


def _consume(store: Any, handle: Any) -> Any:
    item = _response(store, handle)
    if item is None or item.consumed:
        return Err()
    item.consumed = True
    return Ok(_own("incoming-body", _Input(item.body)))


def _incoming_stream(store: Any, handle: Any) -> Any:
    item = _item(store, handle, _Input)
    if item is None:
        return Err()
    return Ok(_own("input-stream", _Input(item.data)))


def _incoming_finish(store: Any, handle: Any) -> ResourceHost:
    return _own("future-trailers", object())


def _trailers_get(store: Any, handle: Any) -> Any:
    return Some(Ok(Ok(None)))


def _options_new(store: Any) -> ResourceHost:
    return _own("request-options", {})


_HTTP: dict[str, Callable[..., Any]] = {
    "[constructor]fields": _fields_new,
    "[static]fields.from-list": _fields_from_list,
    "[method]fields.get": _fields_get,
    "[method]fields.has": _fields_has,
    "[method]fields.set": _fields_set,
    "[method]fields.delete": _fields_delete,
    "[method]fields.append": _fields_append,
    "[method]fields.entries": _fields_entries,
    "[method]fields.clone": _fields_clone,
    "[constructor]outgoing-request": _request_new,
    "[method]outgoing-request.body": _request_body,
    "[method]outgoing-request.method": _method,
    "[method]outgoing-request.set-method": _set_method,
    "[method]outgoing-request.path-with-query": _getter("path"),
    "[method]outgoing-request.set-path-with-query": _setter("path"),
    "[method]outgoing-request.scheme": _scheme,
    "[method]outgoing-request.set-scheme": _set_scheme,
    "[method]outgoing-request.authority": _getter("authority"),
    "[method]outgoing-request.set-authority": _setter("authority"),
    "[method]outgoing-request.headers": _request_headers,
    "[constructor]request-options": _options_new,
    "[method]request-options.connect-timeout": lambda store, handle: None,
    "[method]request-options.set-connect-timeout": lambda store, handle, value: Ok(),
    "[method]request-options.first-byte-timeout": lambda store, handle: None,
    "[method]request-options.set-first-byte-timeout": lambda store, handle, value: Ok(),
    "[method]request-options.between-bytes-timeout": lambda store, handle: None,
    "[method]request-options.set-between-bytes-timeout": lambda store, handle, value: Ok(),
    "[method]outgoing-body.write": _body_write,
    "[static]outgoing-body.finish": _body_finish,
    "[method]future-incoming-response.subscribe": _future_subscribe,
    "[method]future-incoming-response.get": _future_get,
    "[method]incoming-response.status": _status,
    "[method]incoming-response.headers": _response_headers,
    "[method]incoming-response.consume": _consume,
    "[method]incoming-body.stream": _incoming_stream,
    "[static]incoming-body.finish": _incoming_finish,
    "[method]future-trailers.subscribe": _subscribe,
    "[method]future-trailers.get": _trailers_get,
    "http-error-code": lambda store, error: None,
}

_IMPLEMENTED: dict[str, dict[str, Callable[..., Any]]] = {
    **_SYSTEM,
    "wasi:io/error": _IO,
    "wasi:io/poll": _IO,
    "wasi:io/streams": _IO,
    "wasi:http/types": _HTTP,
    "wasi:http/outgoing-handler": {"handle": _handle},
}

# --- values into wasmtime-py's forms -------------------------------------------------------------


Lowering = Callable[[Any], Any]


def _same(value: Any) -> Any:
    return value


def _plan(ty: Any) -> Lowering:
    """How to put a value (``Ok``, ``Err``, ``Some``, tagged ``Variant``) in wasmtime-py's form for ``ty``.

    Planned once per function when the linker is made (reading a type is a round trip
    through wasmtime's C API). wasmtime-py leaves a variant, option or result untagged
    when its cases' Python types tell them apart (``None`` for ``none``, the payload
    itself for ``some``).
    """
    if isinstance(ty, OptionType):
        return _option(ty._tagged(), _plan(ty.payload))
    if isinstance(ty, ResultType):
        ok, err = (None if case is None else _plan(case) for case in (ty.ok, ty.err))
        return _result(ty._tagged(), ok, err)
    if isinstance(ty, VariantType):
        return _variant(ty._tagged(), {name: None if case is None else _plan(case) for name, case in ty.cases})
    if isinstance(ty, EnumType):
        return lambda value: value.tag if isinstance(value, Variant) else value
    if isinstance(ty, ListType) and not ty._is_bytes():
        element = _plan(ty.element)
        return lambda value: [element(item) for item in value]
    if isinstance(ty, TupleType):
        elements = [_plan(element) for element in ty.elements]
        return lambda value: tuple(lower(item) for lower, item in zip(elements, value, strict=True))
    if isinstance(ty, RecordType):
        return _record_plan([(name, _plan(field_ty)) for name, field_ty in ty.fields])
    return _same


def _option(tagged: bool, inner: Lowering) -> Lowering:
    def lower(value: Any) -> Any:
        if value is None:
            return Variant("none") if tagged else None
        payload = inner(value.value if isinstance(value, Some) else value)
        return Variant("some", payload) if tagged else payload

    return lower


def _result(tagged: bool, ok: Lowering | None, err: Lowering | None) -> Lowering:
    def lower(value: Any) -> Any:
        is_ok = isinstance(value, Ok)
        case = ok if is_ok else err
        payload = None if case is None else case(value.value)
        return Variant("ok" if is_ok else "err", payload) if tagged else payload

    return lower


def _variant(tagged: bool, cases: dict[str, Lowering | None]) -> Lowering:
    def lower(value: Any) -> Any:
        case = cases.get(value.tag)
        payload = None if case is None else case(value.payload)
        return Variant(value.tag, payload) if tagged else payload

    return lower


def _record_plan(fields: list[tuple[str, Lowering]]) -> Lowering:
    def lower(value: Any) -> Record:
        record = Record()
        record.__dict__.update({name: field(getattr(value, name)) for name, field in fields})
        return record

    return lower


def _host_side(store: Any, value: Any) -> Any:
    if isinstance(value, ResourceAny):
        try:
            return value.to_host(store)
        except wasmtime.WasmtimeError:
            return value
    return value


def _adapted(function: Callable[..., Any], ty: FuncType) -> Callable[..., Any]:
    lower = None if ty.result is None else _plan(ty.result)

    def call(store: Any, *args: Any) -> Any:
        # Every resource handed over is taken to the host's side at once: wasmtime ends a borrow there,
        # and a borrow a function left alone would fail the call ("borrow handles still remain").
        answer = function(store, *[_host_side(store, arg) for arg in args])
        return None if lower is None else lower(answer)

    return call


# --- the linker ------------------------------------------------------------------------------------

_LINKERS: weakref.WeakKeyDictionary[Component, Linker] = weakref.WeakKeyDictionary()


def _unversioned(name: str) -> str:
    return name.split("@", 1)[0]


def linker_for(engine: wasmtime.Engine, component: Component) -> Linker:
    """The linker of a component importing wasi:http: the host interface, and WASI from this module."""
    linker = _LINKERS.get(component)
    if linker is not None:
        return linker
    linker = make_linker(engine)
    with linker.root() as root:
        for name, item in component.type.imports(engine).items():
            interface = _unversioned(name)
            if not name.startswith("wasi:") or not isinstance(item.ty, ComponentInstanceType):
                continue
            with root.add_instance(name) as instance:
                _define(instance, interface, item.ty.exports(engine), engine)
    linker.define_unknown_imports_as_traps(component)
    _LINKERS[component] = linker
    return linker


def _define(instance: Any, interface: str, exports: dict[str, Any], engine: wasmtime.Engine) -> None:
    functions = _IMPLEMENTED.get(interface, {})
    for export, item in exports.items():
        if isinstance(item.ty, ResourceType):
            kind = _RESOURCES.get((interface, export))
            if kind is not None:
                instance.add_resource(export, ResourceType.host(kind), _drop)
        elif isinstance(item.ty, FuncType) and export in functions:
            instance.add_func(export, _adapted(functions[export], item.ty))


def reset_call(state: CallState) -> None:
    """Forget ``state``'s resources (the call is over)."""
    _HOSTS.pop(id(state), None)
