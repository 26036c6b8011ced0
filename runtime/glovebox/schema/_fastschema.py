"""A quick yes for values that plainly match a simple schema; jsonschema decides the rest.

:func:`accepter` turns a schema written with a small set of keywords into a
function that answers True only when the value certainly matches. False means
"not sure": the full validator then runs, so it alone ever refuses a value
and writes every error message. A schema that uses any other keyword (``$ref``,
``pattern``, ``format``, ``enum`` of non-strings, ...) or names a dialect other
than draft 6, 7, 2019-09 or 2020-12 gets no accepter at all; nothing here
fetches or matches a regex.

The subset (identical in those dialects): ``type``, ``properties``,
``required``, ``additionalProperties``, ``items`` (one schema),
``minItems``/``maxItems``, ``minLength``/``maxLength``,
``minimum``/``maximum``, ``enum`` of strings, and annotations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["accepter"]

Accept = Callable[[Any], bool]

_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated", "readOnly"})
_DIALECTS = frozenset(
    {
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    }
)
_TYPES: dict[str, Accept] = {
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
    "string": lambda v: type(v) is str,
    "integer": lambda v: type(v) is int,
    "number": lambda v: type(v) is int or type(v) is float,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
}


class _Unsupported(Exception):
    """The schema uses something outside the subset."""


def accepter(schema: Any) -> Accept | None:
    """A function that returns True only for values certainly valid under ``schema``; None when the
    schema is outside the subset.

    >>> accept = accepter({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}})
    >>> accept({"a": "x"}), accept({"a": 1}), accept({})
    (True, False, False)
    >>> accepter({"type": "string", "pattern": "^a"}) is None
    True
    """
    if isinstance(schema, dict) and "$schema" in schema:
        if schema["$schema"] not in _DIALECTS:
            return None
        schema = {k: v for k, v in schema.items() if k != "$schema"}
    try:
        return _compile(schema)
    except _Unsupported:
        return None


def _compile(schema: Any) -> Accept:
    if schema is True:
        return lambda value: True
    if not isinstance(schema, dict):
        raise _Unsupported
    found = [_keyword(key, value, schema) for key, value in schema.items() if key not in _ANNOTATIONS]
    checks = tuple(check for check in found if check is not None)
    if len(checks) == 1:
        return checks[0]

    def accept(value: Any) -> bool:
        for check in checks:
            if not check(value):
                return False
        return True

    return accept


def _keyword(key: str, value: Any, schema: dict[str, Any]) -> Accept | None:
    if key == "type":
        return _type(value)
    if key in ("properties", "additionalProperties", "required"):
        return _object(schema) if key == "properties" or "properties" not in schema else None
    if key == "items":
        each = _compile(value)
        return lambda v: _other(v, list) if type(v) is not list else all(each(item) for item in v)
    if key in _BOUNDS:
        return _bound(key, value)
    if key == "enum" and isinstance(value, list) and all(type(item) is str for item in value):
        members = frozenset(value)
        return lambda v: type(v) is str and v in members
    raise _Unsupported


def _type(names: Any) -> Accept:
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not names or any(name not in _TYPES for name in names):
        raise _Unsupported
    tests = [_TYPES[name] for name in names]
    return tests[0] if len(tests) == 1 else lambda v: any(test(v) for test in tests)


def _object(schema: dict[str, Any]) -> Accept:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list):
        raise _Unsupported
    if not all(isinstance(name, str) for name in required):
        raise _Unsupported
    each = {name: _compile(sub) for name, sub in properties.items()}
    rest = _compile(extra) if extra is not False else None

    def accept(value: Any) -> bool:
        if type(value) is not dict:
            return _other(value, dict)  # these keywords only constrain objects
        for name in required:
            if name not in value:
                return False
        for name, item in value.items():
            check = each.get(name) if type(name) is str else None
            if check is None:
                if type(name) is not str or rest is None or not rest(item):
                    return False
            elif not check(item):
                return False
        return True

    return accept


def _bound(key: str, limit: Any) -> Accept:
    if type(limit) not in (int, float):
        raise _Unsupported
    kind, kinds, measure, low = _BOUNDS[key]

    def accept(value: Any) -> bool:
        if not kind(value):
            return _other(value, kinds)  # the keyword only constrains its own type
        size = measure(value)
        return bool(size >= limit if low else size <= limit)

    return accept


def _other(value: Any, kinds: type | tuple[type, ...]) -> bool:
    """Whether ``value`` is plainly not of ``kinds``; a subclass (``bool``, an ``IntEnum``, an
    ``OrderedDict``) is not plain, jsonschema may see it as one of ``kinds``."""
    return not isinstance(value, kinds)


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


_NUMBERS = (int, float)
_BOUNDS: dict[str, tuple[Accept, type | tuple[type, ...], Callable[[Any], Any], bool]] = {
    "minimum": (_is_number, _NUMBERS, lambda v: v, True),
    "maximum": (_is_number, _NUMBERS, lambda v: v, False),
    "minLength": (lambda v: type(v) is str, str, len, True),
    "maxLength": (lambda v: type(v) is str, str, len, False),
    "minItems": (lambda v: type(v) is list, list, len, True),
    "maxItems": (lambda v: type(v) is list, list, len, False),
}
