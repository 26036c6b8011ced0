"""WIT types of a component's exports, read once from wasmtime, and the JSON Schemas they stand for.

A typed export (any component function other than glovebox's ``call``) takes
and answers WIT values; a caller sends and receives JSON. :class:`WitType` is a
plain, immutable copy of one wasmtime type (``wasmtime.component.ValType``),
made once per export, from which both the JSON Schema (:func:`json_schema`)
and the conversions (``_witvalues``) are driven. The JSON form of each type:

======================  =====================================================
WIT                     JSON
======================  =====================================================
``bool``                ``true`` / ``false``
``u8`` … ``s32``        an integer within the type's range
``u64``, ``s64``        an integer; beyond ±(2^53 − 1) a decimal string
                        (JavaScript loses precision past it): either form is
                        accepted as input, outputs use the string past it
``f32``, ``f64``        a number, or ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
``char``                a string of one Unicode scalar value
``string``              a string (lone surrogates refused)
``list<T>``             an array (``list<u8>`` too: an array of integers)
``tuple<A, B>``         an array of exactly that many items
``record``              an object with every field, named as in WIT
``variant``             ``"case"`` for a case without a payload, else
                        ``{"case": payload}`` (serde's external tagging)
``enum``                ``"case"``
``flags``               an array of the names set, each at most once
``option<T>``           ``null`` or T; ``option<option<T>>``: ``null``,
                        ``{"some": null}`` or ``{"some": T}``
``result<T, E>``        ``{"ok": T}`` or ``{"err": E}`` (``null`` without a
                        payload); a function's own result: its ``ok`` is the
                        output and its ``err`` the ``guest_error``
======================  =====================================================

Resources (``own``/``borrow``), futures, streams and error contexts have no
JSON form: a function using one is refused, with the reason
(:class:`Unsupported`). Types nest at most :data:`MAX_TYPE_DEPTH` deep.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wasmtime import component as wc

__all__ = [
    "INT_RANGES",
    "MAX_SAFE_INTEGER",
    "MAX_TYPE_DEPTH",
    "FuncShape",
    "Unsupported",
    "WitType",
    "func_shape",
    "json_schema",
]

#: Deeper types are refused at registration (a hostile component's type bomb).
MAX_TYPE_DEPTH = 32
#: The largest integer a JSON number carries exactly in every language (2^53 − 1).
MAX_SAFE_INTEGER = 2**53 - 1

INT_RANGES: dict[str, tuple[int, int]] = {
    "u8": (0, 2**8 - 1),
    "u16": (0, 2**16 - 1),
    "u32": (0, 2**32 - 1),
    "u64": (0, 2**64 - 1),
    "s8": (-(2**7), 2**7 - 1),
    "s16": (-(2**15), 2**15 - 1),
    "s32": (-(2**31), 2**31 - 1),
    "s64": (-(2**63), 2**63 - 1),
}
_SCALARS: dict[type, str] = {
    wc.Bool: "bool",
    wc.U8: "u8",
    wc.U16: "u16",
    wc.U32: "u32",
    wc.U64: "u64",
    wc.S8: "s8",
    wc.S16: "s16",
    wc.S32: "s32",
    wc.S64: "s64",
    wc.F32: "f32",
    wc.F64: "f64",
    wc.Char: "char",
    wc.String: "string",
}
_FLOAT_WORDS = ("NaN", "Infinity", "-Infinity")


class Unsupported(Exception):
    """A type with no JSON form (a resource, a future, a stream) or nested too deeply."""


@dataclass(frozen=True)
class WitType:
    """One WIT value type.

    ``kind`` is a scalar's name (``bool``, ``u8`` … ``string``) or ``list``,
    ``tuple``, ``record``, ``variant``, ``enum``, ``flags``, ``option``,
    ``result``. ``items`` holds a record's fields, a variant's cases or a
    tuple's elements as ``(name, type)`` pairs (a case without payload has
    None), and a result's ``ok``/``err``; ``names`` an enum's or flags' names;
    ``element`` a list's or option's item type.
    """

    kind: str
    items: tuple[tuple[str, WitType | None], ...] = ()
    names: tuple[str, ...] = ()
    element: WitType | None = None

    def case(self, name: str) -> tuple[int, WitType | None] | None:
        """The index and payload type of a variant's (or result's) case ``name``."""
        for index, (case, payload) in enumerate(self.items):
            if case == name:
                return index, payload
        return None


@dataclass(frozen=True)
class FuncShape:
    """A typed export's parameters and result."""

    params: tuple[tuple[str, WitType], ...]
    result: WitType | None


def func_shape(ty: wc.FuncType) -> FuncShape:
    """The shape of a function type; raises :class:`Unsupported` naming what has no JSON form."""
    params = []
    for name, param in ty.params:
        params.append((name, _wit_type(param, f"parameter {name!r}", 0)))
    result = ty.result
    return FuncShape(tuple(params), None if result is None else _wit_type(result, "the result", 0))


def _wit_type(ty: wc.ValType, where: str, depth: int) -> WitType:
    if depth >= MAX_TYPE_DEPTH:
        raise Unsupported(f"{where} nests types more than {MAX_TYPE_DEPTH} deep")
    scalar = _SCALARS.get(type(ty))
    if scalar is not None:
        return WitType(scalar)
    deeper = depth + 1
    if isinstance(ty, wc.ListType):
        return WitType("list", element=_wit_type(ty.element, where, deeper))
    if isinstance(ty, wc.OptionType):
        return WitType("option", element=_wit_type(ty.payload, where, deeper))
    if isinstance(ty, wc.RecordType):
        return WitType("record", items=tuple((n, _wit_type(t, where, deeper)) for n, t in ty.fields))
    if isinstance(ty, wc.TupleType):
        return WitType("tuple", items=tuple((str(i), _wit_type(t, where, deeper)) for i, t in enumerate(ty.elements)))
    if isinstance(ty, wc.VariantType):
        cases = tuple((n, None if t is None else _wit_type(t, where, deeper)) for n, t in ty.cases)
        return WitType("variant", items=cases)
    if isinstance(ty, wc.ResultType):
        ok, err = ty.ok, ty.err
        return WitType(
            "result",
            items=(
                ("ok", None if ok is None else _wit_type(ok, where, deeper)),
                ("err", None if err is None else _wit_type(err, where, deeper)),
            ),
        )
    if isinstance(ty, wc.EnumType):
        return WitType("enum", names=tuple(ty.names))
    if isinstance(ty, wc.FlagsType):
        return WitType("flags", names=tuple(ty.names))
    if isinstance(ty, (wc.OwnType, wc.BorrowType)):
        raise Unsupported(f"{where} is a resource handle, which has no JSON form")
    raise Unsupported(f"{where} is a {type(ty).__name__}, which has no JSON form")


# -- JSON Schemas ------------------------------------------------------------------------------


def json_schema(ty: WitType | None) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12 keywords) of a type's JSON form; ``None`` (no result) is ``null``."""
    if ty is None:
        return {"type": "null"}
    kind = ty.kind
    if kind in INT_RANGES:
        return _int_schema(kind)
    simple = _SIMPLE.get(kind)
    if simple is not None:
        return dict(simple)
    return _COMPOUND[kind](ty)


def _int_schema(kind: str) -> dict[str, Any]:
    low, high = INT_RANGES[kind]
    number = {"type": "integer", "minimum": low, "maximum": high}
    if high <= MAX_SAFE_INTEGER:
        return number
    pattern = r"^(0|[1-9][0-9]*)$" if low == 0 else r"^(0|-?[1-9][0-9]*)$"
    return {
        "anyOf": [number, {"type": "string", "pattern": pattern}],
        "description": f"{kind}: a decimal string past 2^53",
    }


_FLOAT = {"anyOf": [{"type": "number"}, {"enum": list(_FLOAT_WORDS)}]}
_SIMPLE: dict[str, dict[str, Any]] = {
    "bool": {"type": "boolean"},
    "f32": _FLOAT,
    "f64": _FLOAT,
    "char": {"type": "string", "minLength": 1, "maxLength": 1},
    "string": {"type": "string"},
}


def _list_schema(ty: WitType) -> dict[str, Any]:
    return {"type": "array", "items": json_schema(ty.element)}


def _tuple_schema(ty: WitType) -> dict[str, Any]:
    items = [json_schema(t) for _, t in ty.items]
    return {"type": "array", "prefixItems": items, "items": False, "minItems": len(items)}


def _record_schema(ty: WitType) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: json_schema(t) for name, t in ty.items},
        "required": [name for name, _ in ty.items],
        "additionalProperties": False,
    }


def _variant_schema(ty: WitType) -> dict[str, Any]:
    bare = [name for name, payload in ty.items if payload is None]
    choices: list[dict[str, Any]] = [{"enum": bare}] if bare else []
    for name, payload in ty.items:
        if payload is not None:
            choices.append(_tagged(name, json_schema(payload)))
    return {"oneOf": choices} if len(choices) > 1 else choices[0]


def _tagged(name: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {name: payload}, "required": [name], "additionalProperties": False}


def _option_schema(ty: WitType) -> dict[str, Any]:
    assert ty.element is not None
    inner = json_schema(ty.element)
    if ty.element.kind == "option":
        return {"anyOf": [{"type": "null"}, _tagged("some", inner)]}
    return {"anyOf": [{"type": "null"}, inner]}


def _result_schema(ty: WitType) -> dict[str, Any]:
    return {"oneOf": [_tagged(name, json_schema(payload)) for name, payload in ty.items]}


def _enum_schema(ty: WitType) -> dict[str, Any]:
    return {"enum": list(ty.names)}


def _flags_schema(ty: WitType) -> dict[str, Any]:
    return {"type": "array", "items": {"enum": list(ty.names)}, "uniqueItems": True}


_COMPOUND = {
    "list": _list_schema,
    "tuple": _tuple_schema,
    "record": _record_schema,
    "variant": _variant_schema,
    "option": _option_schema,
    "result": _result_schema,
    "enum": _enum_schema,
    "flags": _flags_schema,
}


def params_schema(shape: FuncShape) -> dict[str, Any]:
    """The input schema of a typed export: an object of its parameters (an ``option`` one may be left out)."""
    return {
        "type": "object",
        "properties": {name: json_schema(t) for name, t in shape.params},
        "required": [name for name, t in shape.params if t.kind != "option"],
        "additionalProperties": False,
    }


def output_schema(shape: FuncShape) -> dict[str, Any]:
    """The output schema: the result's JSON form; of a ``result<T, E>`` result, T's (E is the error)."""
    result = shape.result
    if result is not None and result.kind == "result":
        return json_schema(result.items[0][1])
    return json_schema(result)
