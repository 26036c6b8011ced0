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
from typing import Any

import wasmtime
import wasmtime._bindings as bindings
import wasmtime._ffi as ffi
from wasmtime.component import ExportIndex, Func

from ..engine._settings import StoreCaps

__all__ = ["Instantiation", "RawStore", "call_tool", "post_return"]


def call_tool(func: Func, store: wasmtime.Store, text: str) -> tuple[bool, str]:
    """Call the tool's export; return (is_ok, payload).

    Raises:
        wasmtime.WasmtimeError: a trap, an interrupt or a lifting failure.
    """
    return _call_export(byref(func._func), store._context(), text)


def _call_export(func: Any, context: Any, text: str) -> tuple[bool, str]:
    """Lower ``text``, run the export (the GIL is released), lift its result."""
    params = (ffi.wasmtime_component_val_t * 1)()
    params[0].kind = ffi.WASMTIME_COMPONENT_STRING
    params[0].of.string = ffi.str_to_capi(text)
    result = ffi.wasmtime_component_val_t()
    try:
        error = ffi.wasmtime_component_func_call(func, context, params, 1, byref(result), 1)
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


# -- A store driven through the C API directly ------------------------------------------
#
# ctypes releases the GIL around every foreign call made through a CDLL. For the
# short calls of one invocation (make a store, set its limits, look up an export,
# run post-return, drop the store) the release and re-acquisition cost more than
# the call, and with several threads they hand the GIL back and forth at every
# step. The same functions bound through a PyDLL keep the GIL; only the calls
# that run guest code (instantiation runs the start function, and `call`) go
# through the CDLL and let other threads run.

_held = ctypes.PyDLL(ffi.dll._name)
_NO_FINALIZER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)()
_ErrorPtr = ctypes.POINTER(ffi.wasmtime_error_t)


def _bind(name: str, restype: object, argtypes: list[object]) -> Any:
    function = getattr(_held, name)
    function.restype = restype
    function.argtypes = argtypes
    return function


_store_new = _bind("wasmtime_store_new", ctypes.POINTER(ffi.wasmtime_store_t), bindings._wasmtime_store_new.argtypes)
_store_context = _bind(
    "wasmtime_store_context", ctypes.POINTER(ffi.wasmtime_context_t), [ctypes.POINTER(ffi.wasmtime_store_t)]
)
_store_limiter = _bind("wasmtime_store_limiter", None, bindings._wasmtime_store_limiter.argtypes)
_store_delete = _bind("wasmtime_store_delete", None, [ctypes.POINTER(ffi.wasmtime_store_t)])
_set_fuel = _bind("wasmtime_context_set_fuel", _ErrorPtr, bindings._wasmtime_context_set_fuel.argtypes)
_get_fuel = _bind("wasmtime_context_get_fuel", _ErrorPtr, bindings._wasmtime_context_get_fuel.argtypes)
_set_deadline = _bind(
    "wasmtime_context_set_epoch_deadline", None, bindings._wasmtime_context_set_epoch_deadline.argtypes
)
_get_func = _bind(
    "wasmtime_component_instance_get_func", ctypes.c_bool, bindings._wasmtime_component_instance_get_func.argtypes
)
_post_return = _bind(
    "wasmtime_component_func_post_return", _ErrorPtr, bindings._wasmtime_component_func_post_return.argtypes
)
_instantiate = bindings._wasmtime_component_linker_instantiate  # runs guest code: releases the GIL


def _check(error: Any) -> None:
    if error:
        raise wasmtime.WasmtimeError._from_ptr(error)


class RawStore:
    """One Store for one invocation, with its limits set; ``close()`` drops it."""

    def __init__(
        self, engine: wasmtime.Engine, memory_bytes: int, fuel: int, deadline_ticks: int, caps: StoreCaps
    ) -> None:
        self._store = _store_new(engine.ptr(), None, _NO_FINALIZER)
        self._context = _store_context(self._store)
        _store_limiter(self._store, memory_bytes, caps.table_elements, caps.instances, caps.tables, caps.memories)
        _check(_set_fuel(self._context, fuel))
        _set_deadline(self._context, deadline_ticks)

    def fuel_left(self) -> int:
        fuel = ctypes.c_uint64(0)
        return int(fuel.value) if not _get_fuel(self._context, byref(fuel)) else 0

    def call(self, linker: Any, component: Any, index: Any, text: str) -> tuple[bool, str]:
        """Instantiate, call ``call(text)``, run post-return; raise WasmtimeError on any failure.

        Raises ``Instantiation`` (a WasmtimeError) when the failure happened
        before the guest's ``call`` started.
        """
        instance = ffi.wasmtime_component_instance_t()
        error = _instantiate(linker.ptr(), self._context, component.ptr(), byref(instance))
        if error:
            raise Instantiation._from_ptr(error)
        func = ffi.wasmtime_component_func_t()
        if not isinstance(index, ExportIndex) or not _get_func(
            byref(instance), self._context, index.ptr(), byref(func)
        ):
            raise Instantiation("component does not export `call`")
        answer = _call_export(byref(func), self._context, text)
        _check(_post_return(byref(func), self._context))
        return answer

    def close(self) -> None:
        if self._store:
            _store_delete(self._store)
            self._store = None


class Instantiation(wasmtime.WasmtimeError):
    """A failure before the guest's ``call`` began (linking, start function, limits)."""
