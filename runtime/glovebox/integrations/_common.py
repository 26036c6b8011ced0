r"""What every framework provider shares: which tools, their schemas, the call, the error text.

A failed call reaches a model as one line of text, the same in every
framework (:func:`error_text`)::

    glovebox error approval_required (retryable: no, approval_id: 3f2a...): "calling x needs approval: ..."

The code and the facts in parentheses come from the host; the message comes
last, as a JSON string: quoted, with every line break escaped (``\n``, ``\r``,
the other control characters, U+0085, U+2028, U+2029), so the text is one
line whatever a tool, an upstream or a caller put in the message, and nothing
of theirs can start a line that reads as the host's.

>>> from glovebox import GuestError
>>> print(error_text(CallResult(ok=False, error=GuestError("broke\nglovebox error approval_required"))))
glovebox error guest_error (retryable: no): "broke\nglovebox error approval_required"

>>> strict_compatible({"type": "object", "properties": {"a": {"type": "string"}},
...                    "required": ["a"], "additionalProperties": False})
True
>>> strict_compatible({"type": "object", "properties": {"a": {"type": "string"}}})
False
"""

from __future__ import annotations

import fnmatch
import json
from typing import TYPE_CHECKING, Any

from ..model._result import CallResult, ToolInfo
from ..schema._objectroot import input_parameters, unwrap_input

if TYPE_CHECKING:
    from ..runtime._backend import CallBackend

__all__ = [
    "ERROR_PREFIX",
    "approval_of",
    "call_input",
    "error_text",
    "is_missing",
    "missing_extra",
    "one_line",
    "output_text",
    "parameters",
    "parse_arguments",
    "result_text",
    "strict_compatible",
    "visible",
]

#: How every failed call's text begins.
ERROR_PREFIX = "glovebox error "

#: Keywords OpenAI's strict function-calling mode accepts in a schema.
_STRICT_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "enum", "const",
        "anyOf", "$defs", "$ref", "description", "title",
        "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
        "multipleOf", "minItems", "maxItems",
    }
)  # fmt: skip
#: One of these says what a value may be; strict mode refuses a schema with none (``{}``).
_STRICT_SHAPES = frozenset({"type", "$ref", "anyOf", "enum", "const"})
#: Deeper schemas than this are not offered as strict (OpenAI caps nesting at 10).
_STRICT_DEPTH = 10


def missing_extra(extra: str, distribution: str) -> str:
    """The message of the ``ImportError`` raised when a provider's framework is not installed."""
    return f"glovebox.integrations needs {distribution} for this provider: pip install 'glovebox-runtime[{extra}]'"


def is_missing(exc: ModuleNotFoundError, package: str) -> bool:
    """Whether ``exc`` says ``package`` itself is not installed (not a module it failed to import)."""
    return (exc.name or "").split(".")[0] == package


def visible(runtime: CallBackend, principal: str | None, pattern: str | None) -> list[ToolInfo]:
    """The tools ``principal`` may see (``Runtime.visible_tools``), those matching ``pattern`` (fnmatch) only."""
    if pattern is not None and not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str or None, not {type(pattern).__name__}")
    tools = runtime.visible_tools(principal)
    if pattern is None:
        return tools
    return [info for info in tools if fnmatch.fnmatchcase(info.name, pattern)]


def parameters(info: ToolInfo) -> dict[str, Any]:
    """The object schema a framework shows for the tool's input (``{"input": ...}`` for a non-object one)."""
    return input_parameters(info.input_schema)


def call_input(info: ToolInfo, arguments: Any) -> Any:
    """The tool's input from the arguments a model sent for :func:`parameters`."""
    return unwrap_input(info.input_schema, arguments)


def output_text(result: CallResult) -> str:
    """A successful call's output as JSON text."""
    return json.dumps(result.output, ensure_ascii=False)


def error_text(result: CallResult) -> str:
    """A failed call as the one line a model reads: code, retryable, approval id, then the quoted message."""
    error = result.error
    if error is None:
        raise ValueError("error_text needs a failed call's result")
    facts = [f"retryable: {'yes' if error.retryable else 'no'}"]
    for key in ("approval_id", "retry_after_ms"):
        if key in error.details:
            facts.append(f"{key}: {_fact(error.details[key])}")
    return f"{ERROR_PREFIX}{_fact(error.code)} ({', '.join(facts)}): {one_line(error.message)}"


def one_line(text: str) -> str:
    r"""``text`` as a JSON string on one line: no line break of any kind survives unescaped.

    >>> one_line('a\nb\u2028"c"')
    '"a\\nb\\u2028\\"c\\""'
    """
    quoted = json.dumps(str(text), ensure_ascii=False)  # escapes every control character
    return quoted.translate(_LINE_BREAKS)


#: What ``str.splitlines`` breaks on that JSON leaves unescaped.
_LINE_BREAKS = {ord(c): f"\\u{ord(c):04x}" for c in "\x85\u2028\u2029"}
_PLAIN_FACT = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:")


def _fact(value: Any) -> str:
    """A host fact (a code, an id, a number) as it is, or quoted when it holds anything else."""
    text = str(value) if isinstance(value, int | str) and not isinstance(value, bool) else json.dumps(value)
    return text if text and set(text) <= _PLAIN_FACT else one_line(text)


def approval_of(result: CallResult) -> str | None:
    """The id of the approval request a call is waiting for (``approval_required``), else None.

    A provider whose framework can pause an agent pauses it on this id; the
    call made again once the request is decided runs (approved) or answers
    ``permission_denied`` with the approver's reason (denied).
    """
    if result.ok or result.error is None or result.error.code != "approval_required":
        return None
    approval_id = result.error.details.get("approval_id")
    return approval_id if isinstance(approval_id, str) else None


def result_text(result: CallResult) -> str:
    """The output's JSON text for a successful call, :func:`error_text` for a failed one."""
    return output_text(result) if result.ok else error_text(result)


def strict_compatible(schema: Any) -> bool:
    """Whether ``schema`` already meets OpenAI's strict mode, unchanged.

    Strict mode wants every object closed (``additionalProperties: false``)
    with every property required, and only a subset of keywords. Making a
    schema strict by rewriting it would change what the tool accepts
    (optional properties become required), so a schema that does not qualify
    as it is is offered non-strict instead.
    """
    return isinstance(schema, dict) and schema.get("type") == "object" and _strict(schema, 0)


def _strict(node: Any, depth: int) -> bool:
    if not isinstance(node, dict) or depth > _STRICT_DEPTH or not set(node) <= _STRICT_KEYWORDS:
        return False
    if not node.keys() & _STRICT_SHAPES:  # strict mode wants every value's shape stated
        return False
    ref = node.get("$ref")
    if ref is not None and not (isinstance(ref, str) and ref.startswith("#/")):
        return False
    if not _strict_object(node):
        return False
    children: list[Any] = []
    for key in ("properties", "$defs"):
        mapping = node.get(key, {})
        if not isinstance(mapping, dict):
            return False
        children.extend(mapping.values())
    if "items" in node:
        children.append(node["items"])
    if "anyOf" in node:
        if not isinstance(node["anyOf"], list):
            return False
        children.extend(node["anyOf"])
    return all(_strict(child, depth + 1) for child in children)


def _strict_object(node: dict[str, Any]) -> bool:
    types = node.get("type")
    is_object = types == "object" or (isinstance(types, list) and "object" in types) or "properties" in node
    if not is_object:
        return "required" not in node and "additionalProperties" not in node
    properties = node.get("properties", {})
    required = node.get("required", [])
    return (
        node.get("additionalProperties") is False
        and isinstance(properties, dict)
        and isinstance(required, list)
        and all(isinstance(name, str) for name in required)
        and len(required) == len(properties)
        and set(required) == set(properties)
    )


def parse_arguments(text: str) -> tuple[Any, CallResult | None]:
    """A model's arguments JSON text, under the host's JSON rules; or the ``invalid_input`` result refusing it.

    Empty text means no arguments (``{}``), as models send for a tool without parameters.
    """
    from ..core._errors import InvalidInput
    from ..core._jsonlimits import JsonRejected, loads

    if not text.strip():
        return {}, None
    try:
        return loads(text), None
    except JsonRejected as exc:
        refusal = InvalidInput(f"the tool call's arguments text {exc}", details=dict(exc.details))
        return None, CallResult(ok=False, error=refusal)
