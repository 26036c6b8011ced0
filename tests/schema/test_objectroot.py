"""The one rule for surfaces that need an object at the root (MCP, LLM exports)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from glovebox.schema._objectroot import input_parameters, output_structure, unwrap_input, wrap_output

SCHEMAS: list[Any] = [
    {"type": "string"},
    {"type": "array", "items": {"$ref": "#/$defs/word"}, "$defs": {"word": {"type": "string", "minLength": 1}}},
    {},
    True,
    False,
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=repr)
@pytest.mark.parametrize("value", ["hello", ["a", "b"], [""], 3, None, {"k": 1}], ids=repr)
def test_a_wrapped_schema_accepts_exactly_what_the_tool_accepts(schema: Any, value: Any) -> None:
    wrapped = input_parameters(schema)
    assert wrapped["type"] == "object"
    jsonschema.Draft202012Validator.check_schema(wrapped)
    accepts = jsonschema.Draft202012Validator(schema).is_valid(value)
    assert jsonschema.Draft202012Validator(wrapped).is_valid({"input": value}) is accepts
    assert not jsonschema.Draft202012Validator(wrapped).is_valid(value if isinstance(value, dict) else {"x": value})
    assert unwrap_input(schema, {"input": value}) == value


@pytest.mark.parametrize("schema", SCHEMAS, ids=repr)
def test_a_wrapped_output_validates_against_the_declared_output_schema(schema: Any) -> None:
    value = ["a", "b"]
    declared = output_structure(schema)
    if jsonschema.Draft202012Validator(schema).is_valid(value):
        jsonschema.validate(wrap_output(schema, value), declared)


def test_object_schemas_pass_unchanged() -> None:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    assert input_parameters(schema) == schema and output_structure(schema) == schema
    assert unwrap_input(schema, {"input": 1}) == {"input": 1}
    assert wrap_output(schema, {"text": "x"}) == {"text": "x"}


def test_arguments_without_the_input_key_reach_the_tool_unchanged() -> None:
    assert unwrap_input({"type": "string"}, {"other": 1}) == {"other": 1}
    assert unwrap_input({"type": "string"}, {"input": "a", "other": 1}) == {"input": "a", "other": 1}
