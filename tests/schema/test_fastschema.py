"""The quick accept path never says yes where jsonschema says no, in any dialect it takes."""

from __future__ import annotations

import collections
import enum
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from glovebox.schema._fastschema import accepter
from glovebox.schema._schemas import SchemaCheck

DIALECTS = [
    None,
    "http://json-schema.org/draft-06/schema#",
    "http://json-schema.org/draft-07/schema#",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
]
TYPES = ["object", "array", "string", "integer", "number", "boolean", "null"]
NAMES = st.sampled_from(["a", "b", "c", "é"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(-5, 5, allow_nan=False),
    st.sampled_from([0.0, 1.0, -0.0, 2.0]),
    st.text(max_size=4),
    st.sampled_from(["x", "y", "日本"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(NAMES, inner, max_size=4)),
    max_leaves=12,
)


def _keywords(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    number = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, -1.5, 2.0]))
    size = st.integers(0, 3)
    return st.fixed_dictionaries(
        {},
        optional={
            "type": st.one_of(st.sampled_from(TYPES), st.lists(st.sampled_from(TYPES), min_size=1, max_size=3)),
            "properties": st.dictionaries(NAMES, inner, max_size=3),
            "required": st.lists(NAMES, max_size=3, unique=True),
            "additionalProperties": st.one_of(st.booleans(), inner),
            "items": inner,
            "minimum": number,
            "maximum": number,
            "minLength": size,
            "maxLength": size,
            "minItems": size,
            "maxItems": size,
            "enum": st.lists(st.sampled_from(["x", "y", "日本", ""]), min_size=1, max_size=3),
            "description": st.just("annotation"),
        },
    )


SCHEMAS = st.recursive(st.just({}), _keywords, max_leaves=6)


def _valid(schema: Any, value: Any) -> bool:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return bool(cls(schema).is_valid(value))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SCHEMAS, VALUES, st.sampled_from(DIALECTS))
def test_a_quick_yes_is_a_jsonschema_yes(schema: dict[str, Any], value: Any, dialect: str | None) -> None:
    if dialect is not None:
        schema = {"$schema": dialect, **schema}
    accept = accepter(schema)
    assert accept is not None  # every generated keyword is in the subset
    if accept(value):
        assert _valid(schema, value), (schema, value)


class Color(enum.IntEnum):
    RED = 1


class Name(enum.StrEnum):
    X = "x"


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"properties": {"a": {"type": "string"}}}, collections.OrderedDict(a=1)),  # a dict subclass is an object
        ({"maximum": 0}, Color.RED),  # an int subclass is a number
        ({"maxLength": 0}, Name.X),  # a str subclass is a string
        ({"maxItems": 0}, type("L", (list,), {})([1])),  # a list subclass is an array
        ({"type": "integer"}, True),
        ({"type": "number"}, False),
        ({"required": ["1"]}, {1: "int key"}),
    ],
)
def test_values_jsonschema_may_see_otherwise_are_left_to_it(schema: dict[str, Any], value: Any) -> None:
    accept = accepter(schema)
    assert accept is not None
    assert accept(value) is False


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "^a"},
        {"$ref": "#/$defs/x", "$defs": {"x": {}}},
        {"type": "string", "format": "email"},
        {"enum": [1, "x"]},
        {"const": "x"},
        {"items": [{"type": "string"}]},
        {"properties": {"a": False}},
        {"patternProperties": {"^a": {}}, "additionalProperties": False},
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"},
        {"$schema": "http://json-schema.org/draft-03/schema#"},
        {"type": "objekt"},
        {"unevaluatedProperties": False},
        False,
    ],
)
def test_schemas_outside_the_subset_get_no_quick_path(schema: Any) -> None:
    assert accepter(schema) is None


def test_simple_valid_inputs_skip_jsonschema_and_invalid_ones_get_its_message() -> None:
    schema = {
        "type": "object",
        "required": ["text"],
        "additionalProperties": False,
        "properties": {"text": {"type": "string"}, "n": {"type": "integer", "minimum": 0}},
    }
    check = SchemaCheck.for_schema(schema, "input")
    assert check.accept is not None and check.accept({"text": "hi", "n": 3})
    check.validate({"text": "hi", "n": 3})
    with pytest.raises(Exception) as refused:
        check.validate({"text": "hi", "n": -1})
    assert getattr(refused.value, "code", None) == "invalid_input"
    assert "-1 is less than the minimum of 0" in str(refused.value)
    check.validate({"text": "hi", "n": 2.0})  # jsonschema's yes where the quick path was unsure
