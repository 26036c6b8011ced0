"""The host functions' values, read and written through wasmtime's C API.

wasmtime-py's generic host-function trampoline rebuilds the Python type objects
of a function on every call, converts a record field by field and a
``list<u8>`` one Python call per byte. The host interface's types are fixed by
the WIT world, so this module reads the ``http-request`` record and the ``log``
arguments straight from the ``wasmtime_component_val_t`` values the engine
hands over, and writes the ``result<http-response, http-error>`` the same way. A
byte list is copied with one strided slice over the values' memory (a value is
a kind byte and a payload, ``VAL_SIZE`` bytes apart), never byte by byte.

Ownership, as wasmtime's C API defines it: the arguments and the result slot
belong to the engine, which drops them when the callback returns. A callback
only reads its arguments and moves one finished value into its result slot;
a value is built from Python data that has already been checked and encoded,
so nothing can fail half-way through building it.

A component types its imports itself, so it may import a host function with
other types than the world's. A value of another shape is never read: it is
refused with :class:`WrongShape`, and the callback traps with
:data:`WRONG_TYPES` in its message (the call ends as ``guest_trap``).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Collection
from ctypes import byref
from typing import Any

import wasmtime
import wasmtime._ffi as ffi
from wasmtime.component import LinkerInstance

from ..core._world import WRONG_TYPES
from ._callstate import HttpRequest

__all__ = [
    "CALLBACK",
    "VAL_SIZE",
    "WrongShape",
    "add_func",
    "lift_host_call",
    "lift_log",
    "lift_query",
    "lift_request",
    "lower_response",
    "lower_result",
    "lower_sql",
    "lower_text",
    "string_args",
    "trap",
]

_VAL = ffi.wasmtime_component_val_t
_VAL_P = ctypes.POINTER(_VAL)
#: Bytes between two values of a list (its element stride).
VAL_SIZE = ctypes.sizeof(_VAL)
_KIND_AT = _VAL.kind.offset
_PAYLOAD_AT = _VAL.of.offset
#: The C signature of a component host function.
CALLBACK = ffi.wasmtime_component_func_callback_t
_NO_FINALIZER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)()

_U8 = ffi.WASMTIME_COMPONENT_U8.value
_U16 = ffi.WASMTIME_COMPONENT_U16.value
_STRING = ffi.WASMTIME_COMPONENT_STRING.value
_LIST = ffi.WASMTIME_COMPONENT_LIST.value
_RECORD = ffi.WASMTIME_COMPONENT_RECORD.value
_TUPLE = ffi.WASMTIME_COMPONENT_TUPLE.value
_VARIANT = ffi.WASMTIME_COMPONENT_VARIANT.value
_ENUM = ffi.WASMTIME_COMPONENT_ENUM.value
_OPTION = ffi.WASMTIME_COMPONENT_OPTION.value
_RESULT = ffi.WASMTIME_COMPONENT_RESULT.value

_REQUEST_FIELDS = (b"method", b"url", b"headers", b"body")
_ERROR_KINDS = frozenset({"denied", "timeout", "too-large", "network"})
_SQL_ERROR_KINDS = frozenset({"denied", "approval-required", "timeout", "database"})
_S64 = ffi.WASMTIME_COMPONENT_S64.value
_F64 = ffi.WASMTIME_COMPONENT_F64.value

_PyBUF_READ, _PyBUF_WRITE = 0x100, 0x200
_memory = ctypes.pythonapi.PyMemoryView_FromMemory
_memory.restype = ctypes.py_object
_memory.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int]


class WrongShape(Exception):
    """A host function was called with values of other types than the world's."""


def trap(message: str) -> int:
    """A wasmtime error for a callback to return: the guest traps with ``message``."""
    error = wasmtime.WasmtimeError(f"{WRONG_TYPES}: {message}")
    return ctypes.cast(error._consume(), ctypes.c_void_p).value or 0


def add_func(instance: LinkerInstance, name: str, callback: Any) -> None:
    """Define ``name`` in a linker instance as the C callback ``callback`` (kept alive by its caller)."""
    encoded = name.encode("utf-8")
    error = ffi.wasmtime_component_linker_instance_add_func(
        instance.ptr(), ctypes.create_string_buffer(encoded), len(encoded), callback, None, _NO_FINALIZER
    )
    if error:
        raise wasmtime.WasmtimeError._from_ptr(error)


# -- lifting: the guest's values, read in place ------------------------------------------------


def _name(vec: Any) -> bytes:
    size = vec.size
    return ctypes.string_at(vec.data, size) if size else b""


def _string(val: Any, what: str) -> str:
    if val.kind != _STRING:
        raise WrongShape(f"{what} is not a string")
    return _name(val.of.string).decode("utf-8")


def _bytes(val: Any, what: str) -> bytes:
    if val.kind != _LIST:
        raise WrongShape(f"{what} is not a list<u8>")
    count = val.of.list.size
    if not count:
        return b""
    address = ctypes.cast(val.of.list.data, ctypes.c_void_p).value
    view = _memory(address, count * VAL_SIZE, _PyBUF_READ)
    if view[_KIND_AT::VAL_SIZE] != bytes((_U8,)) * count:
        raise WrongShape(f"{what} is not a list<u8>")
    return view[_PAYLOAD_AT::VAL_SIZE].tobytes()  # type: ignore[no-any-return]


def _headers(val: Any) -> list[tuple[str, str]]:
    if val.kind != _LIST:
        raise WrongShape("headers is not a list")
    items = val.of.list
    headers = []
    for i in range(items.size):
        pair = items.data[i]
        if pair.kind != _TUPLE or pair.of.tuple.size != 2:
            raise WrongShape("a header is not a tuple<string, string>")
        name, value = pair.of.tuple.data[0], pair.of.tuple.data[1]
        headers.append((_string(name, "a header name"), _string(value, "a header value")))
    return headers


def lift_request(args: Any, count: int) -> HttpRequest:
    """The ``http-request`` record among ``http-fetch``'s arguments.

    Raises:
        WrongShape: the arguments are not one record of the world's fields and types.
    """
    if count != 1 or args[0].kind != _RECORD or args[0].of.record.size != len(_REQUEST_FIELDS):
        raise WrongShape("http-fetch takes one http-request record")
    fields = args[0].of.record.data
    for i, expected in enumerate(_REQUEST_FIELDS):
        if _name(fields[i].name) != expected:
            raise WrongShape(f"http-request field {i} is not `{expected.decode()}`")
    body = fields[3].val
    if body.kind != _OPTION:
        raise WrongShape("body is not an option")
    return HttpRequest(
        method=_string(fields[0].val, "method"),
        url=_string(fields[1].val, "url"),
        headers=_headers(fields[2].val),
        body=_bytes(body.of.option.contents, "body") if body.of.option else None,
    )


def lift_log(args: Any, count: int) -> tuple[str, str]:
    """``log``'s (level, message).

    Raises:
        WrongShape: the arguments are not a level enum and a string.
    """
    if count != 2 or args[0].kind != _ENUM:
        raise WrongShape("log takes a level and a message")
    return _name(args[0].of.enumeration).decode("utf-8"), _string(args[1], "message")


def lift_host_call(args: Any, count: int) -> tuple[str, str]:
    """``host-call``'s (kind, request).

    Raises:
        WrongShape: the arguments are not two strings.
    """
    if count != 2:
        raise WrongShape("host-call takes a kind and a request")
    return _string(args[0], "kind"), _string(args[1], "request")


def string_args(*names: str) -> Callable[[Any, int], tuple[str, ...]]:
    """The lift of a function taking the strings ``names``.

    The lift raises WrongShape when the arguments are not that many strings.
    """

    def lift(args: Any, count: int) -> tuple[str, ...]:
        if count != len(names):
            raise WrongShape(f"takes {len(names)} strings ({', '.join(names)})")
        return tuple(_string(args[i], name) for i, name in enumerate(names))

    return lift


def _sql_value(val: Any) -> Any:
    if val.kind != _VARIANT:
        raise WrongShape("a parameter is not a sql-value")
    case = _name(val.of.variant.discriminant)
    payload = val.of.variant.val
    if case == b"null":
        return None
    if not payload:
        raise WrongShape(f"sql-value {case.decode(errors='replace')} has no payload")
    inner = payload[0]
    if case == b"integer" and inner.kind == _S64:
        return int(inner.of.s64)
    if case == b"float" and inner.kind == _F64:
        return float(inner.of.f64)
    if case == b"text":
        return _string(inner, "a text parameter")
    if case == b"blob":
        return _bytes(inner, "a blob parameter")
    raise WrongShape("a parameter is not a sql-value")


def lift_query(args: Any, count: int) -> tuple[str, str, list[Any]]:
    """``query``'s (database, statement, params).

    Raises:
        WrongShape: the arguments are not two strings and a list of sql-values.
    """
    if count != 3 or args[2].kind != _LIST:
        raise WrongShape("query takes a database, a statement and a list of sql-values")
    items = args[2].of.list
    params = [_sql_value(items.data[i]) for i in range(items.size)]
    return _string(args[0], "database"), _string(args[1], "statement"), params


# -- lowering: the host's answer, built and moved into the result slot --------------------------


# The constructors hold the GIL (a PyDLL): they are short, and releasing the GIL
# around each of them would hand it to another thread a dozen times per answer.
_held = ctypes.PyDLL(ffi.dll._name)


def _bind(name: str, argtypes: list[Any], restype: Any = None) -> Any:
    function = getattr(_held, name)
    function.argtypes, function.restype = argtypes, restype
    return function


_byte_vec_new = _bind("wasm_byte_vec_new", [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p])
_list_new = _bind("wasmtime_component_vallist_new_uninit", [ctypes.c_void_p, ctypes.c_size_t])
_tuple_new = _bind("wasmtime_component_valtuple_new_uninit", [ctypes.c_void_p, ctypes.c_size_t])
_record_new = _bind("wasmtime_component_valrecord_new_uninit", [ctypes.c_void_p, ctypes.c_size_t])
_box = _bind("wasmtime_component_val_new", [ctypes.c_void_p], _VAL_P)  # moves the value, leaves it empty


def _string_val(target: Any, data: bytes) -> None:
    target.kind = _STRING
    _byte_vec_new(byref(target.of.string), len(data), data)


def _byte_list(target: Any, body: bytes) -> None:
    target.kind = _LIST
    raw = target.of.list
    count = len(body)
    _list_new(byref(raw), count)
    if count:
        view = _memory(ctypes.cast(raw.data, ctypes.c_void_p).value, count * VAL_SIZE, _PyBUF_WRITE)
        view[_KIND_AT::VAL_SIZE] = bytes((_U8,)) * count
        view[_PAYLOAD_AT::VAL_SIZE] = body


def _header_list(target: Any, pairs: list[tuple[bytes, bytes]]) -> None:
    target.kind = _LIST
    raw = target.of.list
    _list_new(byref(raw), len(pairs))
    data = raw.data
    for i, (name, value) in enumerate(pairs):
        element = data[i]
        element.kind = _TUPLE
        pair = element.of.tuple
        _tuple_new(byref(pair), 2)
        _string_val(pair.data[0], name)
        _string_val(pair.data[1], value)


def _ok(status: int, pairs: list[tuple[bytes, bytes]], body: bytes) -> Any:
    payload = _VAL()
    payload.kind = _RECORD
    record = payload.of.record
    _record_new(byref(record), 3)
    entries = record.data
    status_entry, headers_entry, body_entry = entries[0], entries[1], entries[2]
    _byte_vec_new(byref(status_entry.name), 6, b"status")
    status_entry.val.kind = _U16
    status_entry.val.of.u16 = status
    _byte_vec_new(byref(headers_entry.name), 7, b"headers")
    _header_list(headers_entry.val, pairs)
    _byte_vec_new(byref(body_entry.name), 4, b"body")
    _byte_list(body_entry.val, body)
    return _result(True, payload)


def _err(kind: bytes, reason: bytes) -> Any:
    case = _VAL()
    _string_val(case, reason)
    payload = _VAL()
    payload.kind = _VARIANT
    _byte_vec_new(byref(payload.of.variant.discriminant), len(kind), kind)
    payload.of.variant.val = _box(byref(case))
    return _result(False, payload)


def _result(is_ok: bool, payload: Any) -> Any:
    out = _VAL()
    out.kind = _RESULT
    out.of.result.is_ok = is_ok
    out.of.result.val = _box(byref(payload))
    return out


def lower_response(answer: Any, slot: Any) -> None:
    """Move ``answer`` (a response record or an ``http-error`` variant) into the result slot.

    Everything that can fail (types, ranges, UTF-8 encoding) is checked before
    anything is allocated, so a failure leaves the slot untouched.

    Raises:
        ValueError: ``answer`` is not a response with a status in 0..65535 or a known error kind.
        TypeError, AttributeError, UnicodeEncodeError: ``answer`` has fields of the wrong types.
    """
    tag = getattr(answer, "tag", None)
    if tag is not None:
        if tag not in _ERROR_KINDS:
            raise ValueError(f"unknown http-error kind {tag!r}")
        value = _err(tag.encode(), str(answer.payload).encode("utf-8"))
    else:
        status = answer.status
        if not isinstance(status, int) or not 0 <= status <= 0xFFFF:
            raise ValueError(f"HTTP status {status!r} is not a u16")
        pairs = [(name.encode("utf-8"), text.encode("utf-8")) for name, text in answer.headers]
        value = _ok(status, pairs, bytes(answer.body))
    ctypes.memmove(slot, byref(value), VAL_SIZE)


def lower_sql(answer: Any, slot: Any) -> None:
    """Move ``answer`` (the rows' JSON text, or a ``sql-error`` variant) into the result slot.

    Raises:
        ValueError: ``answer`` is a variant of an unknown kind.
        TypeError, AttributeError, UnicodeEncodeError: ``answer`` is neither.
    """
    if isinstance(answer, str):
        payload = _VAL()
        _string_val(payload, answer.encode("utf-8"))
        value = _result(True, payload)
    else:
        if answer.tag not in _SQL_ERROR_KINDS:
            raise ValueError(f"unknown sql-error kind {answer.tag!r}")
        value = _err(answer.tag.encode(), str(answer.payload).encode("utf-8"))
    ctypes.memmove(slot, byref(value), VAL_SIZE)


def lower_text(text: str, slot: Any) -> None:
    """Move the string ``text`` into the result slot.

    Raises:
        UnicodeEncodeError: ``text`` holds a lone surrogate.
    """
    value = _VAL()
    _string_val(value, text.encode("utf-8"))
    ctypes.memmove(slot, byref(value), VAL_SIZE)


def lower_result(answer: Any, slot: Any, *, ok: str, errors: Collection[str]) -> None:
    """Move ``answer`` into a ``result<OK, E>`` slot, ``E`` a variant of ``errors`` each carrying a string.

    ``ok`` is ``unit`` (``result<_, E>``: any answer that is not a variant),
    ``text`` (``result<string, E>``) or ``option-text`` (``result<option<string>, E>``:
    None or a string).

    Raises:
        ValueError: ``answer`` is a variant of another kind, or ``ok`` is unknown.
        TypeError, UnicodeEncodeError: ``answer`` is of the wrong type.
    """
    tag = getattr(answer, "tag", None)
    if tag is not None:
        if tag not in errors:
            raise ValueError(f"unknown error kind {tag!r}")
        value = _err(tag.encode(), str(answer.payload).encode("utf-8"))
    elif ok == "unit":
        value = _VAL()
        value.kind = _RESULT
        value.of.result.is_ok = True
        value.of.result.val = None
    elif ok == "text":
        payload = _VAL()
        _string_val(payload, answer.encode("utf-8"))
        value = _result(True, payload)
    elif ok == "option-text":
        encoded = None if answer is None else answer.encode("utf-8")
        payload = _VAL()
        payload.kind = _OPTION
        if encoded is None:
            payload.of.option = None
        else:
            inner = _VAL()
            _string_val(inner, encoded)
            payload.of.option = _box(byref(inner))
        value = _result(True, payload)
    else:
        raise ValueError(f"unknown ok type {ok!r}")
    ctypes.memmove(slot, byref(value), VAL_SIZE)
