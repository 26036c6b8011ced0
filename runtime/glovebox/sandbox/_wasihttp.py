"""``wasi:http/outgoing-handler`` through glovebox's HTTP capability, on a WASI host of glovebox's own.

wasmtime-py offers wasi:http only as wasmtime's own client (``add_wasi_http``),
which would reach the network around the HTTP capability. And the streams of a
wasi:http body are ``wasi:io/streams`` resources, the same type as stdout's:
whoever implements one implements them all. So a component importing
``wasi:http`` is linked, instead of ``add_wasip2``, with glovebox's own WASI host
in Python (this module, ``_wasiio`` and ``_wasihost``), one linker per component
(:func:`linker_for`):

- ``wasi:http/types`` and ``outgoing-handler``: a request is sent when its
  response is first waited for or read, by the ``http-fetch`` entry point of the
  ``http`` capability: the same allowlist, SSRF defence, deadline, secrets
  (added by the host, never shown to the guest) and audit. A refused request
  answers ``HTTP-request-denied``, a timeout ``connection-timeout``, a body
  over the limits ``HTTP-request-body-size``/``HTTP-response-body-size``, any
  other failure ``internal-error`` with the reason;
- ``wasi:io`` (error, poll, streams, in ``_wasiio``): in memory; a pollable is ready at once, a
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
``_wasihost.WasiHost``, found through the call on the thread (``current_call``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import wasmtime
from wasmtime.component import Component, ComponentInstanceType, FuncType, Linker, ResourceHost, ResourceType, Variant

from ..core._world import HOST_INTERFACE
from ._callstate import CallState, HttpRequest
from ._host import host_functions, make_linker
from ._wasihost import (
    RESOURCES,
    TYPES,
    Body,
    Err,
    Input,
    Ok,
    Output,
    Pollable,
    Some,
    WasiHost,
    adapted,
    current,
    drop_item,
    lookup,
    own,
)
from ._wasiio import IO, SYSTEM, subscribe

__all__ = ["imports_wasi_http", "linker_for"]


def imports_wasi_http(engine: wasmtime.Engine, component: Component) -> bool:
    """Whether ``component`` imports any ``wasi:http`` interface."""
    return any(name.startswith("wasi:http/") for name in component.type.imports(engine))


@dataclass
class _Request:
    headers: int
    method: str = "GET"
    scheme: str | None = None
    authority: str | None = None
    path: str | None = None
    body: Body = field(default_factory=Body)
    body_taken: bool = False


@dataclass
class _Future:
    request: _Request
    answer: Any = None  # Ok(response rep) / Err(error-code variant) once sent
    taken: bool = False


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


def _settle(future: _Future) -> bool:
    """Send the future's request if it is complete and not sent yet; whether its answer is there."""
    if future.answer is None and not (future.request.body_taken and not future.request.body.finished):
        future.answer = _send(current(), future.request)
    return future.answer is not None


def _send(call: WasiHost, request: _Request) -> Any:
    if request.body.over:
        return Variant("HTTP-request-body-size", None)
    headers = call.get(request.headers, _Fields)
    pairs = [] if headers is None else [(k, v.decode("latin-1")) for k, v in headers.entries]
    scheme = request.scheme or "https"
    url = f"{scheme}://{request.authority or ''}{request.path or '/'}"
    body = bytes(request.body.data) if request.body_taken else None
    answer = _fetch(call.state, HttpRequest(method=request.method, url=url, headers=pairs, body=body))
    tag = getattr(answer, "tag", None)
    if tag is not None:
        return Variant(*_ERROR_CODES.get(tag, ("internal-error", Some(str(answer.payload)))))
    entries = [(str(k).lower(), str(v).encode("latin-1", "replace")) for k, v in answer.headers]
    fields = call.add(_Fields(entries, mutable=False))
    return Ok(call.add(_Response(int(answer.status), fields, bytes(answer.body))))


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


# --- wasi:http -------------------------------------------------------------------------------------

_HEADER_ERROR = Err(Variant("immutable"))


def _fields_new(store: Any) -> ResourceHost:
    return own("fields", _Fields([]))


def _fields_from_list(store: Any, entries: list[tuple[str, bytes]]) -> Any:
    for name, value in entries:
        if not _valid_header(name, value):
            return Err(Variant("invalid-syntax"))
    return Ok(own("fields", _Fields([(name.lower(), bytes(value)) for name, value in entries])))


def _valid_header(name: str, value: bytes) -> bool:
    token = name and all(33 <= ord(c) < 127 and c not in '"(),/:;<=>?@[\\]{}' for c in name)
    return bool(token) and b"\r" not in value and b"\n" not in value and b"\0" not in value


def _fields_get(store: Any, handle: Any, name: str) -> list[bytes]:
    item = lookup(store, handle, _Fields)
    return [] if item is None else [v for k, v in item.entries if k == name.lower()]


def _fields_has(store: Any, handle: Any, name: str) -> bool:
    return bool(_fields_get(store, handle, name))


def _fields_set(store: Any, handle: Any, name: str, values: list[bytes]) -> Any:
    item = lookup(store, handle, _Fields)
    if item is None or not item.mutable:
        return _HEADER_ERROR
    if not all(_valid_header(name, value) for value in values) or not name:
        return Err(Variant("invalid-syntax"))
    kept = [(k, v) for k, v in item.entries if k != name.lower()]
    if _too_many(kept, len(values), sum(len(v) for v in values)):
        return Err(Variant("forbidden"))
    item.entries = kept + [(name.lower(), bytes(value)) for value in values]
    return Ok()


def _fields_delete(store: Any, handle: Any, name: str) -> Any:
    item = lookup(store, handle, _Fields)
    if item is None or not item.mutable:
        return _HEADER_ERROR
    item.entries = [(k, v) for k, v in item.entries if k != name.lower()]
    return Ok()


def _fields_append(store: Any, handle: Any, name: str, value: bytes) -> Any:
    item = lookup(store, handle, _Fields)
    if item is None or not item.mutable:
        return _HEADER_ERROR
    if not _valid_header(name, value):
        return Err(Variant("invalid-syntax"))
    if _too_many(item.entries, 1, len(value)):
        return Err(Variant("forbidden"))
    item.entries.append((name.lower(), bytes(value)))
    return Ok()


#: Entries and bytes one set of fields may hold (the capability checks the request's headers again).
MAX_FIELDS, MAX_FIELD_BYTES = 256, 64 * 1024


def _too_many(entries: list[tuple[str, bytes]], more: int, more_bytes: int) -> bool:
    size = sum(len(k) + len(v) for k, v in entries) + more_bytes
    return len(entries) + more > MAX_FIELDS or size > MAX_FIELD_BYTES


def _fields_entries(store: Any, handle: Any) -> list[tuple[str, bytes]]:
    item = lookup(store, handle, _Fields)
    return [] if item is None else list(item.entries)


def _fields_clone(store: Any, handle: Any) -> ResourceHost:
    item = lookup(store, handle, _Fields)
    return own("fields", _Fields(list(item.entries) if item is not None else []))


def _request_new(store: Any, headers: Any) -> ResourceHost:
    fields = lookup(store, headers, _Fields)
    copy = current().add(_Fields(list(fields.entries) if fields is not None else []))
    return own("outgoing-request", _Request(copy))


def _request(store: Any, handle: Any) -> _Request | None:
    item: _Request | None = lookup(store, handle, _Request)
    return item


def _request_body(store: Any, handle: Any) -> Any:
    item = _request(store, handle)
    if item is None or item.body_taken:
        return Err()
    item.body_taken = True
    return Ok(own("outgoing-body", item.body))


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
        if item is None or not _plain(attribute, value):
            return Err()
        setattr(item, attribute, value)
        return Ok()

    return put


def _plain(attribute: str, value: Any) -> bool:
    """An authority without userinfo, path or fragment; a path from ``/``; no control character or space."""
    if value is None:
        return True
    text = str(value)
    if any(c in text for c in "\r\n\0 \t") or len(text) > 8192:
        return False
    if attribute == "authority":
        return not any(c in text for c in "/?#@\\")
    return text.startswith("/")


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
    fields = None if item is None else current().get(item.headers, _Fields)
    return own("fields", fields if fields is not None else _Fields([]))  # the request's own, shared


def _body_write(store: Any, handle: Any) -> Any:
    item = lookup(store, handle, Body)
    if item is None or item.stream_taken:
        return Err()
    item.stream_taken = True
    return Ok(own("output-stream", Output("body", item)))


def _body_finish(store: Any, handle: Any, trailers: Any) -> Any:
    item = lookup(store, handle, Body)
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
        _settle(future)
    return Ok(own("future-incoming-response", future))


def _future_subscribe(store: Any, handle: Any) -> ResourceHost:
    future = lookup(store, handle, _Future)
    return own("pollable", Pollable(check=None if future is None else lambda: _settle(future)))


def _future_get(store: Any, handle: Any) -> Any:
    item = lookup(store, handle, _Future)
    if item is None:
        return Some(Err())
    _settle(item)
    if item.answer is None:
        return None
    if item.taken:
        return Some(Err())
    item.taken = True
    answer = item.answer
    if isinstance(answer, Ok):
        return Some(Ok(Ok(ResourceHost.own(answer.value, TYPES["incoming-response"]))))
    return Some(Ok(Err(answer)))


def _response(store: Any, handle: Any) -> _Response | None:
    item: _Response | None = lookup(store, handle, _Response)
    return item


def _status(store: Any, handle: Any) -> int:
    item = _response(store, handle)
    return 0 if item is None else item.status


def _response_headers(store: Any, handle: Any) -> ResourceHost:
    item = _response(store, handle)
    fields = None if item is None else current().get(item.headers, _Fields)
    return own("fields", _Fields(list(fields.entries) if fields is not None else [], mutable=False))


def _consume(store: Any, handle: Any) -> Any:
    item = _response(store, handle)
    if item is None or item.consumed:
        return Err()
    item.consumed = True
    return Ok(own("incoming-body", Input(item.body)))


def _incoming_stream(store: Any, handle: Any) -> Any:
    item = lookup(store, handle, Input)
    if item is None:
        return Err()
    return Ok(own("input-stream", Input(item.data)))


def _incoming_finish(store: Any, handle: Any) -> ResourceHost:
    return own("future-trailers", object())


def _trailers_get(store: Any, handle: Any) -> Any:
    return Some(Ok(Ok(None)))


def _options_new(store: Any) -> ResourceHost:
    return own("request-options", {})


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
    "[method]future-trailers.subscribe": subscribe,
    "[method]future-trailers.get": _trailers_get,
    "http-error-code": lambda store, error: None,
}

_IMPLEMENTED: dict[str, dict[str, Callable[..., Any]]] = {
    **SYSTEM,
    "wasi:io/error": IO,
    "wasi:io/poll": IO,
    "wasi:io/streams": IO,
    "wasi:http/types": _HTTP,
    "wasi:http/outgoing-handler": {"handle": _handle},
}

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
            kind = RESOURCES.get((interface, export))
            if kind is not None:
                instance.add_resource(export, ResourceType.host(kind), drop_item)
        elif isinstance(item.ty, FuncType) and export in functions:
            instance.add_func(export, adapted(functions[export], item.ty))
