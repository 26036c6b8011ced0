"""Typed exports: a component's own functions, found, checked and called with JSON.

A component that does not export glovebox's ``call`` may still be a tool:
each function it exports — at the top of its world (``greet``) or in an
exported interface (``demo:greeter/greet@0.1.0`` → ``hello``) — is one tool,
its input an object of the function's parameters and its output the
function's result, in the JSON forms of ``_wittypes``. :func:`typed_exports`
lists them (refusing what has no JSON form, with the reason);
:func:`call_typed` lowers one call's arguments, runs the function and lifts
its result as JSON text. A function returning ``result<T, E>`` answers ``T``,
or fails with ``E`` as the ``guest_error`` message (a string as it is, any
other type as its JSON text).
"""

from __future__ import annotations

import json
import weakref
from ctypes import byref
from dataclasses import dataclass
from typing import Any

import wasmtime
import wasmtime._ffi as ffi
from wasmtime.component import Component, ComponentInstanceType, ExportIndex, Func, FuncType, ResourceType

from ..core._world import EXPORT_NAME
from ._wittypes import FuncShape, Unsupported, func_shape
from ._witvalues import OutputBudget, to_json, write

__all__ = ["OutputTooBig", "TypedExport", "call_typed", "export_index", "typed_exports", "Unsupported"]

#: Prefixes of the functions a resource brings with it (``[method]counter.add``): refused.
_RESOURCE_FUNCS = ("[constructor]", "[method]", "[static]")


@dataclass(frozen=True)
class TypedExport:
    """One exported function: ``interface`` is the exported interface's name ("" at the world's top)."""

    interface: str
    function: str
    shape: FuncShape

    @property
    def qualified(self) -> str:
        """``interface#function``, or the function alone at the world's top."""
        return f"{self.interface}#{self.function}" if self.interface else self.function


class OutputTooBig(Exception):
    """The function's result holds more values than the output limit can hold."""


def typed_exports(engine: wasmtime.Engine, component: Component) -> list[TypedExport]:
    """Every exported function of ``component``, in export order.

    Raises:
        Unsupported: an export uses a resource, a future or a stream, or nests too deeply.
    """
    found = []
    for name, item in component.type.exports(engine).items():
        ty = item.ty
        if isinstance(ty, FuncType):
            found.append(_export("", name, ty))
        elif isinstance(ty, ComponentInstanceType):
            for function, inner in ty.exports(engine).items():
                inner_ty = inner.ty
                if isinstance(inner_ty, ResourceType):
                    raise Unsupported(f"the interface {name} exports the resource {function!r}; resources are refused")
                if isinstance(inner_ty, FuncType):
                    found.append(_export(name, function, inner_ty))
    return found


def _export(interface: str, function: str, ty: FuncType) -> TypedExport:
    where = f"{interface}#{function}" if interface else function
    if function.startswith(_RESOURCE_FUNCS):
        raise Unsupported(f"{where} belongs to a resource; resources are refused")
    try:
        return TypedExport(interface, function, func_shape(ty))
    except Unsupported as exc:
        raise Unsupported(f"{where}: {exc}") from exc


def exports_glovebox_call(engine: wasmtime.Engine, component: Component) -> bool:
    """Whether the component exports glovebox's own ``call`` at its top (then it is a glovebox tool)."""
    return EXPORT_NAME in component.type.exports(engine)


_INDEXES: weakref.WeakKeyDictionary[Component, dict[tuple[str, str], ExportIndex]] = weakref.WeakKeyDictionary()


def export_index(component: Component, interface: str, function: str) -> ExportIndex | None:
    """The index of a typed export (cached per component)."""
    kept = _INDEXES.setdefault(component, {})
    index = kept.get((interface, function))
    if index is None:
        outer = component.get_export_index(interface) if interface else None
        if interface and outer is None:
            return None
        index = component.get_export_index(function, outer)
        if index is None:
            return None
        kept[(interface, function)] = index
    return index


def call_typed(func: Func, store: wasmtime.Store, shape: FuncShape, args: list[Any], budget: int) -> tuple[bool, str]:
    """Run ``func`` with the normalised ``args``; answer ``(is_ok, JSON text or error message)``.

    Raises:
        wasmtime.WasmtimeError: a trap, an interrupt or a result wasmtime could not lift.
        OutputTooBig: the result holds more than ``budget`` values.
    """
    count = len(shape.params)
    params = (ffi.wasmtime_component_val_t * max(count, 1))()
    written = 0
    result = ffi.wasmtime_component_val_t()
    has_result = shape.result is not None
    try:
        for (_, ty), value in zip(shape.params, args, strict=True):
            write(ty, value, params[written])
            written += 1
        error = ffi.wasmtime_component_func_call(
            byref(func._func), store._context(), params, count, byref(result) if has_result else None, int(has_result)
        )
    finally:
        for index in range(written):
            ffi.wasmtime_component_val_delete(byref(params[index]))
    if error:
        raise wasmtime.WasmtimeError._from_ptr(error)
    if shape.result is None:
        return True, "null"
    try:
        return _answer(shape, result, budget)
    finally:
        ffi.wasmtime_component_val_delete(byref(result))


def _answer(shape: FuncShape, result: Any, budget: int) -> tuple[bool, str]:
    ty = shape.result
    assert ty is not None
    try:
        value = to_json(ty, result, [budget])
    except OutputBudget as exc:
        raise OutputTooBig from exc
    if ty.kind != "result":
        return True, _dumps(value)
    ((case, payload),) = value.items()
    if case == "ok":
        return True, _dumps(payload)
    if isinstance(payload, str):
        return False, payload
    return False, _dumps(payload) if payload is not None else ""


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
