"""A direct path for calling ``call: func(string) -> result<string, string>``.

``wasmtime.component.Func.__call__`` re-reads the function's type and builds
Python type objects on every call (tens of microseconds for a small tool).
The export's type was checked once, at registration (see ``_validate``), so
this module lowers the one string argument and lifts the one result with the
C API directly.
"""

from __future__ import annotations

import ctypes
from ctypes import byref

import wasmtime
import wasmtime._ffi as ffi
from wasmtime.component import Func

__all__ = ["call_tool"]


def call_tool(func: Func, store: wasmtime.Store, text: str) -> tuple[bool, str]:
    """Call the tool's export; return (is_ok, payload).

    Raises:
        wasmtime.WasmtimeError: a trap, an interrupt or a lifting failure.
    """
    params = (ffi.wasmtime_component_val_t * 1)()
    params[0].kind = ffi.WASMTIME_COMPONENT_STRING
    params[0].of.string = ffi.str_to_capi(text)
    result = ffi.wasmtime_component_val_t()
    try:
        error = ffi.wasmtime_component_func_call(byref(func._func), store._context(), params, 1, byref(result), 1)
    finally:
        ffi.wasmtime_component_val_delete(byref(params[0]))
    if error:
        raise wasmtime.WasmtimeError._from_ptr(error)
    try:
        return _lift(result)
    finally:
        ffi.wasmtime_component_val_delete(byref(result))


def _lift(result: ffi.wasmtime_component_val_t) -> tuple[bool, str]:
    if result.kind != ffi.WASMTIME_COMPONENT_RESULT.value:
        raise wasmtime.WasmtimeError("`call` returned a value that is not a result")
    payload: ctypes._Pointer[ffi.wasmtime_component_val_t] = result.of.result.val
    if not payload or payload.contents.kind != ffi.WASMTIME_COMPONENT_STRING.value:
        raise wasmtime.WasmtimeError("`call` returned a result without a string payload")
    return bool(result.of.result.is_ok), ffi.to_str(payload.contents.of.string)


def post_return(func: Func, store: wasmtime.Store) -> None:
    """Run the export's post-return (the guest frees its result)."""
    error = ffi.wasmtime_component_func_post_return(byref(func._func), store._context())
    if error:
        raise wasmtime.WasmtimeError._from_ptr(error)
