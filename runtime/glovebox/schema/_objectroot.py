"""A tool's schemas and values as surfaces that need a JSON object at the root see them.

MCP (``inputSchema``, ``outputSchema``, ``structuredContent``) and the LLM APIs
(OpenAI ``parameters``, Anthropic ``input_schema``) accept only an object at the
root. A tool whose input schema is not an object schema (``{"type": "string"}``,
``{}``, ``true``) is described there as ``{"input": <its schema>}`` and called
with the value of ``input``; a tool whose output schema is not an object schema
answers ``{"output": <its output>}`` in ``structuredContent``. Every surface
applies the same rule, through the functions here; the HTTP API and the Python
API pass values unchanged.

>>> input_parameters({"type": "string"})["properties"]
{'input': {'type': 'string'}}
>>> unwrap_input({"type": "string"}, {"input": "hello"})
'hello'
>>> wrap_output({"type": "array"}, ["a", "b"])
{'output': ['a', 'b']}
>>> wrap_output({"type": "object"}, {"a": 1})
{'a': 1}
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "INPUT_KEY",
    "OUTPUT_KEY",
    "input_parameters",
    "is_object_schema",
    "output_structure",
    "unwrap_input",
    "wrap_output",
]

#: The property holding a non-object input at an object-only surface.
INPUT_KEY = "input"
#: The property holding a non-object output in ``structuredContent``.
OUTPUT_KEY = "output"
_DEFINITIONS = ("$defs", "definitions")


def is_object_schema(schema: Any) -> bool:
    """Whether ``schema`` admits only JSON objects at its root (``"type": "object"``)."""
    return isinstance(schema, dict) and schema.get("type") == "object"


def _wrap(schema: Any, key: str) -> dict[str, Any]:
    inner = dict(schema) if isinstance(schema, dict) else ({} if schema is True else {"not": {}})
    # Definitions stay at the root, so that "#/$defs/..." references still resolve.
    hoisted = {name: inner.pop(name) for name in _DEFINITIONS if name in inner}
    for keyword in ("$schema", "$id"):
        if keyword in inner:
            hoisted[keyword] = inner.pop(keyword)
    return {
        **hoisted,
        "type": "object",
        "properties": {key: inner},
        "required": [key],
        "additionalProperties": False,
    }


def input_parameters(schema: Any) -> dict[str, Any]:
    """The object schema a surface shows for a tool's input schema."""
    return dict(schema) if is_object_schema(schema) else _wrap(schema, INPUT_KEY)


def unwrap_input(schema: Any, arguments: Any) -> Any:
    """The tool's input from the arguments a surface received for it.

    For a wrapped schema, arguments without the ``input`` key are passed on
    unchanged, so the tool's input validation names what is wrong.
    """
    if is_object_schema(schema) or not isinstance(arguments, dict) or INPUT_KEY not in arguments:
        return arguments
    if len(arguments) != 1:
        return arguments
    return arguments[INPUT_KEY]


def output_structure(schema: Any) -> dict[str, Any]:
    """The object schema a surface declares for a tool's output (MCP ``outputSchema``)."""
    return dict(schema) if is_object_schema(schema) else _wrap(schema, OUTPUT_KEY)


def wrap_output(schema: Any, output: Any) -> Any:
    """The tool's output as ``structuredContent``: unchanged for an object schema, else ``{"output": ...}``."""
    if is_object_schema(schema):
        return output
    return {OUTPUT_KEY: output}
