"""JSON values to WIT values and back, exactly, through wasmtime's C value tree.

Input goes in two passes: :func:`from_json` checks a JSON value against its
:class:`~._wittypes.WitType` and normalises it (raising
:class:`ConversionError` with the JSON pointer of the first value that does not
fit, as schema errors name it: ``/p/x``, ``/value/points/3``), then :func:`write` builds the C value,
which cannot fail, so no half-built C value is ever left to free.

Output is read from the C value that wasmtime lifted (:func:`to_json`),
without building wasmtime-py's Python objects first, and counting every value:
past ``budget`` values (a guest answering a list of millions of items) the
reading stops with :class:`OutputBudget`. The caller frees the C value once.
The JSON forms are those of ``_wittypes``.
"""

from __future__ import annotations

import math
from ctypes import byref
from typing import Any

import wasmtime._ffi as ffi

from ._wittypes import INT_RANGES, MAX_SAFE_INTEGER, FuncShape, WitType

__all__ = ["ConversionError", "OutputBudget", "from_json", "params_from_json", "to_json", "write"]


class ConversionError(ValueError):
    """A value that does not fit its WIT type; ``path`` is its JSON pointer ("/" for the whole input)."""

    def __init__(self, path: str, message: str) -> None:
        path = path or "/"
        super().__init__(f"{path}: {message}")
        self.path = path
        self.reason = message


class OutputBudget(Exception):
    """An output with more values than the reader was allowed to read."""


# -- JSON → normalised values ------------------------------------------------------------------


def params_from_json(shape: FuncShape, value: Any) -> list[Any]:
    """The normalised arguments of a call from its JSON input object (a left-out ``option`` is none)."""
    if not isinstance(value, dict):
        raise ConversionError("/", f"the input is an object of the parameters, not {_kind_of(value)}")
    names = {name for name, _ in shape.params}
    extra = sorted(set(value) - names)
    if extra:
        raise ConversionError(f"/{extra[0]}", "is not a parameter of this function")
    args: list[Any] = []
    for name, ty in shape.params:
        path = f"/{name}"
        if name not in value:
            if ty.kind != "option":
                raise ConversionError(path, "is required")
            args.append(("none", None))
            continue
        args.append(from_json(ty, value[name], path))
    return args


def from_json(ty: WitType, value: Any, path: str) -> Any:
    """``value`` checked against ``ty`` and normalised for :func:`write`."""
    kind = ty.kind
    if kind in INT_RANGES:
        return _int(kind, value, path)
    reader = _READERS[kind]
    return reader(ty, value, path)


def _int(kind: str, value: Any, path: str) -> int:
    low, high = INT_RANGES[kind]
    if isinstance(value, str) and high > MAX_SAFE_INTEGER:
        text = value[1:] if value.startswith("-") else value
        if not text.isdigit() or not text.isascii() or len(text) > 20:
            raise ConversionError(path, f"{value!r} is not a decimal {kind}")
        value = int(value)
    elif isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConversionError(path, f"expected an integer ({kind}), got {_kind_of(value)}")
    if not low <= value <= high:
        raise ConversionError(path, f"{value} is out of range for {kind} ({low}..{high})")
    return value


def _bool(ty: WitType, value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ConversionError(path, f"expected a boolean, got {_kind_of(value)}")
    return value


def _float(ty: WitType, value: Any, path: str) -> float:
    if isinstance(value, str):
        words = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
        if value in words:
            return words[value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConversionError(path, f"expected a number, got {_kind_of(value)}")
    try:
        number = float(value)
    except OverflowError as exc:
        raise ConversionError(path, f"{value} is out of range for {ty.kind}") from exc
    if ty.kind == "f32" and math.isfinite(number) and abs(number) > 3.4028234663852886e38:
        raise ConversionError(path, f"{value} is out of range for f32")
    return number


def _char(ty: WitType, value: Any, path: str) -> str:
    if not isinstance(value, str) or len(value) != 1:
        raise ConversionError(path, f"expected a string of one character, got {_kind_of(value)}")
    if 0xD800 <= ord(value) <= 0xDFFF:
        raise ConversionError(path, "a lone surrogate is not a Unicode scalar value")
    return value


def _string(ty: WitType, value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise ConversionError(path, f"expected a string, got {_kind_of(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConversionError(path, f"holds a lone surrogate at character {exc.start}") from exc
    return value


def _list(ty: WitType, value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise ConversionError(path, f"expected an array, got {_kind_of(value)}")
    element = ty.element
    assert element is not None
    return [from_json(element, item, f"{path}/{i}") for i, item in enumerate(value)]


def _tuple(ty: WitType, value: Any, path: str) -> list[Any]:
    if not isinstance(value, list) or len(value) != len(ty.items):
        raise ConversionError(path, f"expected an array of {len(ty.items)} items, got {_kind_of(value)}")
    return [_item(t, item, f"{path}/{i}") for i, ((_, t), item) in enumerate(zip(ty.items, value, strict=True))]


def _item(ty: WitType | None, value: Any, path: str) -> Any:
    assert ty is not None  # a tuple's element always has a type
    return from_json(ty, value, path)


def _record(ty: WitType, value: Any, path: str) -> list[Any]:
    if not isinstance(value, dict):
        raise ConversionError(path, f"expected an object, got {_kind_of(value)}")
    names = [name for name, _ in ty.items]
    extra = sorted(set(value) - set(names))
    if extra:
        raise ConversionError(f"{path}/{extra[0]}", "is not a field of this record")
    fields = []
    for name, field in ty.items:
        assert field is not None
        if name not in value:
            raise ConversionError(f"{path}/{name}", "is required")
        fields.append(from_json(field, value[name], f"{path}/{name}"))
    return fields


def _variant(ty: WitType, value: Any, path: str) -> tuple[str, Any]:
    if isinstance(value, str):
        found = ty.case(value)
        if found is None or found[1] is not None:
            raise ConversionError(path, f"{value!r} is not a case without a payload of this {ty.kind}")
        return value, None
    if not isinstance(value, dict) or len(value) != 1:
        raise ConversionError(path, f'expected one case, as "case" or {{"case": payload}}, got {_kind_of(value)}')
    ((name, payload),) = value.items()
    found = ty.case(name)
    if found is None:
        raise ConversionError(path, f"{name!r} is not a case of this {ty.kind}")
    payload_type = found[1]
    if payload_type is None:
        if payload is not None:
            raise ConversionError(f"{path}/{name}", "this case has no payload (give null)")
        return name, None
    return name, from_json(payload_type, payload, f"{path}/{name}")


def _option(ty: WitType, value: Any, path: str) -> tuple[str, Any]:
    element = ty.element
    assert element is not None
    if value is None:
        return "none", None
    if element.kind == "option":
        if not isinstance(value, dict) or set(value) != {"some"}:
            raise ConversionError(path, 'expected null or {"some": value} (a nested option)')
        return "some", from_json(element, value["some"], f"{path}/some")
    return "some", from_json(element, value, path)


def _enum(ty: WitType, value: Any, path: str) -> str:
    if not isinstance(value, str) or value not in ty.names:
        raise ConversionError(path, f"expected one of {list(ty.names)}, got {_shown(value)}")
    return value


def _flags(ty: WitType, value: Any, path: str) -> list[str]:
    if not isinstance(value, list):
        raise ConversionError(path, f"expected an array of flag names, got {_kind_of(value)}")
    for index, name in enumerate(value):
        if not isinstance(name, str) or name not in ty.names:
            raise ConversionError(f"{path}/{index}", f"expected one of {list(ty.names)}, got {_shown(name)}")
    if len(set(value)) != len(value):
        raise ConversionError(path, "names a flag more than once")
    return list(value)


_READERS: dict[str, Any] = {
    "bool": _bool,
    "f32": _float,
    "f64": _float,
    "char": _char,
    "string": _string,
    "list": _list,
    "tuple": _tuple,
    "record": _record,
    "variant": _variant,
    "result": _variant,
    "option": _option,
    "enum": _enum,
    "flags": _flags,
}


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    return "an object"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- normalised values → C ------------------------------------------------------------------------

_KIND = {
    "bool": ffi.WASMTIME_COMPONENT_BOOL.value,
    "s8": ffi.WASMTIME_COMPONENT_S8.value,
    "u8": ffi.WASMTIME_COMPONENT_U8.value,
    "s16": ffi.WASMTIME_COMPONENT_S16.value,
    "u16": ffi.WASMTIME_COMPONENT_U16.value,
    "s32": ffi.WASMTIME_COMPONENT_S32.value,
    "u32": ffi.WASMTIME_COMPONENT_U32.value,
    "s64": ffi.WASMTIME_COMPONENT_S64.value,
    "u64": ffi.WASMTIME_COMPONENT_U64.value,
    "f32": ffi.WASMTIME_COMPONENT_F32.value,
    "f64": ffi.WASMTIME_COMPONENT_F64.value,
    "char": ffi.WASMTIME_COMPONENT_CHAR.value,
    "string": ffi.WASMTIME_COMPONENT_STRING.value,
    "list": ffi.WASMTIME_COMPONENT_LIST.value,
    "record": ffi.WASMTIME_COMPONENT_RECORD.value,
    "tuple": ffi.WASMTIME_COMPONENT_TUPLE.value,
    "variant": ffi.WASMTIME_COMPONENT_VARIANT.value,
    "enum": ffi.WASMTIME_COMPONENT_ENUM.value,
    "option": ffi.WASMTIME_COMPONENT_OPTION.value,
    "result": ffi.WASMTIME_COMPONENT_RESULT.value,
    "flags": ffi.WASMTIME_COMPONENT_FLAGS.value,
}
_UNION_FIELD = {"bool": "boolean", "char": "character"}


def write(ty: WitType, value: Any, out: Any) -> None:
    """Write the normalised ``value`` of ``ty`` into the C value ``out`` (to free with ``..._val_delete``)."""
    kind = ty.kind
    out.kind = _KIND[kind]
    of = out.of
    if kind in INT_RANGES or kind in ("bool", "f32", "f64"):
        setattr(of, _UNION_FIELD.get(kind, kind), value)
    elif kind == "char":
        of.character = ord(value)
    elif kind == "string":
        of.string = ffi.str_to_capi(value)
    elif kind == "enum":
        of.enumeration = ffi.str_to_capi(value)
    elif kind == "list":
        assert ty.element is not None
        of.list = _items(ffi.wasmtime_component_vallist_t(), [ty.element] * len(value), value)
    elif kind == "tuple":
        of.tuple = _items(ffi.wasmtime_component_valtuple_t(), [t for _, t in ty.items], value)
    else:
        _write_compound(ty, value, out)


def _items(raw: Any, types: list[Any], values: list[Any]) -> Any:
    """A list's or tuple's C items (both are a size and a pointer to values)."""
    if isinstance(raw, ffi.wasmtime_component_vallist_t):
        ffi.wasmtime_component_vallist_new_uninit(raw, len(values))
    else:
        ffi.wasmtime_component_valtuple_new_uninit(raw, len(values))
    for index, (item_type, item) in enumerate(zip(types, values, strict=True)):
        write(item_type, item, raw.data[index])
    return raw


def _write_compound(ty: WitType, value: Any, out: Any) -> None:
    kind, of = ty.kind, out.of
    if kind == "record":
        raw = ffi.wasmtime_component_valrecord_t()
        ffi.wasmtime_component_valrecord_new_uninit(raw, len(ty.items))
        for index, ((name, field), item) in enumerate(zip(ty.items, value, strict=True)):
            assert field is not None
            raw.data[index].name = ffi.str_to_capi(name)
            write(field, item, raw.data[index].val)
        of.record = raw
    elif kind == "flags":
        flags = ffi.wasmtime_component_valflags_t()
        ffi.wasmtime_component_valflags_new_uninit(flags, len(value))
        for index, name in enumerate(value):
            flags.data[index] = ffi.str_to_capi(name)
        of.flags = flags
    elif kind == "option":
        assert ty.element is not None
        of.option = _boxed(ty.element, value[1]) if value[0] == "some" else None
    elif kind == "result":
        name, payload = value
        found = ty.case(name)
        assert found is not None
        of.result.is_ok = name == "ok"
        of.result.val = None if found[1] is None else _boxed(found[1], payload)
    else:  # variant
        name, payload = value
        found = ty.case(name)
        assert found is not None
        of.variant.discriminant = ffi.str_to_capi(name)
        of.variant.val = None if found[1] is None else _boxed(found[1], payload)


def _boxed(ty: WitType, value: Any) -> Any:
    """A heap copy of one value (``wasmtime_component_val_new``), owned by its parent from then on."""
    raw = ffi.wasmtime_component_val_t()
    write(ty, value, raw)
    return ffi.wasmtime_component_val_new(byref(raw))


# -- C → JSON ------------------------------------------------------------------------------------


def to_json(ty: WitType, value: Any, budget: list[int]) -> Any:
    """The JSON form of the C value ``value`` of ``ty``; ``budget[0]`` values at most are read.

    Raises:
        OutputBudget: the value holds more than the budget.
    """
    budget[0] -= 1
    if budget[0] < 0:
        raise OutputBudget
    kind, of = ty.kind, value.of
    if kind in INT_RANGES:
        number = int(getattr(of, kind))
        return number if abs(number) <= MAX_SAFE_INTEGER else str(number)
    if kind in ("f32", "f64"):
        return _float_json(float(getattr(of, kind)))
    if kind == "bool":
        return bool(of.boolean)
    if kind == "char":
        return chr(of.character)
    if kind == "string":
        return ffi.to_str(of.string)
    if kind == "enum":
        return ffi.to_str(of.enumeration)
    if kind == "flags":
        return [ffi.to_str(of.flags.data[i]) for i in range(of.flags.size)]
    return _compound_json(ty, value, budget)


def _float_json(number: float) -> float | str:
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    return number


def _compound_json(ty: WitType, value: Any, budget: list[int]) -> Any:
    kind, of = ty.kind, value.of
    if kind == "list":
        assert ty.element is not None
        items = of.list
        if items.size > budget[0]:
            raise OutputBudget
        return [to_json(ty.element, items.data[i], budget) for i in range(items.size)]
    if kind == "tuple":
        return [to_json(t, of.tuple.data[i], budget) for i, (_, t) in enumerate(ty.items) if t is not None]
    if kind == "record":
        return {
            name: to_json(field, of.record.data[i].val, budget)
            for i, (name, field) in enumerate(ty.items)
            if field is not None
        }
    if kind == "option":
        assert ty.element is not None
        if not of.option:
            return None
        inner = to_json(ty.element, of.option.contents, budget)
        return {"some": inner} if ty.element.kind == "option" else inner
    if kind == "result":
        name = "ok" if of.result.is_ok else "err"
        return {name: _payload(ty, name, of.result.val, budget)}
    name = ffi.to_str(of.variant.discriminant)
    found = ty.case(name)
    if found is not None and found[1] is None:
        return name
    return {name: _payload(ty, name, of.variant.val, budget)}


def _payload(ty: WitType, name: str, pointer: Any, budget: list[int]) -> Any:
    found = ty.case(name)
    if found is None or found[1] is None or not pointer:
        return None
    return to_json(found[1], pointer.contents, budget)
