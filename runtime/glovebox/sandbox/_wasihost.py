"""glovebox's own WASI 0.2 host: one call's resources, and functions put in wasmtime-py's forms.

The pieces the WASI interfaces of ``_wasiio`` and ``_wasihttp`` share: the values
their functions answer with (:class:`Ok`, :class:`Err`, :class:`Some`, tagged
``Variant``), the call's table of resources (:class:`WasiHost`, found through the
call on the thread), the host resource types, and :func:`adapted`, which wraps a
function for the component linker: every resource argument taken to the host's side,
the answer lowered into wasmtime-py's form by a plan made once per function.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import wasmtime
from wasmtime.component import (
    EnumType,
    FuncType,
    ListType,
    OptionType,
    Record,
    RecordType,
    ResourceAny,
    ResourceHost,
    ResultType,
    TupleType,
    Variant,
    VariantType,
)

from ._callstate import CallState, current_call

__all__ = [
    "MAX_BODY_BYTES", "MAX_ITEMS", "RESOURCES", "TYPES", "Body", "Err", "Input", "Ok", "Output", "Pollable", "Some",
    "WasiHost", "adapted", "current", "drop_item", "lookup", "own", "rep_of",
]  # fmt: skip

#: Bytes a guest may buffer in one outgoing body (the capability's own limit applies when it is sent).
MAX_BODY_BYTES = 64 * 1024 * 1024
#: Resources one call may hold at once; past it a new one is a dead handle (its functions answer errors).
MAX_ITEMS = 10_000


@dataclass(frozen=True)
class Ok:
    value: Any = None


@dataclass(frozen=True)
class Err:
    value: Any = None


@dataclass(frozen=True)
class Some:
    value: Any


@dataclass
class Body:
    """An outgoing body: what the guest wrote, and whether it finished it."""

    data: bytearray = field(default_factory=bytearray)
    stream_taken: bool = False
    finished: bool = False
    over: bool = False


@dataclass
class Input:
    data: bytes
    at: int = 0


@dataclass
class Output:
    kind: str  # "stdout", "stderr" or "body"
    body: Body | None = None


@dataclass
class Pollable:
    """Ready when ``until`` (monotonic seconds) has come, or when ``check`` says so."""

    until: float = 0.0
    check: Callable[[], bool] | None = None


class WasiHost:
    """One call's WASI resources, by handle."""

    def __init__(self, state: CallState | None) -> None:
        self.state = state
        self._items: dict[int, Any] = {}
        self._next = 1

    def add(self, item: Any) -> int:
        if len(self._items) >= MAX_ITEMS:
            return 0  # never raise into wasm: handle 0 is no item
        rep = self._next
        self._next += 1
        self._items[rep] = item
        return rep

    def get(self, rep: int, kind: type[Any]) -> Any:
        item = self._items.get(rep)
        return item if isinstance(item, kind) else None

    def drop(self, rep: int) -> None:
        self._items.pop(rep, None)


_HOSTS: dict[int, WasiHost] = {}


def current() -> WasiHost:
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
RESOURCES: dict[tuple[str, str], int] = {
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
TYPES = {name: ty for (_, name), ty in RESOURCES.items()}


def own(kind: str, item: Any) -> ResourceHost:
    return ResourceHost.own(current().add(item), TYPES[kind])


def rep_of(store: Any, handle: Any) -> int:
    """The host handle behind a resource argument (0 when it is not one of the host's)."""
    try:
        host = handle if isinstance(handle, ResourceHost) else handle.to_host(store)
        return int(host.rep)
    except wasmtime.WasmtimeError:
        return 0


def lookup(store: Any, handle: Any, kind: type[Any]) -> Any:
    return current().get(rep_of(store, handle), kind)


def drop_item(store: Any, rep: int) -> None:
    state = current_call()
    if state is not None and id(state) in _HOSTS:
        _HOSTS[id(state)].drop(rep)


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


def adapted(function: Callable[..., Any], ty: FuncType) -> Callable[..., Any]:
    lower = None if ty.result is None else _plan(ty.result)

    def call(store: Any, *args: Any) -> Any:
        # Every resource handed over is taken to the host's side at once: wasmtime ends a borrow there,
        # and a borrow a function left alone would fail the call ("borrow handles still remain").
        answer = function(store, *[_host_side(store, arg) for arg in args])
        return None if lower is None else lower(answer)

    return call
