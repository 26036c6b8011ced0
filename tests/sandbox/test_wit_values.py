"""JSON ↔ WIT values: every type's JSON form checked, written as wasmtime's C value, and read back exactly."""

from __future__ import annotations

import math
from ctypes import byref
from typing import Any

import jsonschema
import pytest
import wasmtime._ffi as ffi

from glovebox.sandbox._wittypes import FuncShape, WitType, json_schema, output_schema, params_schema
from glovebox.sandbox._witvalues import ConversionError, OutputBudget, from_json, params_from_json, to_json, write

U8, U32, S64, U64 = WitType("u8"), WitType("u32"), WitType("s64"), WitType("u64")
STRING, CHAR, F32, F64, BOOL = WitType("string"), WitType("char"), WitType("f32"), WitType("f64"), WitType("bool")
POINT = WitType("record", items=(("x", WitType("s32")), ("y", WitType("s32"))))
SHAPE = WitType("variant", items=(("circle", F64), ("rect", POINT), ("empty", None)))
COLOR = WitType("enum", names=("red", "green"))
PERMS = WitType("flags", names=("read", "write", "exec"))
MAYBE = WitType("option", element=STRING)
NESTED = WitType("option", element=WitType("option", element=U32))
OUTCOME = WitType("result", items=(("ok", U32), ("err", STRING)))
BARE_RESULT = WitType("result", items=(("ok", None), ("err", None)))
PAIR = WitType("tuple", items=(("0", STRING), ("1", U32)))
BYTES = WitType("list", element=U8)
POINTS = WitType("list", element=POINT)


def roundtrip(ty: WitType, value: Any) -> Any:
    """``value`` through ``from_json``, the C value ``write`` builds, and ``to_json`` reading it."""
    raw = ffi.wasmtime_component_val_t()
    write(ty, from_json(ty, value, ""), raw)
    try:
        return to_json(ty, raw, [1_000_000])
    finally:
        ffi.wasmtime_component_val_delete(byref(raw))


@pytest.mark.parametrize(
    ("ty", "value"),
    [
        (BOOL, True),
        (U8, 255),
        (WitType("s8"), -128),
        (WitType("s32"), -(2**31)),
        (U32, 2**32 - 1),
        (U64, 2**53 - 1),
        (U64, str(2**64 - 1)),
        (S64, str(-(2**63))),
        (F64, 0.1),
        (F32, 0.5),
        (F64, "Infinity"),
        (F64, "-Infinity"),
        (CHAR, "é"),
        (CHAR, "😀"),
        (STRING, "héllo, wörld"),
        (STRING, ""),
        (BYTES, [0, 1, 255]),
        (PAIR, ["a", 4]),
        (POINT, {"x": 1, "y": -1}),
        (SHAPE, {"circle": 2.5}),
        (SHAPE, {"rect": {"x": 2, "y": 3}}),
        (SHAPE, "empty"),
        (COLOR, "green"),
        (PERMS, ["read", "exec"]),
        (PERMS, []),
        (MAYBE, None),
        (MAYBE, "x"),
        (NESTED, None),
        (NESTED, {"some": None}),
        (NESTED, {"some": 7}),
        (OUTCOME, {"ok": 3}),
        (OUTCOME, {"err": "bad"}),
        (BARE_RESULT, {"ok": None}),
        (POINTS, [{"x": 0, "y": 0}, {"x": 5, "y": 6}]),
    ],
)
def test_every_type_round_trips_exactly_and_fits_its_schema(ty: WitType, value: Any) -> None:
    assert roundtrip(ty, value) == value
    jsonschema.Draft202012Validator(json_schema(ty)).validate(value)


def test_wide_integers_are_numbers_within_2_to_53_and_strings_past_it() -> None:
    assert roundtrip(U64, 2**53 - 1) == 2**53 - 1
    assert roundtrip(U64, 2**53) == str(2**53)  # a JSON number past 2^53 loses precision in JavaScript
    assert roundtrip(S64, -(2**53)) == str(-(2**53))
    assert roundtrip(U64, "42") == 42


def test_nan_is_a_word() -> None:
    assert roundtrip(F64, "NaN") == "NaN"
    value = roundtrip(F32, 1e30)
    assert isinstance(value, float) and math.isclose(value, 1e30, rel_tol=1e-6)


@pytest.mark.parametrize(
    ("ty", "value", "path", "words"),
    [
        (U8, 256, "/", "out of range for u8"),
        (U8, -1, "/", "out of range"),
        (U8, True, "/", "expected an integer"),
        (U64, str(2**64), "/", "out of range for u64"),
        (U64, "12a", "/", "not a decimal u64"),
        (U32, "12", "/", "expected an integer"),  # strings only for 64-bit integers
        (F32, 1e39, "/", "out of range for f32"),
        (CHAR, "ab", "/", "one character"),
        (CHAR, "\ud800", "/", "lone surrogate"),
        (STRING, "a\udc00", "/", "lone surrogate"),
        (POINT, {"x": 1}, "/y", "is required"),
        (POINT, {"x": 1, "y": 2, "z": 3}, "/z", "not a field"),
        (POINTS, [{"x": 0, "y": 0}, {"x": 0, "y": 2**31}], "/1/y", "out of range for s32"),
        (SHAPE, "circle", "/", "not a case without a payload"),
        (SHAPE, {"square": 1}, "/", "not a case"),
        (SHAPE, {"empty": 1}, "/empty", "no payload"),
        (SHAPE, {"circle": 1, "rect": 2}, "/", "one case"),
        (COLOR, "blue", "/", "expected one of"),
        (PERMS, ["read", "read"], "/", "more than once"),
        (PERMS, ["root"], "/0", "expected one of"),
        (NESTED, 7, "/", "nested option"),
        (PAIR, ["a"], "/", "array of 2 items"),
    ],
)
def test_a_value_that_does_not_fit_names_its_path(ty: WitType, value: Any, path: str, words: str) -> None:
    with pytest.raises(ConversionError) as caught:
        from_json(ty, value, "")
    assert caught.value.path == path
    assert words in caught.value.reason


def test_parameters_are_an_object_and_a_left_out_option_is_none() -> None:
    shape = FuncShape((("p", POINT), ("label", MAYBE)), None)
    assert params_from_json(shape, {"p": {"x": 1, "y": 2}}) == [[1, 2], ("none", None)]
    with pytest.raises(ConversionError, match="/p: is required"):
        params_from_json(shape, {})
    with pytest.raises(ConversionError, match="/q: is not a parameter"):
        params_from_json(shape, {"p": {"x": 1, "y": 2}, "q": 1})
    with pytest.raises(ConversionError, match="object of the parameters"):
        params_from_json(shape, [1])
    schema = params_schema(shape)
    assert schema["required"] == ["p"] and schema["additionalProperties"] is False


def test_a_function_result_schema_is_its_ok_type() -> None:
    assert output_schema(FuncShape((), OUTCOME)) == json_schema(U32)
    assert output_schema(FuncShape((), None)) == {"type": "null"}


def test_reading_stops_at_the_budget() -> None:
    raw = ffi.wasmtime_component_val_t()
    write(BYTES, [1] * 100, raw)
    try:
        with pytest.raises(OutputBudget):
            to_json(BYTES, raw, [50])
        assert to_json(BYTES, raw, [101]) == [1] * 100
    finally:
        ffi.wasmtime_component_val_delete(byref(raw))
